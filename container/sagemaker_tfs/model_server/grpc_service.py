"""TFS's gRPC API (tensorflow-serving-api's services): PredictionService and ModelService.

Predict, Classify, Regress, MultiInference and GetModelMetadata; GetModelStatus and HandleReloadConfigRequest. Errors carry TFS's status
codes and messages (cut to 1024 characters plus `...TRUNCATED`, as TFS does). Output tensors use the typed
`*_val` fields, as TFS does by default, so that `response.outputs["y"].float_val` works.

PredictionService finds the servable a request names (with TFS's ModelSpec checks), records the request metrics
and turns errors into gRPC statuses; from a request to its response, Predict, Classify, Regress and MultiInference
are prediction_api.py's, which model warm-up (warmup.py) shares.

The handlers are coroutines served by grpc_server.py on its own thread: a call is handled where it arrives. Runs
follow Runner's rule (inline when small, else on a pool of --grpc_max_threads threads, or batched), and a config
reload, which blocks until its models are loaded, runs on that pool.
"""

from __future__ import annotations

import functools
import logging
import time
from concurrent.futures import Future as ThreadFuture
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np
from tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    inference_pb2,
    model_management_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
    regression_pb2,
)

from ..shared.error_codes import Code, ServingError, invalid_argument
from ..shared.reload_generation import GENERATION_METADATA
from . import prediction_api
from .grpc_server import Abort, GrpcServer, Later
from .metrics import ModelServerMetrics, status_name
from .model_config import ModelConfigError, configs_from_list
from .runner import Runner, deadline_options
from .servable import Servable
from .servable_manager import ServableManager

log = logging.getLogger(__name__)

_MAX_MESSAGE = 1024


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


def _resolve(servables: ServableManager, spec) -> Servable:
    """The servable a request's ModelSpec names (None: the request has none), with TFS's checks."""
    if spec is None:
        raise invalid_argument("Missing ModelSpec")
    if not spec.name:
        raise invalid_argument("ModelSpec has no name specified.")
    choice = spec.WhichOneof("version_choice")
    if choice == "version":
        return servables.resolve(spec.name, version=spec.version.value)
    if choice == "version_label":
        return servables.resolve(spec.name, label=spec.version_label)
    return servables.resolve(spec.name)


class PredictionService(prediction_service_pb2_grpc.PredictionServiceServicer):
    def __init__(
        self,
        servables: ServableManager,
        runner: Runner,
        pool: ThreadPoolExecutor,
        metrics: ModelServerMetrics | None = None,
    ):
        self.servables = servables
        self.runner = runner
        self.pool = pool
        self.metrics = metrics

    def _resolve(self, spec) -> Servable:
        return _resolve(self.servables, spec)

    async def _run(self, context, servable: Servable, feeds: dict[str, np.ndarray], fetches, api: str):
        outputs = self.runner.run_threadsafe(
            servable, feeds, fetches, api, deadline_options(context.time_remaining()), self.pool
        )
        return await Later(outputs) if isinstance(outputs, ThreadFuture) else outputs

    @_guarded
    @_metered("Predict")
    async def Predict(self, request: predict_pb2.PredictRequest, context):
        return await prediction_api.predict(self._resolve, request, functools.partial(self._run, context))

    @_guarded
    @_metered("Classify")
    async def Classify(self, request: classification_pb2.ClassificationRequest, context):
        return await prediction_api.classify(self._resolve, request, functools.partial(self._run, context))

    @_guarded
    @_metered("Regress")
    async def Regress(self, request: regression_pb2.RegressionRequest, context):
        return await prediction_api.regress(self._resolve, request, functools.partial(self._run, context))

    @_guarded
    async def MultiInference(self, request: inference_pb2.MultiInferenceRequest, context):
        return await prediction_api.multi_inference(self._resolve, request, functools.partial(self._run, context))

    @_guarded
    async def GetModelMetadata(self, request: get_model_metadata_pb2.GetModelMetadataRequest, context):
        servable = self._resolve(prediction_api.requested_spec(request))
        if not request.metadata_field:
            raise invalid_argument("GetModelMetadataRequest must specify at least one metadata_field")
        for field in request.metadata_field:
            if field != "signature_def":
                raise invalid_argument(f"Metadata field {field} is not supported")
        response = get_model_metadata_pb2.GetModelMetadataResponse()
        prediction_api.set_spec(response.model_spec, servable, None)
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
            raise invalid_argument(
                "ServerModelConfig type not supported by HandleReloadConfigRequest. Only "
                "ModelConfigList is currently supported"
            )
        try:
            configs = configs_from_list(request.config.model_config_list, "HandleReloadConfigRequest")
        except ModelConfigError as exc:
            raise invalid_argument(str(exc)) from None
        metadata = dict(context.invocation_metadata())
        generation = metadata.get(GENERATION_METADATA)
        await Later(
            self.pool.submit(
                self.servables.reload,
                configs,
                int(generation) if generation and generation.isdigit() else None,
                context.time_remaining(),
            )
        )
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
        options.append((key, number if number is not None and -(2**31) <= number < 2**31 else value))
    return options


class RunningGrpc(NamedTuple):
    """The started server and the threads of its long runs and reloads."""

    server: GrpcServer
    pool: ThreadPoolExecutor

    def stop(self, grace: float) -> None:
        """Refuse new calls, let those in flight finish for up to `grace` seconds, then cancel the rest (blocking)."""
        self.server.stop(grace)
        self.pool.shutdown(wait=False, cancel_futures=True)


def start_grpc_server(
    servables: ServableManager,
    runner: Runner,
    port: int,
    socket_path: str,
    max_threads: int,
    host: str = "0.0.0.0",
    arguments: list[tuple[str, int | str]] = (),
    metrics: ModelServerMetrics | None = None,
) -> RunningGrpc:
    """Serve both services on host:port (and a UNIX socket); raises OSError if the port is taken.
    `arguments` (--grpc_channel_arguments) override our defaults, the last of a repeated key winning, as in TFS."""
    options = {
        "grpc.max_send_message_length": -1,
        "grpc.max_receive_message_length": -1,
        "grpc.so_reuseport": 0,  # a second server on the same port must fail
        **dict(arguments),
    }  # gRPC keeps the first of two equal keys: merge them here, the flag's last
    pool = ThreadPoolExecutor(max_threads, thread_name_prefix="grpc")  # its threads start with its first task
    server = GrpcServer(list(options.items()))
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
        PredictionService(servables, runner, pool, metrics), server
    )
    model_service_pb2_grpc.add_ModelServiceServicer_to_server(ModelService(servables, pool), server)
    if port and server.add_insecure_port(f"{_grpc_host(host)}:{port}") != port:
        raise OSError(f"cannot listen for gRPC on port {port}")
    if socket_path and not server.add_insecure_port(f"unix:{socket_path}"):
        raise OSError(f"cannot listen for gRPC on unix:{socket_path}")
    server.start()
    return RunningGrpc(server, pool)


def _grpc_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host  # an IPv6 address in a gRPC target is bracketed
