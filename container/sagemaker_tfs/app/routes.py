"""The app gunicorn runs: `gunicorn 'sagemaker_tfs.app.routes:create_app()'` (one app per worker), for a
single-model endpoint and for a multi-model one (SAGEMAKER_MULTI_MODEL=true) alike.

Routes:
  GET  /ping                   200 (empty body) when every model server instance can serve: the default model
                               AVAILABLE on each (single-model; without a SavedModel there is no model server to
                               ask), or each answering (multi-model: no model is loaded at start-up); the handler
                               script imported, which create_app guarantees. Else 503 with a JSON body saying what
                               is not ready.
  POST /invocations            the handler chain (invocations.py), or the inference toolkit's functions
                               (toolkit/invocations.py); multi-model: 400, the model must be in the path.
  POST /models/{name}/invoke   multi-model: the model's handler chain (multi_model.py).
  POST /endpoints/{name}/invocations
                               with SAGEMAKER_LOCAL_RUNTIME_API=true: SageMaker Runtime's InvokeEndpoint, calling
                               this app in-process (runtime_api/realtime.py); multi-model: a TargetModel this worker
                               does not route goes to `serve`, which loads it.
  GET  /execution-parameters   those of "MaxConcurrentTransforms", "BatchStrategy", "MaxPayloadInMB" that are set
                               (Settings.execution_parameters), for Batch Transform.
  anything else                404 {"error": "Not Found"} (405 for another method on a known path).
The management routes of a multi-model endpoint (/models, /models/{name}) are served by `serve` itself
(registry/management.py); nginx sends them there. Every answer carries X-Amzn-RequestId (the client's, else a new
UUID) and every error is logged with it (web/app.py, which builds every answer and maps every error to its own).

Read once at start-up: Settings.from_env(), as `serve` handed them over with Settings.to_env(), including the
model server instances on 127.0.0.1 and the default model `serve` chose (the handler script is
<model_dir>/code/<SAGEMAKER_PROGRAM>). An inference toolkit script's start-up functions run here, before the app
exists: wsgi_server/gunicorn_settings.py keeps the worker alive meanwhile. A problem stops the worker with one
message (gunicorn then exits: "Worker failed to boot").
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..config import MAX_TRANSFORM_MB, PING_TIMEOUT_SECONDS, Settings
from ..model_client.model_servers import (
    ANY_MODEL,
    ModelServer,
    ModelServerClient,
    ModelServerError,
    model_servers,
    model_status,
)
from ..registry.publication import Subscriber
from ..runtime_api import realtime
from ..shared import gpus, json_bodies, logs, runtime_dir
from ..shared.metrics_files import folder as metrics_folder
from ..toolkit.invocations import ToolkitInvocations, start_invocations
from ..toolkit.lifecycle import StartupFailure
from ..web import answers
from ..web.answers import Answer
from ..web.app import WebApp
from ..web.metrics import AppMetrics, Timings
from . import script
from .invocations import Invocations
from .multi_model import Invoke, NoModelInvocations, WorkerModels

log = logging.getLogger("sagemaker_tfs.app")


class Ping:
    """/ping: 200 when `model` is AVAILABLE on every instance, or, with `model` None (multi-model), when every
    instance answers."""

    def __init__(self, servers: list[ModelServer], model: str | None):
        self._servers, self._model = servers, model

    def answer(self, env: dict, rid: str, timings: Timings | None) -> Answer:
        problems = [problem for problem in map(self._problem, self._servers) if problem]
        if problems:
            message = "not ready: " + "; ".join(problems)
            log.warning("request %s: /ping 503 %s", rid, message)
            return answers.error(503, message)
        return 200, b"", answers.JSON

    def _problem(self, server: ModelServer) -> str | None:
        """Why this instance cannot serve, or None."""
        try:
            status = model_status(server.rest_port, self._model or ANY_MODEL, PING_TIMEOUT_SECONDS)
        except ModelServerError as exc:
            return exc.message
        if self._model is None:
            return None
        if status.http_status != 200:
            return f"the model server at {server.address} answered {status.http_status} for model {self._model}" + (
                f": {status.error}" if status.error else ""
            )
        if not status.available:
            states = ", ".join(f"{v.version} {v.state}" for v in status.versions) or "none"
            return f"model {self._model} is not AVAILABLE on the model server at {server.address} (versions: {states})"
        return None


class BrokenScript:
    """With SAGEMAKER_RELOAD, /ping and /invocations of a script that does not import: 503 saying why (logged once,
    by create_app, not per request)."""

    def __init__(self, message: str):
        self._message = message

    def answer(self, env: dict, rid: str, timings: Timings | None) -> Answer:
        return answers.error(503, self._message)


class ExecutionParameters:
    def __init__(self, parameters: dict[str, Any]):
        self._body = json_bodies.encode(parameters)

    def answer(self, env: dict, rid: str, timings: Timings | None) -> Answer:
        return 200, self._body, answers.JSON


class App(WebApp):
    """The app, and what it holds in its process: close() releases it, for a process that builds apps
    in-process one after another (tests) rather than being a gunicorn worker that serves one."""

    def __init__(self, client: ModelServerClient, settings: Settings, metrics: AppMetrics | None = None):
        super().__init__(metrics, settings.server_timing, settings.log_format == logs.JSON)
        self._client = client
        self.releases: list[Callable[[], None]] = []  # what close() undoes, besides the connections

    def close(self) -> None:
        """Close this thread's connections to the model servers and unload the handler script(s)."""
        self._client.close()
        for release in reversed(self.releases):
            release()


def create_app(env: Mapping[str, str] | None = None) -> App:
    """The app of one gunicorn worker: reads the environment (os.environ, else `env`), imports the handler
    script(s), builds the routes."""
    settings = Settings.from_env(env)
    settings.require_set_by_serve()
    logs.configure(settings.gunicorn_loglevel, settings.log_format)
    servers = model_servers(settings)
    timeout = float(settings.gunicorn_timeout_seconds)
    client = ModelServerClient(timeout)
    metrics = AppMetrics(metrics_folder(settings.runtime_dir)) if settings.metrics else None
    app = App(client, settings, metrics)
    try:
        if settings.multi_model:
            what = _multi_model_routes(app, settings, servers, client, timeout)
        else:
            what = _single_model_routes(app, settings, servers, client, timeout)
    except script.ScriptError as exc:
        if not settings.reload or settings.multi_model:
            settings.app_startup_error_file.write_text(f"{exc}\n")
            raise
        # Live reload: a worker that failed to boot would make gunicorn exit; this one says why until a save that
        # fixes the script reloads the workers.
        message = script.with_line(exc, Path(settings.model_dir) / "code" / settings.program)
        log.error("%s (SAGEMAKER_RELOAD: /ping and /invocations answer 503 until the script is fixed)", message)
        broken = BrokenScript(message).answer
        app.add_route("/ping", GET=broken)
        app.add_route("/invocations", POST=broken)
        what = "handler script broken"
    except StartupFailure as exc:
        settings.app_startup_error_file.write_text(f"{exc}\n")
        raise
    execution_parameters = settings.execution_parameters()
    app.add_route("/execution-parameters", GET=ExecutionParameters(execution_parameters).answer)

    if env is None:  # the process is ours (a gunicorn worker), not a host that embeds the app (tests)
        # Requests decode and encode large JSON bodies (a 6 MB Batch Transform payload is ~10^6 objects): with
        # the default threshold of 700 the collector runs thousands of times per such request, and parsing
        # takes 2.5 times longer. The objects alive now (modules, the script) are frozen out of every collection.
        gc.set_threshold(50_000, 20, 10)
        gc.freeze()
    if execution_parameters.get("MaxConcurrentTransforms") != settings.max_concurrent_transforms:
        log.warning(
            "/execution-parameters reports MaxConcurrentTransforms=%d, not SAGEMAKER_MAX_CONCURRENT_TRANSFORMS="
            "%d: SageMaker refuses more than %d MB in flight (MaxConcurrentTransforms x MaxPayloadInMB)",
            execution_parameters["MaxConcurrentTransforms"],
            settings.max_concurrent_transforms,
            MAX_TRANSFORM_MB,
        )
    log.info(
        "%s app ready: model server(s) %s, %s, Batch Transform parameters %s",
        "multi-model" if settings.multi_model else "single-model",
        ", ".join(s.address for s in servers) or "none",
        what,
        execution_parameters,
    )
    return app


def _single_model_routes(
    app: App, settings: Settings, servers: list[ModelServer], client: ModelServerClient, timeout: float
) -> str:
    app.releases.append(lambda: script.unload(Path(settings.model_dir) / "code"))
    handlers = script.load(settings.model_dir, settings.program, settings.inference_contract)
    if handlers.toolkit is not None:  # Contract.TOOLKIT
        invocations: Invocations | ToolkitInvocations = start_invocations(
            handlers.toolkit,
            settings.model_dir,
            settings.default_model or "model",
            servers,
            client,
            settings.default_invocations_accept,
            gpus.gpu_id(len(settings.cuda_devices)),
            settings.session_expiry_seconds,
        )
    else:
        # serve finds a SavedModel for every contract but the toolkit's (model_tree.find_models)
        assert settings.default_model is not None
        invocations = Invocations(
            handlers, servers, client, settings.default_model, timeout, settings.session_expiry_seconds
        )
    app.add_route("/ping", GET=Ping(servers, settings.default_model).answer)
    app.add_route("/invocations", POST=invocations.answer)
    if settings.local_runtime_api:  # its InvokeEndpoint (runtime_api/)
        realtime.serve_in(app, settings)
    return f"default model {settings.default_model or 'none'}"


def _multi_model_routes(
    app: App, settings: Settings, servers: list[ModelServer], client: ModelServerClient, timeout: float
) -> str:
    app.releases.append(lambda: script.unload(Path(settings.multi_model_code_dir)))
    universal = script.load_code(Path(settings.multi_model_code_dir))
    models = WorkerModels(
        universal,
        servers,
        client,
        timeout,
        settings.default_invocations_accept,
        gpus.gpu_id(len(settings.cuda_devices)),
    )
    app.releases.append(models.forget)
    subscriber = Subscriber(Path(settings.runtime_dir) / runtime_dir.REGISTRY_SOCKET, models.apply)
    app.releases.append(subscriber.close)
    subscriber.start(timeout=30)
    app.add_route("/ping", GET=Ping(servers, None).answer)
    app.add_route("/invocations", POST=NoModelInvocations().answer)
    app.add_route("/models/{name}/invoke", POST=Invoke(models).answer)
    if settings.local_runtime_api:  # its InvokeEndpoint, for the targets this worker routes (runtime_api/)
        realtime.serve_in(app, settings, lambda name: name in models.routes)
    return f"{len(models.routes)} model(s) routed, universal code: {universal.contract.name.lower()}"
