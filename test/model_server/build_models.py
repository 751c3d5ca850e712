"""SavedModels the model server's tests build themselves, all exported by one TensorFlow subprocess.

    python test/model_server/build_models.py EXPORT_DIR    writes EXPORT_DIR/<model>/1/saved_model.pb

Models (TF2 exports, `serving_default` signature):
  batch_reveal  x float32 [batch] -> y = 2x + 0 * batch_size, batch_size int32 [batch] (the size of the batch
                each row was computed in: shows server-side batching merged requests)
  strings       s string [batch] -> upper (upper-cased), echo_bytes (s unchanged; written as b64 in JSON)
  three_inputs  a float32 [batch], b int64 [batch], c bool [batch] -> sum = a + b (float32), not_c = !c
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

MODELS = ("batch_reveal", "strings", "three_inputs")


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
        @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="a"),
                                      tf.TensorSpec([None], tf.int64, name="b"),
                                      tf.TensorSpec([None], tf.bool, name="c")])
        def serve(self, a, b, c):
            return {"sum": a + tf.cast(b, tf.float32), "not_c": tf.logical_not(c)}

    for name, cls in zip(MODELS, (BatchReveal, Strings, ThreeInputs)):
        module = cls()
        tf.saved_model.save(module, str(export_dir / name / "1"), signatures={"serving_default": module.serve})


if __name__ == "__main__":
    _export(Path(sys.argv[1]))
