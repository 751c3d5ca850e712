"""TFS's gRPC API (tensorflow-serving-api's services): PredictionService and ModelService, on grpc.aio.

Predict, Classify, Regress, MultiInference and GetModelMetadata; GetModelStatus and HandleReloadConfigRequest.
Errors carry TFS's status codes and messages (cut to 1024 characters plus `...TRUNCATED`, as TFS does). Output
tensors use the typed `*_val` fields, as TFS does by default, so that `response.outputs["y"].float_val` works.

PredictionService finds the servable a request names (with TFS's ModelSpec checks), records the request metrics
and turns errors into gRPC statuses; from a request to its response, Predict, Classify, Regress and MultiInference
are prediction_api.py's, which model warm-up (warmup.py) shares.

The server is grpcio's asyncio server (grpc.aio) on the REST server's event loop, so a call is handled like a
REST request: runs follow Runner's rule (inline when small, else on a pool of --grpc_max_threads threads, or
batched on this loop), and a config reload, which blocks until its models are loaded, runs on that pool. The
handlers are coroutines registered by tensorflow-serving-api's generated `add_*Servicer_to_server` functions (as
generic handlers: grpc.aio accepts their calls through one request, where registered methods cost one per method).
grpc.aio on its own thread and loop, and grpcio's thread-pool server, were measured no faster (docs/BENCHMARKS.md).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple, TypeVar, cast

import grpc
import numpy as np
from grpc import aio
from tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    inference_pb2,
    model_management_pb2,
    model_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
    regression_pb2,
)

from ..shared.error_codes import Code, ServingError, invalid_argument
from ..shared.reload_generation import GENERATION_METADATA
from . import prediction_api
from .metrics import ModelServerMetrics, status_name
from .model_config import ModelConfigError, configs_from_list
from .runner import Runner, deadline_options
from .servable import Servable
from .servable_manager import ServableManager

log = logging.getLogger(__name__)

_MAX_MESSAGE = 1024
_STATUS = {status.value[0]: status for status in grpc.StatusCode}  # a gRPC status number -> grpc.StatusCode

Handler = TypeVar("Handler", bound=Callable[..., Awaitable[Any]])


def _guarded(method: Handler) -> Handler:
    """Turn ServingErrors (and bugs) into gRPC statuses with TFS's codes."""

    @functools.wraps(method)
    async def wrapper(self: Any, request: Any, context: aio.ServicerContext) -> Any:
        try:
            return await method(self, request, context)
        except ServingError as exc:
            error = exc
        except Exception as exc:  # a bug: still a gRPC status, and a log line with the traceback
            log.exception("gRPC %s failed", method.__name__)
            error = ServingError(Code.INTERNAL, f"{type(exc).__name__}: {exc}")
        message = error.message
        if len(message) > _MAX_MESSAGE:
            message = message[:_MAX_MESSAGE] + "...TRUNCATED"
        await context.abort(_STATUS[int(error.code)], message)  # raises: the call ends with this status

    return cast(Handler, wrapper)


def _metered(api: str) -> Callable[[Handler], Handler]:
    """Record TFS's request count and latency of a Predict, Classify or Regress call (entrypoint GRPC)."""

    def decorate(method: Handler) -> Handler:
        @functools.wraps(method)
        async def wrapper(self: PredictionService, request: Any, context: aio.ServicerContext) -> Any:
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

        return cast(Handler, wrapper)

    return decorate


def _resolve(servables: ServableManager, spec: model_pb2.ModelSpec | None) -> Servable:
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

    def _resolve(self, spec: model_pb2.ModelSpec | None) -> Servable:
        return _resolve(self.servables, spec)

    async def _run(
        self,
        context: aio.ServicerContext,
        servable: Servable,
        feeds: dict[str, np.ndarray],
        fetches: Sequence[str],
        api: str,
    ) -> list[np.ndarray]:
        options = deadline_options(context.time_remaining())
        return await self.runner.run_in_loop(servable, feeds, fetches, api, options, self.pool)

    @_guarded
    @_metered("Predict")
    async def Predict(  # noqa: N802 - the generated servicer's method name
        self, request: predict_pb2.PredictRequest, context: aio.ServicerContext
    ) -> predict_pb2.PredictResponse:
        return await prediction_api.predict(self._resolve, request, functools.partial(self._run, context))

    @_guarded
    @_metered("Classify")
    async def Classify(  # noqa: N802 - the generated servicer's method name
        self, request: classification_pb2.ClassificationRequest, context: aio.ServicerContext
    ) -> classification_pb2.ClassificationResponse:
        return await prediction_api.classify(self._resolve, request, functools.partial(self._run, context))

    @_guarded
    @_metered("Regress")
    async def Regress(  # noqa: N802 - the generated servicer's method name
        self, request: regression_pb2.RegressionRequest, context: aio.ServicerContext
    ) -> regression_pb2.RegressionResponse:
        return await prediction_api.regress(self._resolve, request, functools.partial(self._run, context))

    @_guarded
    async def MultiInference(  # noqa: N802 - the generated servicer's method name
        self, request: inference_pb2.MultiInferenceRequest, context: aio.ServicerContext
    ) -> inference_pb2.MultiInferenceResponse:
        return await prediction_api.multi_inference(self._resolve, request, functools.partial(self._run, context))

    @_guarded
    async def GetModelMetadata(  # noqa: N802 - the generated servicer's method name
        self, request: get_model_metadata_pb2.GetModelMetadataRequest, context: aio.ServicerContext
    ) -> get_model_metadata_pb2.GetModelMetadataResponse:
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
    async def GetModelStatus(  # noqa: N802 - the generated servicer's method name
        self, request: get_model_status_pb2.GetModelStatusRequest, context: aio.ServicerContext
    ) -> get_model_status_pb2.GetModelStatusResponse:
        if not request.HasField("model_spec"):
            raise invalid_argument("Missing ModelSpec")
        spec = request.model_spec
        version = spec.version.value if spec.HasField("version") else None
        return self.servables.status_proto(spec.name, version)

    @_guarded
    async def HandleReloadConfigRequest(  # noqa: N802 - the generated servicer's method name
        self, request: model_management_pb2.ReloadConfigRequest, context: aio.ServicerContext
    ) -> model_management_pb2.ReloadConfigResponse:
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
        await asyncio.get_running_loop().run_in_executor(
            self.pool,
            self.servables.reload,
            configs,
            int(generation) if generation and generation.isdigit() else None,
            context.time_remaining(),
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

    server: aio.Server
    pool: ThreadPoolExecutor

    async def stop(self, grace: float) -> None:
        """Refuse new calls, let those in flight finish for up to `grace` seconds, then cancel the rest."""
        await self.server.stop(grace)
        self.pool.shutdown(wait=False, cancel_futures=True)


async def start_grpc_server(
    servables: ServableManager,
    runner: Runner,
    port: int,
    socket_path: str,
    max_threads: int,
    host: str = "0.0.0.0",
    arguments: Sequence[tuple[str, int | str]] = (),
    metrics: ModelServerMetrics | None = None,
) -> RunningGrpc:
    """Serve both services on host:port (and a UNIX socket) on the running event loop; raises OSError if the port
    is taken. `arguments` (--grpc_channel_arguments) override our defaults, the last of a repeated key winning, as
    in TFS."""
    options = {
        "grpc.max_send_message_length": -1,
        "grpc.max_receive_message_length": -1,
        "grpc.so_reuseport": 0,  # a second server on the same port must fail
        **dict(arguments),
    }  # gRPC keeps the first of two equal keys: merge them here, the flag's last
    pool = ThreadPoolExecutor(max_threads, thread_name_prefix="grpc")  # its threads start with its first task
    server = aio.server(options=list(options.items()))
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
        PredictionService(servables, runner, pool, metrics), server
    )
    model_service_pb2_grpc.add_ModelServiceServicer_to_server(ModelService(servables, pool), server)
    try:
        if port:
            _bind(server, f"{_grpc_host(host)}:{port}", f"port {port}")
        if socket_path:
            _bind(server, f"unix:{socket_path}", f"unix:{socket_path}")
    except OSError:
        await server.stop(None)
        pool.shutdown(wait=False)
        raise
    await server.start()
    return RunningGrpc(server, pool)


def _bind(server: aio.Server, address: str, what: str) -> None:
    try:
        server.add_insecure_port(address)
    except RuntimeError:  # grpcio's answer when the address cannot be bound
        raise OSError(f"cannot listen for gRPC on {what}") from None


def _grpc_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host  # an IPv6 address in a gRPC target is bracketed
