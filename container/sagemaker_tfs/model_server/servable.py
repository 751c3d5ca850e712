"""One loaded model version. `Servable` is what the front ends and runners use: signatures whose tensors are named,
and a timed, thread-safe `run` by tensor name. `SavedModelServable` runs a SavedModel (tflite_servable.py runs a
TensorFlow Lite model).

Every SavedModel (TF1 graphs and TF2 exports alike) is loaded with the TF1 loader into its own `tf.Graph`
and `tf.Session`; `tf.saved_model.load` cannot load some real TF1 models. A signature is run by feeding and
fetching its tensors by name through the C session API. Like TFS (and unlike `Session.run` in Python), the
feeds' shapes are not checked against the placeholders' static shapes: `x:0` of shape [-1, 1] accepts [3].
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from ..shared import dtypes
from ..shared.error_codes import Code, ServingError, from_tensorflow
from ..shared.logs import quiet_tensorflow

log = logging.getLogger(__name__)

PREDICT_METHOD = "tensorflow/serving/predict"
CLASSIFY_METHOD = "tensorflow/serving/classify"
REGRESS_METHOD = "tensorflow/serving/regress"


def import_tensorflow() -> ModuleType:
    quiet_tensorflow()
    import tensorflow as tf

    return tf


@dataclass(frozen=True)
class SessionOptions:
    intra_op_parallelism: int = 0
    inter_op_parallelism: int = 0
    per_process_gpu_memory_fraction: float = 0.0
    tags: tuple[str, ...] = ("serve",)


@dataclass(frozen=True)
class TensorInfo:
    alias: str
    name: str  # the graph tensor, e.g. "x:0"
    dtype: int  # DataType number
    shape: tuple[int, ...] | None  # None: unknown rank (or not recorded)

    @property
    def np_dtype(self) -> np.dtype | None:
        return dtypes.to_numpy(self.dtype)


@dataclass(frozen=True)
class Signature:
    key: str
    method_name: str
    inputs: Mapping[str, TensorInfo]
    outputs: Mapping[str, TensorInfo]
    proto: object  # tensorflow.core.protobuf.meta_graph_pb2.SignatureDef

    @classmethod
    def from_proto(cls, key: str, proto: Any) -> Signature:
        return cls(
            key,
            proto.method_name,
            {a: _tensor_info(a, i) for a, i in proto.inputs.items()},
            {a: _tensor_info(a, i) for a, i in proto.outputs.items()},
            proto,
        )

    @functools.cached_property
    def output_aliases(self) -> tuple[str, ...]:
        return tuple(self.outputs)

    @functools.cached_property
    def fetches(self) -> tuple[str, ...]:
        """The graph tensors of the outputs, in output_aliases' order."""
        return tuple(self.outputs[alias].name for alias in self.outputs)


def _tensor_info(alias: str, info: Any) -> TensorInfo:
    shape = None
    if info.HasField("tensor_shape") and not info.tensor_shape.unknown_rank:
        shape = tuple(d.size for d in info.tensor_shape.dim)
    return TensorInfo(alias, info.name, info.dtype, shape)


# A run expected to take less than this executes on the calling thread (RunOptions.inter_op_thread_pool = -1):
# for such small graphs, handing the work to TensorFlow's inter-op pool and waiting costs more than the work
# (half_plus_three: ~7 us a call on the caller's thread, ~50 us through the pool). Long runs, the ones a
# deadline is for, keep using the pool.
CALLER_THREAD_SECONDS = 0.0005


class RunOptions:
    """Serialized tf.RunOptions with a deadline (0: none), shared by every run that uses them: one for runs on
    TensorFlow's inter-op pool, one for runs on the caller's thread."""

    def __init__(self, timeout_ms: int = 0):
        from tensorflow.core.protobuf import config_pb2
        from tensorflow.python.client import pywrap_tf_session

        self._api = pywrap_tf_session
        self.timeout_ms = timeout_ms
        self.pooled = pywrap_tf_session.TF_NewBufferFromString(
            config_pb2.RunOptions(timeout_in_ms=timeout_ms).SerializeToString()
        )
        self.caller_thread = pywrap_tf_session.TF_NewBufferFromString(
            config_pb2.RunOptions(timeout_in_ms=timeout_ms, inter_op_thread_pool=-1).SerializeToString()
        )

    def __del__(self) -> None:
        for name in ("pooled", "caller_thread"):
            buffer = getattr(self, name, None)
            if buffer is not None:
                setattr(self, name, None)
                self._api.TF_DeleteBuffer(buffer)


class Servable:
    """A loaded model version, whatever runs it: its signatures, and `run`, which is thread-safe and times each
    run so that the runners can keep small runs on the calling thread (is_small)."""

    def __init__(self, name: str, version: int, path: Path, signatures: dict[str, Signature]):
        self.name = name
        self.version = version
        self.path = path
        self.signatures = signatures
        self._seconds: dict[tuple[str, ...], float] = {}

    def run(
        self, feeds: Mapping[str, np.ndarray], fetches: Sequence[str], options: RunOptions | None = None
    ) -> list[np.ndarray]:
        """Feed tensors by name, return the fetched tensors (numpy arrays) in order; raises ServingError with
        TensorFlow's code and message (e.g. a dtype mismatch is INVALID_ARGUMENT `Expects arg[0] to be float but
        string is provided`)."""
        key = tuple(fetches)
        previous = self._seconds.get(key)
        small = previous is not None and previous < CALLER_THREAD_SECONDS  # see is_small
        start = time.perf_counter()
        try:
            return self._run(feeds, fetches, options, small)
        finally:
            elapsed = time.perf_counter() - start
            # A rising minimum: waiting for the GIL only ever lengthens a run, so the fastest recent run tells
            # the model's own cost; a lasting slowdown still shows (+10% per run). Races lose only a sample.
            self._seconds[key] = elapsed if previous is None else min(elapsed, previous * 1.1)

    def _run(
        self, feeds: Mapping[str, np.ndarray], fetches: Sequence[str], options: RunOptions | None, small: bool
    ) -> list[np.ndarray]:
        raise NotImplementedError

    def is_small(self, fetches: Sequence[str]) -> bool:
        """Whether running these fetches lately took under CALLER_THREAD_SECONDS (False before a first run)."""
        seconds = self._seconds.get(tuple(fetches))
        return seconds is not None and seconds < CALLER_THREAD_SECONDS

    def signature_def_map(self) -> Any:
        """The SignatureDefMap of TFS's metadata API (every signature of the model)."""
        from tensorflow_serving.apis import get_model_metadata_pb2

        signature_map = get_model_metadata_pb2.SignatureDefMap()
        for key, signature in self.signatures.items():
            signature_map.signature_def[key].CopyFrom(signature.proto)
        return signature_map

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {self.version})"


class SavedModelServable(Servable):
    """A SavedModel version in its own TensorFlow session; the session closes when the last user drops it."""

    def __init__(self, name: str, version: int, path: Path, session: Any, signatures: dict[str, Signature]):
        from tensorflow.python.client import pywrap_tf_session

        super().__init__(name, version, path, signatures)
        self._session = session
        self._c_session = session._session  # noqa: SLF001 - the C session the fast path runs on
        self._session_run = pywrap_tf_session.TF_SessionRun_wrapper
        self._graph = session.graph
        self._outputs: dict[str, object] = {}
        self._no_deadline = RunOptions()
        for signature in signatures.values():  # resolve names once, off the request path
            for info in (*signature.inputs.values(), *signature.outputs.values()):
                try:
                    self._endpoint(info.name)
                except ServingError:  # e.g. __saved_model_init_op names an operation: only fails if run
                    pass

    def _endpoint(self, tensor_name: str) -> object:
        endpoint = self._outputs.get(tensor_name)
        if endpoint is None:
            try:
                tensor = self._graph.get_tensor_by_name(tensor_name)
            except (KeyError, ValueError) as exc:
                raise ServingError(Code.INVALID_ARGUMENT, f"Tensor {tensor_name} not found in graph: {exc}") from None
            endpoint = tensor._as_tf_output()  # noqa: SLF001
            self._outputs = {**self._outputs, tensor_name: endpoint}  # copy-on-write: readers take no lock
        return endpoint

    def _run(
        self, feeds: Mapping[str, np.ndarray], fetches: Sequence[str], options: RunOptions | None, small: bool
    ) -> list[np.ndarray]:
        endpoint = self._endpoint
        feed_map = {endpoint(name): value for name, value in feeds.items()}
        fetch_list = [endpoint(name) for name in fetches]
        options = options or self._no_deadline
        try:
            return self._session_run(
                self._c_session, options.caller_thread if small else options.pooled, feed_map, fetch_list, [], None
            )
        except Exception as exc:  # noqa: BLE001 - TensorFlow OpErrors carry the status code, others are UNKNOWN
            raise from_tensorflow(exc) from None

    def close(self) -> None:
        self._session.close()


def session_config(options: SessionOptions) -> Any:
    tf = import_tensorflow()
    config = tf.compat.v1.ConfigProto(
        allow_soft_placement=True,
        intra_op_parallelism_threads=options.intra_op_parallelism,
        inter_op_parallelism_threads=options.inter_op_parallelism,
    )
    if options.per_process_gpu_memory_fraction:
        config.gpu_options.per_process_gpu_memory_fraction = options.per_process_gpu_memory_fraction
    return config


def has_saved_model(path: Path) -> bool:
    return (path / "saved_model.pb").is_file() or (path / "saved_model.pbtxt").is_file()


def load(name: str, version: int, path: Path, options: SessionOptions = SessionOptions()) -> SavedModelServable:
    """Load one SavedModel version; raises ServingError saying why it cannot be served."""
    if not has_saved_model(path):
        raise ServingError(
            Code.NOT_FOUND, f"Could not find SavedModel .pb or .pbtxt at supplied export directory path: {path}"
        )
    tf = import_tensorflow()
    from tensorflow.python.saved_model import loader_impl
    from tensorflow.python.util import deprecation

    graph = tf.Graph()
    session = tf.compat.v1.Session(graph=graph, config=session_config(options))
    try:
        with deprecation.silence():
            meta_graph = loader_impl.load(session, list(options.tags), str(path))
    except Exception as exc:  # noqa: BLE001 - a broken or incompatible SavedModel: its status must say why
        session.close()
        if hasattr(exc, "error_code"):
            raise from_tensorflow(exc) from None
        raise ServingError(Code.UNKNOWN, f"Failed to load SavedModel {path}: {exc}") from None
    session._extend_graph()  # noqa: SLF001 - the C session must know every op before the first fast run
    graph.finalize()  # nothing adds ops after loading
    signatures = {key: Signature.from_proto(key, proto) for key, proto in meta_graph.signature_def.items()}
    try:
        return SavedModelServable(name, version, path, session, signatures)
    except ServingError:
        session.close()
        raise
