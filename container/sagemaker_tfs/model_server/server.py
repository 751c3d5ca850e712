"""Start-up and shutdown of the model server: load every model, then open the ports, then serve until SIGTERM."""

from __future__ import annotations

import asyncio
import functools
import logging
import signal
import threading
import time
import warnings
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from ..shared.process_title import set_title
from . import servable, tflite_servable, warmup
from .batch_scheduler import BatchingConfigError, BatchingParameters, BatchScheduler, load_batching_parameters
from .flags import Flags, default_threads
from .metrics import ModelServerMetrics, MonitoringConfig, MonitoringConfigError, load_monitoring_config
from .model_config import ModelConfig, ModelConfigError, load_config_file
from .servable_manager import Loader, ServableManager

log = logging.getLogger("sagemaker_tfs.model_server")


class StartupError(RuntimeError):
    """The server cannot start; the message says why."""


def process_title(flags: Flags, configs: list[ModelConfig]) -> str:
    """What ps shows: the models of the start-up configuration (not those a HandleReloadConfigRequest adds later)
    and the ports, so that one of several instances is told apart; three names at most, to stay short."""
    names = [config.name for config in configs]
    shown = ", ".join(names[:3]) + (f" +{len(names) - 3} more" if len(names) > 3 else "")
    ports = [f"{kind} {port}" for kind, port in (("rest", flags.rest_api_port), ("grpc", flags.port)) if port]
    title = f"tfs-model-server: models {shown}" if names else "tfs-model-server: no models at start"
    return f"{title} ({', '.join(ports)})" if ports else title


def model_configs(flags: Flags) -> list[ModelConfig]:
    if flags.model_config_file:
        return load_config_file(flags.model_config_file)
    return [ModelConfig(flags.model_name, flags.model_base_path)]


def session_options(flags: Flags) -> servable.SessionOptions:
    intra, inter = flags.tensorflow_intra_op_parallelism, flags.tensorflow_inter_op_parallelism
    if flags.tensorflow_session_parallelism > 0:
        intra = inter = flags.tensorflow_session_parallelism
    tags = tuple(t.strip() for t in flags.saved_model_tags.split(",") if t.strip())
    return servable.SessionOptions(intra, inter, flags.per_process_gpu_memory_fraction, tags)


def metered_loader(load: Loader, metrics: ModelServerMetrics) -> Loader:
    """The servable loader, recording TensorFlow's SavedModel load metrics (attempts, latency) per version path."""

    def loader(name: str, version: int, path: Path) -> servable.Servable:
        started, ok = time.perf_counter(), False
        try:
            loaded = load(name, version, path)
            ok = True
            return loaded
        finally:
            metrics.load(str(path), ok, time.perf_counter() - started)

    return loader


def warmed_loader(load: Loader, iterations: int, metrics: ModelServerMetrics | None) -> Loader:
    """The servable loader, then TFS's model warm-up of the loaded version (warmup.py), outside the load's metrics;
    a failing warm-up closes the servable and fails the load with its error."""

    def loader(name: str, version: int, path: Path) -> servable.Servable:
        loaded = load(name, version, path)
        try:
            warmup.replay(loaded, path, iterations, metrics)
        except BaseException:
            loaded.close()
            raise
        return loaded

    return loader


def version_loader(flags: Flags, metrics: ModelServerMetrics | None) -> Loader:
    """How a version folder is loaded: its model.tflite with --prefer_tflite_model, else its SavedModel (TFS's
    rule), with TensorFlow's SavedModel load metrics when there is a Prometheus page."""
    saved_model: Loader = functools.partial(servable.load, options=session_options(flags))
    if metrics is not None:
        saved_model = metered_loader(saved_model, metrics)
    interpreters = tflite_servable.interpreter_count(flags.num_tflite_pools, flags.num_tflite_interpreters_per_pool)

    def load(name: str, version: int, path: Path) -> servable.Servable:
        if flags.prefer_tflite_model and tflite_servable.found(path):
            return tflite_servable.load(name, version, path, interpreters)
        return saved_model(name, version, path)

    return load


def run(flags: Flags) -> int:
    """Serve until SIGTERM/SIGINT; returns the exit status."""
    try:
        configs = model_configs(flags)
        batching = load_batching_parameters(flags.batching_parameters_file) if flags.enable_batching else None
        monitoring = load_monitoring_config(flags.monitoring_config_file) if flags.monitoring_config_file else None
    except (ModelConfigError, BatchingConfigError, MonitoringConfigError) as exc:
        log.error("Failed to start server. Error: %s", exc)
        return 1
    set_title(process_title(flags, configs))
    metrics = None
    if monitoring is not None and monitoring.prometheus_path is not None:
        metrics = ModelServerMetrics(batching.thread_pool_name if batching is not None else "batch_threads")
    for name in flags.ignored_given():
        log.warning("--%s is accepted for compatibility and has no effect in this model server", name)
    # Request values beyond a float32's range become +-inf as in TFS; numpy would also warn, once per process.
    warnings.filterwarnings("ignore", "overflow encountered in cast", RuntimeWarning)
    servable.import_tensorflow()
    loader = version_loader(flags, metrics)
    if flags.enable_model_warmup:
        loader = warmed_loader(loader, flags.num_request_iterations_for_warmup, metrics)
    servables = ServableManager(configs, loader, flags.max_num_load_retries, flags.load_retry_interval_micros / 1e6)
    previous = signal.signal(signal.SIGTERM, lambda *_: servables.stop())  # a stop during loading ends the retries
    servables.refresh()  # every configured model gets its load attempt before any port opens (as in TFS)
    signal.signal(signal.SIGTERM, previous)
    if servables.stopped:
        log.info("stopping: signal received while loading models")
        return 0
    for line in servables.summary():
        log.info("model %s", line)
    try:
        import uvloop

        runner: Callable[[Coroutine[Any, Any, int]], int] = uvloop.run
    except ImportError:  # uvloop is a dependency; plain asyncio still works
        runner = asyncio.run
    try:
        return runner(_serve(flags, servables, batching, metrics, monitoring))
    except StartupError as exc:
        log.error("Failed to start server. Error: %s", exc)
        return 1
    finally:
        servables.stop()


async def _serve(
    flags: Flags,
    servables: ServableManager,
    batching: BatchingParameters | None,
    metrics: ModelServerMetrics | None,
    monitoring: MonitoringConfig | None,
) -> int:
    from .grpc_service import channel_arguments, start_grpc_server
    from .http_server import Limits, start_server
    from .rest import RestApi
    from .rest_metrics import MonitoredApi
    from .runner import Runner

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    scheduler = BatchScheduler(batching, loop, metrics) if batching is not None else None
    if scheduler is not None:
        log.info("batching: %s", batching)
    threads = flags.rest_api_num_threads or default_threads()
    runner = Runner(loop, scheduler, threads, flags.rest_api_timeout_in_ms, metrics)
    grpc_server = rest_server = None
    try:
        if flags.port or flags.grpc_socket_path:
            try:
                grpc_server = await start_grpc_server(
                    servables,
                    runner,
                    flags.port,
                    flags.grpc_socket_path,
                    flags.grpc_max_threads or default_threads(),
                    flags.listen_address,
                    channel_arguments(flags.grpc_channel_arguments),
                    metrics,
                )
            except OSError as exc:
                raise StartupError(str(exc)) from None
            log.info("Running gRPC ModelServer at %s:%d ...", flags.listen_address, flags.port)
        if flags.rest_api_port:
            try:
                rest_api = RestApi(servables, runner, flags.rest_api_enable_cors_support)
                api: RestApi | MonitoredApi = rest_api
                if metrics is not None and monitoring is not None and monitoring.prometheus_path is not None:
                    api = MonitoredApi(rest_api, metrics, monitoring.prometheus_path)
                limits = Limits(
                    flags.rest_api_max_body_bytes,
                    flags.rest_api_request_timeout_seconds,
                    flags.rest_api_idle_timeout_seconds,
                )
                rest_server = await start_server(api, flags.rest_api_port, flags.listen_address, limits)
            except OSError as exc:
                raise StartupError(
                    f"cannot listen for HTTP/REST on port {flags.rest_api_port}: {exc.strerror or exc}"
                ) from None
            log.info("Exporting HTTP/REST API at:%s:%d ...", flags.listen_address, flags.rest_api_port)
        if flags.file_system_poll_wait_seconds > 0:
            threading.Thread(
                target=servables.poll_forever,
                args=(flags.file_system_poll_wait_seconds,),
                name="version-poll",
                daemon=True,
            ).start()
        if flags.model_config_file and flags.model_config_file_poll_wait_seconds > 0:
            threading.Thread(
                target=servables.poll_config_file_forever,
                args=(flags.model_config_file, flags.model_config_file_poll_wait_seconds),
                name="config-poll",
                daemon=True,
            ).start()
        await stop.wait()
        log.info("stopping: signal received")
        return 0
    finally:
        servables.stop()
        if rest_server is not None:
            rest_server.close()
        if grpc_server is not None:
            await grpc_server.stop(2)
        runner.close()
        if scheduler is not None:
            scheduler.close()
