"""TFS's gRPC API (tensorflow-serving-api's services): PredictionService and ModelService.

Predict, Classify, Regress, MultiInference and GetModelMetadata; GetModelStatus and HandleReloadConfigRequest. Errors carry TFS's status
codes and messages (cut to 1024 characters plus `...TRUNCATED`, as TFS does). Output tensors use the typed
`*_val` fields, as TFS does by default, so that `response.outputs["y"].float_val` works.

The handlers are coroutines served by grpc_server.py on its own thread: a call is handled where it arrives. Runs
follow Runner's rule (inline when small, else on a pool of --grpc_max_threads threads, or batched), and a config
reload, which blocks until its models are loaded, runs on that pool.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from concurrent.futures import Future as ThreadFuture
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple, Sequence

import numpy as np
from tensorflow.core.framework import tensor_pb2
from tensorflow.python.framework import tensor_util
from tensorflow_serving.apis import (classification_pb2, get_model_metadata_pb2, get_model_status_pb2,
                                     inference_pb2, model_management_pb2, model_service_pb2_grpc, predict_pb2,
                                     prediction_service_pb2_grpc, regression_pb2)

from . import dtypes, signatures
from ..shared.reload_generation import GENERATION_METADATA
from .grpc_server import Abort, GrpcServer, Later
from .metrics import ModelServerMetrics, status_name
from .model_config import ModelConfigError, configs_from_list
from .servable_manager import ServableManager
from .runner import Runner, deadline_options
from .servable import Servable, Signature
from .error_codes import Code, ServingError, invalid_argument

log = logging.getLogger(__name__)

_MAX_MESSAGE = 1024

# numpy kind/dtype -> TensorProto field holding the values (TFS's tensor.AsProtoField)
_VALUE_FIELDS = {
    dtypes.DT_FLOAT: "float_val", dtypes.DT_DOUBLE: "double_val", dtypes.DT_INT32: "int_val",
    dtypes.DT_UINT8: "int_val", dtypes.DT_INT16: "int_val", dtypes.DT_INT8: "int_val",
    dtypes.DT_UINT16: "int_val", dtypes.DT_INT64: "int64_val", dtypes.DT_BOOL: "bool_val",
    dtypes.DT_STRING: "string_val", dtypes.DT_UINT32: "uint32_val", dtypes.DT_UINT64: "uint64_val",
}


# numeric DataTypes whose TensorProto holds the values as bytes in tensor_content or in a typed field
_NUMERIC_DTYPES = {dtype: dtypes.to_numpy(dtype) for dtype in _VALUE_FIELDS if dtype != dtypes.DT_STRING}


def ndarray(proto: tensor_pb2.TensorProto) -> np.ndarray:
    """A request's TensorProto as a numpy array. Numeric values holding the shape's element count exactly are read
    directly (what TensorFlow's MakeNdarray does with them, without its generic dtype and padding steps); anything
    else is MakeNdarray's (strings, half, a typed field to pad with its last value, its errors)."""
    dtype = _NUMERIC_DTYPES.get(proto.dtype)
    if dtype is not None:
        shape = [d.size for d in proto.tensor_shape.dim]
        count = math.prod(shape)
        content = proto.tensor_content
        if content:
            if len(content) == count * dtype.itemsize:
                return np.frombuffer(content, dtype).reshape(shape).copy()
        else:
            values = getattr(proto, _VALUE_FIELDS[proto.dtype])
            if len(values) == count and count > 0:
                return np.fromiter(values, dtype, count).reshape(shape)
    return tensor_util.MakeNdarray(proto)


def fill_tensor(target: tensor_pb2.TensorProto, array: np.ndarray) -> None:
    """Write a numpy array into an empty TensorProto, with typed value fields."""
    dtype = dtypes.from_numpy(array.dtype)
    field = _VALUE_FIELDS.get(dtype)
    if field is None:  # half, complex...: let TensorFlow encode it
        target.CopyFrom(tensor_util.make_tensor_proto(array))
        return
    target.dtype = dtype
    dims = target.tensor_shape.dim
    for n in array.shape:
        dims.add(size=n)
    values = array.reshape(-1).tolist()
    if dtype == dtypes.DT_STRING:
        target.string_val.extend(v if isinstance(v, bytes) else str(v).encode("utf-8") for v in values)
    else:
        getattr(target, field).extend(values)


def _abort(error: ServingError) -> Abort:
    message = error.message
    if len(message) > _MAX_MESSAGE:
        message = message[:_MAX_MESSAGE] + "...TRUNCATED"
    return Abort(int(error.code), message)


def _guarded(method):
    """Turn ServingErrors (and bugs) into gRPC errors with TFS's codes."""

    @functools.wraps(method)
    async def wrapper(self, request, context):
        try:
            return await method(self, request, context)
        except ServingError as exc:
            raise _abort(exc) from None
        except Exception as exc:  # a bug: still a gRPC status, and a log line with the traceback
            log.exception("gRPC %s failed", method.__name__)
            raise _abort(ServingError(Code.INTERNAL, f"{type(exc).__name__}: {exc}")) from None

    return wrapper


def _metered(api: str):
    """Record TFS's request count and latency of a Predict, Classify or Regress call (entrypoint GRPC)."""

    def decorate(method):
        @functools.wraps(method)
        async def wrapper(self, request, context):
            if self.metrics is None:
                return await method(self, request, context)
            started, error = time.perf_counter(), None
            try:
                return await method(self, request, context)
            except Exception as exc:
                error = exc
                raise
            finally:
                self.metrics.request(request.model_spec.name, api, "GRPC", status_name(error), started)

        return wrapper

    return decorate


def _resolve(servables: ServableManager, spec, has_spec: bool) -> Servable:
    if not has_spec:
        raise invalid_argument("Missing ModelSpec")
    if not spec.name:
        raise invalid_argument("ModelSpec has no name specified.")
    choice = spec.WhichOneof("version_choice")
    if choice == "version":
        return servables.resolve(spec.name, version=spec.version.value)
    if choice == "version_label":
        return servables.resolve(spec.name, label=spec.version_label)
    return servables.resolve(spec.name)


def _set_spec(target, servable: Servable, signature_name: str | None) -> None:
    target.name = servable.name
    target.version.value = servable.version
    if signature_name is not None:
        target.signature_name = signature_name


def _set_of(names) -> str:
    return "{" + ",".join(sorted(names)) + "}"


def _predict_inputs(inputs, signature: Signature) -> list[tuple[str, tensor_pb2.TensorProto]]:
    """(graph tensor name, TensorProto) of each input of a Predict request, once TFS's checks passed: the request
    names exactly the signature's inputs."""
    named = []
    expected = signature.inputs
    for alias, proto in inputs.items():
        info = expected.get(alias)
        if info is None:
            break
        named.append((info.name, proto))
    if len(named) == len(expected) == len(inputs):
        return named
    sent, wanted = set(inputs), set(expected)
    if len(sent) != len(wanted):
        raise invalid_argument(f"input size does not match signature: {len(sent)}!={len(wanted)} "
                               f"len({_set_of(sent)}) != len({_set_of(wanted)}). Sent extra: "
                               f"{_set_of(sent - wanted)}. Missing but required: {_set_of(wanted - sent)}.")
    alias, info = next((alias, info) for alias, info in expected.items() if alias not in sent)
    raise invalid_argument(f"Signature input alias: {alias}(feed name: {info.name}) not found in request "
                           f"and no default value provided. Inputs expected to be in the request "
                           f"{_set_of(sent)}, or default input alias set: ")


def _predict_outputs(output_filter, signature: Signature) -> tuple[Sequence[str], Sequence[str]]:
    """The output aliases a Predict request asks for (all without an output_filter) and their graph tensors."""
    if not output_filter:
        return signature.output_aliases, signature.fetches
    seen = set()
    for alias in output_filter:
        if alias not in signature.outputs:
            raise invalid_argument(f"output tensor alias not found in signature: {alias} Outputs expected to be "
                                   f"in the set {_set_of(signature.outputs)}.")
        if alias in seen:
            raise invalid_argument(f"duplicate output tensor alias: {alias}")
        seen.add(alias)
    return list(output_filter), [signature.outputs[alias].name for alias in output_filter]


def _serialized_examples(request_input) -> list[bytes]:
    kind = request_input.WhichOneof("kind")
    if kind == "example_list":
        return [e.SerializeToString() for e in request_input.example_list.examples]
    if kind == "example_list_with_context":
        with_context = request_input.example_list_with_context
        context = with_context.context.SerializeToString()
        return [context + e.SerializeToString() for e in with_context.examples]
    return []


class PredictionService(prediction_service_pb2_grpc.PredictionServiceServicer):
    def __init__(self, servables: ServableManager, runner: Runner, pool: ThreadPoolExecutor,
                 metrics: ModelServerMetrics | None = None):
        self.servables = servables
        self.runner = runner
        self.pool = pool
        self.metrics = metrics

    async def _run(self, servable: Servable, feeds: dict[str, np.ndarray], fetches, context, api: str):
        outputs = self.runner.run_threadsafe(servable, feeds, fetches, api, deadline_options(context.time_remaining()),
                                             self.pool)
        return await Later(outputs) if isinstance(outputs, ThreadFuture) else outputs

    @_guarded
    @_metered("Predict")
    async def Predict(self, request: predict_pb2.PredictRequest, context):
        spec = request.model_spec
        servable = _resolve(self.servables, spec, request.HasField("model_spec"))
        signature = signatures.predict_signature(servable, spec.signature_name, rest=False)
        feeds = {name: ndarray(proto) for name, proto in _predict_inputs(request.inputs, signature)}
        aliases, fetches = _predict_outputs(request.output_filter, signature)
        outputs = await self._run(servable, feeds, fetches, context, "Predict")
        response = predict_pb2.PredictResponse()
        _set_spec(response.model_spec, servable, signature.key)
        for alias, array in zip(aliases, outputs):
            fill_tensor(response.outputs[alias], array)
        return response

    async def _run_examples(self, servable: Servable, run: signatures.ExampleRun, serialized: list[bytes], context,
                            api: str):
        tensor = signatures.examples_tensor(serialized)
        return await self._run(servable, {run.input_name: tensor}, run.fetches, context, api)

    async def _classify(self, servable, signature_name, serialized, context, result) -> None:
        run = signatures.classify_run(servable, signature_name)
        outputs = await self._run_examples(servable, run, serialized, context, "Classify")
        labels, scores = signatures.classification(outputs, run, len(serialized))
        classes = len(labels[0]) if labels is not None else scores.shape[1]
        for i in range(len(serialized)):
            classification = result.classifications.add()
            for c in range(classes):
                entry = classification.classes.add()
                if labels is not None:
                    entry.label = labels[i][c].decode("utf-8", "replace")
                if scores is not None:
                    entry.score = float(scores[i, c])

    async def _regress(self, servable, signature_name, serialized, context, result) -> None:
        run = signatures.regress_run(servable, signature_name)
        outputs = await self._run_examples(servable, run, serialized, context, "Regress")
        for value in signatures.regression(outputs, len(serialized)).tolist():
            result.regressions.add(value=value)

    async def _examples_response(self, request, response, fill, context):
        """Classify or Regress: resolve the model, fill the response's result from its examples by fill()."""
        servable = _resolve(self.servables, request.model_spec, request.HasField("model_spec"))
        _set_spec(response.model_spec, servable, signatures.signature_key(request.model_spec.signature_name))
        await fill(servable, request.model_spec.signature_name, _serialized_examples(request.input), context,
                   response.result)
        return response

    @_guarded
    @_metered("Classify")
    async def Classify(self, request: classification_pb2.ClassificationRequest, context):
        return await self._examples_response(request, classification_pb2.ClassificationResponse(), self._classify,
                                             context)

    @_guarded
    @_metered("Regress")
    async def Regress(self, request: regression_pb2.RegressionRequest, context):
        return await self._examples_response(request, regression_pb2.RegressionResponse(), self._regress, context)

    @_guarded
    async def MultiInference(self, request: inference_pb2.MultiInferenceRequest, context):
        if not request.tasks:
            raise invalid_argument("Found no tasks in MultiInferenceRequest.")
        names, seen = set(), set()
        for task in request.tasks:
            if not task.model_spec.name:
                raise invalid_argument("Found ModelSpec with an empty model name.")
            names.add(task.model_spec.name)
            key = signatures.signature_key(task.model_spec.signature_name)
            if key in seen:
                raise invalid_argument(f"Duplicate evaluation of signature: {key}")
            seen.add(key)
        if len(names) > 1:
            raise invalid_argument("All ModelSpecs in a MultiInferenceRequest must access the same model name.")
        servable = _resolve(self.servables, request.tasks[0].model_spec, True)
        serialized = _serialized_examples(request.input)
        response = inference_pb2.MultiInferenceResponse()
        for task in request.tasks:
            key = signatures.signature_key(task.model_spec.signature_name)
            if key not in servable.signatures:
                raise invalid_argument(f"Requested signature not found in model graph: {key}")
            result = response.results.add()
            _set_spec(result.model_spec, servable, key)
            if task.method_name == "tensorflow/serving/classify":
                await self._classify(servable, key, serialized, context, result.classification_result)
            elif task.method_name == "tensorflow/serving/regress":
                await self._regress(servable, key, serialized, context, result.regression_result)
            else:
                raise ServingError(Code.UNIMPLEMENTED, f"Unsupported signature method_name: {task.method_name}")
        return response

    @_guarded
    async def GetModelMetadata(self, request: get_model_metadata_pb2.GetModelMetadataRequest, context):
        servable = _resolve(self.servables, request.model_spec, request.HasField("model_spec"))
        if not request.metadata_field:
            raise invalid_argument("GetModelMetadataRequest must specify at least one metadata_field")
        for field in request.metadata_field:
            if field != "signature_def":
                raise invalid_argument(f"Metadata field {field} is not supported")
        response = get_model_metadata_pb2.GetModelMetadataResponse()
        _set_spec(response.model_spec, servable, None)
        signature_map = servable.signature_def_map()
        response.metadata["signature_def"].Pack(signature_map)
        return response


class ModelService(model_service_pb2_grpc.ModelServiceServicer):
    def __init__(self, servables: ServableManager, pool: ThreadPoolExecutor):
        self.servables = servables
        self.pool = pool

    @_guarded
    async def GetModelStatus(self, request: get_model_status_pb2.GetModelStatusRequest, context):
        if not request.HasField("model_spec"):
            raise invalid_argument("Missing ModelSpec")
        spec = request.model_spec
        version = spec.version.value if spec.HasField("version") else None
        response = self.servables.status_proto(spec.name, version)
        return response

    @_guarded
    async def HandleReloadConfigRequest(self, request: model_management_pb2.ReloadConfigRequest, context):
        """The config's model list replaces the served one; returns once the added models are loaded."""
        if request.config.WhichOneof("config") != "model_config_list":
            raise invalid_argument("ServerModelConfig type not supported by HandleReloadConfigRequest. Only "
                                   "ModelConfigList is currently supported")
        try:
            configs = configs_from_list(request.config.model_config_list, "HandleReloadConfigRequest")
        except ModelConfigError as exc:
            raise invalid_argument(str(exc)) from None
        metadata = dict(context.invocation_metadata())
        generation = metadata.get(GENERATION_METADATA)
        await Later(self.pool.submit(self.servables.reload, configs,
                                     int(generation) if generation and generation.isdigit() else None,
                                     context.time_remaining()))
        response = model_management_pb2.ReloadConfigResponse()
        response.status.error_code = 0
        return response


def channel_arguments(text: str) -> list[tuple[str, int | str]]:
    """--grpc_channel_arguments (`key=value,key=value`) as gRPC server options: a value that is a 32-bit integer
    is passed as one, anything else as a string (TFS's rule; gRPC ignores keys it does not know)."""
    options: list[tuple[str, int | str]] = []
    for item in filter(None, text.split(",")):
        key, _, value = item.partition("=")
        try:
            number = int(value)
        except ValueError:
            number = None
        options.append((key, number if number is not None and -2**31 <= number < 2**31 else value))
    return options


class RunningGrpc(NamedTuple):
    """The started server and the threads of its long runs and reloads."""

    server: GrpcServer
    pool: ThreadPoolExecutor

    def stop(self, grace: float) -> None:
        """Refuse new calls, let those in flight finish for up to `grace` seconds, then cancel the rest (blocking)."""
        self.server.stop(grace)
        self.pool.shutdown(wait=False, cancel_futures=True)


def start_grpc_server(servables: ServableManager, runner: Runner, port: int, socket_path: str, max_threads: int,
                      host: str = "0.0.0.0", arguments: list[tuple[str, int | str]] = (),
                      metrics: ModelServerMetrics | None = None) -> RunningGrpc:
    """Serve both services on host:port (and a UNIX socket); raises OSError if the port is taken.
    `arguments` (--grpc_channel_arguments) override our defaults, the last of a repeated key winning, as in TFS."""
    options = {"grpc.max_send_message_length": -1, "grpc.max_receive_message_length": -1,
               "grpc.so_reuseport": 0,  # a second server on the same port must fail
               **dict(arguments)}  # gRPC keeps the first of two equal keys: merge them here, the flag's last
    pool = ThreadPoolExecutor(max_threads, thread_name_prefix="grpc")  # its threads start with its first task
    server = GrpcServer(list(options.items()))
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
        PredictionService(servables, runner, pool, metrics), server)
    model_service_pb2_grpc.add_ModelServiceServicer_to_server(ModelService(servables, pool), server)
    if port and server.add_insecure_port(f"{_grpc_host(host)}:{port}") != port:
        raise OSError(f"cannot listen for gRPC on port {port}")
    if socket_path and not server.add_insecure_port(f"unix:{socket_path}"):
        raise OSError(f"cannot listen for gRPC on unix:{socket_path}")
    server.start()
    return RunningGrpc(server, pool)


def _grpc_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host  # an IPv6 address in a gRPC target is bracketed
