"""Models the model server's tests build themselves, all exported by one TensorFlow subprocess.

    python test/model_server/build_models.py EXPORT_DIR    writes EXPORT_DIR/<model>/1/saved_model.pb or model.tflite

SavedModels (TF2 exports, `serving_default` signature):
  batch_reveal  x float32 [batch] -> y = 2x + 0 * batch_size, batch_size int32 [batch] (the size of the batch
                each row was computed in: shows server-side batching merged requests)
  strings       s string [batch] -> upper (upper-cased), echo_bytes (s unchanged; written as b64 in JSON)
  three_inputs  a float32 [batch], b int64 [batch], c bool [batch] -> sum = a + b (float32), not_c = !c

TensorFlow Lite models, converted from the SavedModel of a tf.function exported under the signature `scale`
  (x float32 [batch, 2], n int32 [batch] -> scaled = 3x + 1, doubled = 2n):
  tflite_scale          as the converter writes it: tensors `scale_x:0`, `scale_n:0`, `PartitionedCall:0`
                        (doubled) and `:1` (scaled); the converter's own signature runner `scale`
  tflite_scale_sigdefs  the same, with the `signature_defs_metadata` TFS reads (as TFS's tooling writes it: a
                        flexbuffer map of key to serialized SignatureDef): `serving_default` (x, n -> scaled,
                        doubled) and `doubled_only` (n -> doubled)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

MODELS = ("batch_reveal", "strings", "three_inputs")
TFLITE_MODELS = ("tflite_scale", "tflite_scale_sigdefs")


def build_all(export_dir: Path) -> Path:
    subprocess.run([sys.executable, __file__, str(export_dir)], check=True, capture_output=True)
    return export_dir


def _export(export_dir: Path) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    class BatchReveal(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
        def serve(self, x):
            batch = tf.shape(x)[0]
            return {"y": x * 2.0 + 0.0 * tf.cast(batch, tf.float32), "batch_size": tf.fill([batch], batch)}

    class Strings(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="s")])
        def serve(self, s):
            return {"upper": tf.strings.upper(s), "echo_bytes": tf.identity(s)}

    class ThreeInputs(tf.Module):
        @tf.function(
            input_signature=[
                tf.TensorSpec([None], tf.float32, name="a"),
                tf.TensorSpec([None], tf.int64, name="b"),
                tf.TensorSpec([None], tf.bool, name="c"),
            ]
        )
        def serve(self, a, b, c):
            return {"sum": a + tf.cast(b, tf.float32), "not_c": tf.logical_not(c)}

    for name, cls in zip(MODELS, (BatchReveal, Strings, ThreeInputs), strict=True):
        module = cls()
        tf.saved_model.save(module, str(export_dir / name / "1"), signatures={"serving_default": module.serve})
    _export_tflite(tf, export_dir)


def _export_tflite(tf, export_dir: Path) -> None:
    from flatbuffers import flexbuffers
    from tensorflow.core.protobuf import meta_graph_pb2
    from tensorflow.lite.python import schema_py_generated as schema
    from tensorflow.lite.tools import flatbuffer_utils

    class Scale(tf.Module):
        @tf.function(
            input_signature=[tf.TensorSpec([None, 2], tf.float32, name="x"), tf.TensorSpec([None], tf.int32, name="n")]
        )
        def scale(self, x, n):
            return {"scaled": x * 3.0 + 1.0, "doubled": n * 2}

    module = Scale()
    saved = export_dir / "scale_saved_model"
    tf.saved_model.save(module, str(saved), signatures={"scale": module.scale})
    converter = tf.lite.TFLiteConverter.from_saved_model(str(saved), signature_keys=["scale"])
    plain = converter.convert()
    (export_dir / "tflite_scale" / "1").mkdir(parents=True)
    (export_dir / "tflite_scale" / "1" / "model.tflite").write_bytes(plain)

    def signature(inputs: dict, outputs: dict, dtypes: dict) -> bytes:
        proto = meta_graph_pb2.SignatureDef(method_name="tensorflow/serving/predict")
        for target, entries in ((proto.inputs, inputs), (proto.outputs, outputs)):
            for alias, tensor in entries.items():
                target[alias].name = tensor
                target[alias].dtype = dtypes[alias]
        return proto.SerializeToString()

    float_, int32 = tf.float32.as_datatype_enum, tf.int32.as_datatype_enum
    kinds = {"x": float_, "scaled": float_, "n": int32, "doubled": int32}
    stored = {
        "serving_default": signature(
            {"x": "scale_x:0", "n": "scale_n:0"}, {"scaled": "PartitionedCall:1", "doubled": "PartitionedCall:0"}, kinds
        ),
        "doubled_only": signature({"n": "scale_n:0"}, {"doubled": "PartitionedCall:0"}, kinds),
    }
    builder = flexbuffers.Builder()
    with builder.Map():
        for key, value in stored.items():
            builder.Key(key)
            # a STRING holding the serialized proto, as TFS's tooling stores it (Builder.String takes text only)
            builder._WriteBlob(value, append_zero=True, type_=flexbuffers.Type.STRING)  # noqa: SLF001
    model = flatbuffer_utils.convert_bytearray_to_object(bytearray(plain))
    buffer = schema.BufferT()
    buffer.data = list(builder.Finish())
    model.buffers.append(buffer)
    metadata = schema.MetadataT()
    metadata.name = "signature_defs_metadata"
    metadata.buffer = len(model.buffers) - 1
    model.metadata = [*(model.metadata or []), metadata]
    (export_dir / "tflite_scale_sigdefs" / "1").mkdir(parents=True)
    (export_dir / "tflite_scale_sigdefs" / "1" / "model.tflite").write_bytes(
        bytes(flatbuffer_utils.convert_object_to_bytearray(model))
    )


if __name__ == "__main__":
    _export(Path(sys.argv[1]))
