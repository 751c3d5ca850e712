"""A TensorFlow Lite model version (`model.tflite`, served with --prefer_tflite_model), run as TFS's TfLiteSession
runs it, on a pool of LiteRT interpreters.

Signatures, as TFS makes them: the SignatureDefs stored in the model's `signature_defs_metadata` (what TFS's
tooling writes: a flexbuffer map of signature key to serialized SignatureDef), each tensor name checked against
the model's inputs or outputs (`x:0` may match the tensor `x`, as older converters dropped the suffix). Without
that metadata, one `serving_default` predict signature of every input and output, keyed by tensor name without
`:0`. The converter's own signature runners are not read: TFS does not read them either, and a client written
against this server must work against TFS.

An interpreter is not thread-safe, so each run takes one from a pool of --num_tflite_pools x
--num_tflite_interpreters_per_pool interpreters of one thread each (TFS's interpreters have one thread too), and
concurrent runs use different interpreters. An input whose shape differs from the interpreter's current one
resizes it first, as TFS does. Unlike TFS, which copies the bytes of whatever it is sent, a feed of another dtype
than the input's is refused with TensorFlow's message. The interpreter is LiteRT's (`ai-edge-litert`): README,
"TensorFlow Lite models", says why.
"""

from __future__ import annotations

import logging
import queue
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..shared import dtypes
from ..shared.cpus import cpu_count
from ..shared.error_codes import Code, ServingError, invalid_argument
from .servable import PREDICT_METHOD, RunOptions, Servable, Signature

log = logging.getLogger(__name__)

MODEL_FILE = "model.tflite"
SIGNATURES_METADATA = b"signature_defs_metadata"

# the TensorFlow types TFS maps TFLite tensors to; any other TFLite type fails the load (TfLiteTypeToTfType)
_SERVED_TYPES = {
    dtypes.DT_FLOAT,
    dtypes.DT_INT32,
    dtypes.DT_UINT8,
    dtypes.DT_INT64,
    dtypes.DT_STRING,
    dtypes.DT_BOOL,
    dtypes.DT_INT16,
    8,
    dtypes.DT_INT8,
}  # 8: DT_COMPLEX64
# TfLiteType numbers of the numpy types TFS refuses, for its message
_TFLITE_TYPE_NUMBERS = {
    np.dtype(np.float16): 10,
    np.dtype(np.float64): 11,
    np.dtype(np.complex128): 12,
    np.dtype(np.uint64): 13,
    np.dtype(np.uint32): 16,
    np.dtype(np.uint16): 17,
}


def found(path: Path) -> bool:
    return (path / MODEL_FILE).is_file()


def interpreter_count(pools: int, per_pool: int) -> int:
    """--num_tflite_pools (0: one per core, TFS's default) x --num_tflite_interpreters_per_pool (at least 1)."""
    return (pools if pools > 0 else cpu_count()) * max(1, per_pool)


def _legacy_name(name: str) -> str:
    """TF tensor names end in `:0`; early TFLite converters dropped the suffix."""
    return name.split(":", 1)[0]


def _fixed_name(name: str, known: Mapping[str, int], context: str) -> str:
    if name in known:
        return name
    if _legacy_name(name) in known:
        return _legacy_name(name)
    raise ServingError(Code.INTERNAL, f"Unknown tensor '{name}'.\n\t{context}")


def _data_type(detail: dict) -> int:
    np_dtype = np.dtype(detail["dtype"])
    data_type = dtypes.from_numpy(np_dtype) if np_dtype.kind in "OSUbiufc" else None
    if data_type not in _SERVED_TYPES:
        raise ServingError(Code.INTERNAL, f"Unknown TfLite type: {_TFLITE_TYPE_NUMBERS.get(np_dtype, np_dtype)}")
    return data_type


def _tensor_info(detail: dict) -> Any:
    """A TensorInfo proto of a TFLite tensor: its name, TensorFlow type and current dims."""
    from tensorflow.core.protobuf import meta_graph_pb2

    info = meta_graph_pb2.TensorInfo(name=detail["name"], dtype=detail["data_type"])
    for size in detail["shape"]:
        info.tensor_shape.dim.add(size=int(size))
    return info


def _metadata_signatures(buffer: bytes) -> dict[str, Any]:
    """The SignatureDefs of the model's `signature_defs_metadata` ({} without it)."""
    from ai_edge_litert import schema_py_generated as schema
    from flatbuffers import flexbuffers
    from tensorflow.core.protobuf import meta_graph_pb2

    model = schema.Model.GetRootAsModel(buffer, 0)
    for i in range(model.MetadataLength()):
        entry = model.Metadata(i)
        if entry.Name() != SIGNATURES_METADATA:
            continue
        try:
            data = model.Buffers(entry.Buffer()).DataAsNumpy()
            stored = flexbuffers.GetRoot(data.tobytes() if isinstance(data, np.ndarray) else b"").AsMap
            signatures = {}
            for key, value in zip(stored.Keys, stored.Values, strict=True):
                signature = meta_graph_pb2.SignatureDef()
                signature.ParseFromString(bytes(value.AsStringBytes if value.IsString else value.AsBlob))
                signatures[key.AsKey] = signature
            return signatures
        except Exception as exc:  # noqa: BLE001 - a metadata entry that is not a flexbuffer map of SignatureDefs
            raise invalid_argument(
                f"Invalid SignatureDefs found in TfLite model: {type(exc).__name__}: {exc}"
            ) from None
    return {}


def _signatures(
    buffer: bytes, inputs: Mapping[str, Any], outputs: Mapping[str, Any], runner_signatures: Sequence[str]
) -> dict[str, Signature]:
    """TFS's signatures of a TFLite model: its metadata's, names fixed, or one generated serving_default."""
    from tensorflow.core.protobuf import meta_graph_pb2

    stored = _metadata_signatures(buffer)
    if stored:
        for proto in stored.values():
            for alias, info in proto.inputs.items():
                info.name = _fixed_name(info.name, inputs, f"Signature input {alias} references an unknown tensor")
            for alias, info in proto.outputs.items():
                info.name = _fixed_name(info.name, outputs, f"Signature output {alias} references an unknown tensor")
        return {key: Signature.from_proto(key, proto) for key, proto in stored.items()}
    log.warning(
        "No signature def found in TFLite model. Generating one.%s",
        f" (The model's signature runners {', '.join(runner_signatures)} are not read, as TensorFlow Serving "
        "does not read them.)"
        if runner_signatures
        else "",
    )
    proto = meta_graph_pb2.SignatureDef(method_name=PREDICT_METHOD)
    for entries, target in ((inputs, proto.inputs), (outputs, proto.outputs)):
        for name in sorted(entries):  # TFS's order (a std::map): of two names equal without `:N`, the last wins
            alias = _legacy_name(name)
            if alias in target:
                log.warning(
                    "TFLite tensors %s and %s are both %r in the generated signature: only %s is served, "
                    "as in TensorFlow Serving (store signature_defs_metadata to serve both)",
                    target[alias].name,
                    name,
                    alias,
                    name,
                )
            target[alias].CopyFrom(_tensor_info(entries[name]))
    return {"serving_default": Signature.from_proto("serving_default", proto)}


class _Interpreter:
    """One interpreter and the input shapes it is allocated for."""

    def __init__(self, interpreter: Any):
        self.interpreter = interpreter
        self.shapes = {d["index"]: tuple(d["shape"]) for d in interpreter.get_input_details()}


class TfLiteServable(Servable):
    def __init__(
        self,
        name: str,
        version: int,
        path: Path,
        signatures: dict[str, Signature],
        interpreters: list,
        inputs: dict[str, dict],
        outputs: dict[str, dict],
    ):
        super().__init__(name, version, path, signatures)
        self._inputs = {name: (detail["index"], detail["data_type"]) for name, detail in inputs.items()}
        self._outputs = {name: detail["index"] for name, detail in outputs.items()}
        self._idle: queue.SimpleQueue[_Interpreter] = queue.SimpleQueue()
        for interpreter in interpreters:
            self._idle.put(_Interpreter(interpreter))

    def is_small(self, fetches: Sequence[str]) -> bool:
        # inline runs happen on an event loop: only when an interpreter is free, so that the loop seldom waits
        return super().is_small(fetches) and not self._idle.empty()

    def _run(
        self, feeds: Mapping[str, np.ndarray], fetches: Sequence[str], options: RunOptions | None, small: bool
    ) -> list[np.ndarray]:
        # a deadline (options) is not applied: a TFLite run cannot be interrupted, in TFS either. Names are the
        # tensors' own: load matched the signatures' names to them (_fixed_name)
        placed = []
        for position, (name, value) in enumerate(feeds.items()):
            index, data_type = self._inputs.get(name, (None, None))
            if index is None:
                raise ServingError(Code.INTERNAL, f"Unknown tensor '{name}'.\n\tMissing input TFLite tensor: {name}")
            given = dtypes.from_numpy(value.dtype)
            if given != data_type:
                raise invalid_argument(
                    f"Expects arg[{position}] to be {dtypes.name(data_type)} but {dtypes.name(given)} is provided"
                )
            placed.append((index, value))
        indices = []
        for name in fetches:
            index = self._outputs.get(name)
            if index is None:
                raise ServingError(Code.INTERNAL, f"Missing output TFLite tensor: {name}: Unknown tensor '{name}'.")
            indices.append(index)
        held = self._idle.get()
        try:
            interpreter = held.interpreter
            for index, value in placed:
                if held.shapes.get(index) != value.shape:
                    self._resize(held, index, value)
                interpreter.set_tensor(index, value)
            try:
                interpreter.invoke()
            except Exception:  # noqa: BLE001 - whatever LiteRT raises, TFS answers INTERNAL with its own text
                raise ServingError(Code.INTERNAL, "Failed to invoke TfLite interpreter") from None
            return [interpreter.get_tensor(index) for index in indices]
        finally:
            self._idle.put(held)

    @staticmethod
    def _resize(held: _Interpreter, index: int, value: np.ndarray) -> None:
        interpreter = held.interpreter
        held.shapes.pop(index, None)  # unknown until the resize succeeds
        try:
            interpreter.resize_tensor_input(index, list(value.shape))
        except Exception:  # noqa: BLE001 - as in _run
            detail = interpreter.get_tensor_details()[index]
            raise ServingError(
                Code.INTERNAL, f"Failed to resize input tensor: {detail['name']} to shape {list(value.shape)}"
            ) from None
        try:
            interpreter.allocate_tensors()
        except Exception:  # noqa: BLE001 - as in _run
            raise ServingError(Code.INTERNAL, "Failed to allocate tensors") from None
        held.shapes[index] = value.shape


def load(name: str, version: int, path: Path, interpreters: int = 1) -> TfLiteServable:
    """Load `path/model.tflite` into `interpreters` interpreters; raises ServingError saying why it cannot be
    served."""
    file = path / MODEL_FILE
    try:
        buffer = file.read_bytes()
    except OSError as exc:
        raise ServingError(Code.NOT_FOUND, f"{file}: {exc.strerror}") from None
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        raise ServingError(
            Code.FAILED_PRECONDITION,
            "TensorFlow Lite models need the ai-edge-litert package (pip install 'sagemaker-tfs[model-server]')",
        ) from None
    made = []
    for _ in range(interpreters):
        try:
            interpreter = Interpreter(model_content=buffer, num_threads=1)
            interpreter.allocate_tensors()
        except ValueError as exc:  # not a TFLite flatbuffer
            raise invalid_argument(f"Cannot build FlatBufferModel from buffer. ({exc})") from None
        except RuntimeError as exc:  # e.g. an operator the interpreter does not have
            raise ServingError(Code.INTERNAL, f"Cannot build Interpreter from buffer. ({exc})") from None
        made.append(interpreter)
    first = made[0]
    inputs: dict[str, dict] = {}
    outputs: dict[str, dict] = {}
    for kind, details, target in (
        ("Input", first.get_input_details(), inputs),
        ("Output", first.get_output_details(), outputs),
    ):
        for detail in details:
            if detail["name"] in target:
                raise ServingError(Code.ALREADY_EXISTS, f"{kind} tensor name: {detail['name']} has multiple indices")
            target[detail["name"]] = {**detail, "data_type": _data_type(detail)}
    signatures = _signatures(buffer, inputs, outputs, list(first.get_signature_list()))
    log.info("TensorFlow Lite model %s: %d interpreter%s", file, interpreters, "s" if interpreters > 1 else "")
    return TfLiteServable(name, version, path, signatures, made, inputs, outputs)
