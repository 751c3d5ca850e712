"""The Falcon app gunicorn runs: `gunicorn 'sagemaker_tfs.proxy.app:create_app()'` (one app per worker).

Routes:
  GET  /ping                   200 (empty body) when every model server reports the default model AVAILABLE
                               (and the handler script imported, which create_app guarantees; without a
                               SavedModel there is no model server to ask); else 503 with a JSON body saying
                               what is not ready.
  POST /invocations            the handler chain (invocations.py), or the inference toolkit's functions
                               (toolkit/invocations.py).
  GET  /execution-parameters   those of "MaxConcurrentTransforms", "BatchStrategy", "MaxPayloadInMB" that are set
                               (Settings.execution_parameters), for Batch Transform.
  anything else                404 {"error": "Not Found"} (405 for another method on a known path).
Every answer carries X-Amzn-RequestId (the client's, else a new UUID) and every error is logged with it
(middleware.py, which maps every error to its JSON answer).

Read once at start-up: Settings.from_env(), as `serve` handed them over with Settings.to_env(), including the
model server instances on 127.0.0.1 and the default model `serve` chose (the handler script is
<model_dir>/code/<SAGEMAKER_PROGRAM>). An inference toolkit script's start-up functions run here, before the app
exists: gunicorn_settings.py keeps the worker alive meanwhile. A problem stops the worker with one message (gunicorn then exits: "Worker
failed to boot").
"""

from __future__ import annotations

import gc
import json
import logging
from pathlib import Path
from typing import Any, Mapping

import falcon

from ..shared import logs
from ..config import Settings
from ..shared.handler_contract import Contract
from ..toolkit.lifecycle import StartupFailure
from ..web import answers, middleware
from . import script
from .invocations import Invocations
from ..model_client.model_servers import ModelServer, ModelServerClient, ModelServerError

log = logging.getLogger("sagemaker_tfs.proxy")

PING_TIMEOUT_SECONDS = 2.0  # SageMaker gives /ping 2 s


def model_servers(settings: Settings) -> list[ModelServer]:
    """The model server instances `serve` started (TFS_REST_PORTS and TFS_GRPC_PORTS, same order)."""
    return [ModelServer(rest, grpc)
            for rest, grpc in zip(settings.model_server_rest_ports, settings.model_server_grpc_ports)]


class Ping:
    def __init__(self, servers: list[ModelServer], client: ModelServerClient, model: str):
        self._servers, self._client, self._model = servers, client, model
        self._path = f"/v1/models/{model}"

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        problems = [problem for problem in map(self._problem, self._servers) if problem]
        if problems:
            message = "not ready: " + "; ".join(problems)
            log.warning("request %s: /ping 503 %s", req.context.request_id, message)
            resp.status, resp.data, resp.content_type = answers.error(503, message)
        else:
            resp.status = 200
            resp.data = b""

    def _problem(self, server: ModelServer) -> str | None:
        """Why this instance cannot serve the default model, or None."""
        try:
            answer = self._client.request(server, "GET", self._path, timeout=PING_TIMEOUT_SECONDS)
        except ModelServerError as exc:
            return exc.message
        try:
            body = answer.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            body = {}
        if answer.status_code != 200:
            detail = body.get("error")
            return f"the model server at {server.address} answered {answer.status_code} for model {self._model}" + \
                (f": {detail}" if detail else "")
        states = [f"{v.get('version')} {v.get('state')}" for v in body.get("model_version_status", [])
                  if isinstance(v, dict)]
        if not any(state.endswith(" AVAILABLE") for state in states):
            return (f"model {self._model} is not AVAILABLE on the model server at {server.address} "
                    f"(versions: {', '.join(states) or 'none'})")
        return None


class ExecutionParameters:
    def __init__(self, parameters: dict[str, Any]):
        self._body = json.dumps(parameters).encode()

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.data = self._body
        resp.content_type = answers.JSON


class ProxyApp(falcon.App):
    """The app, and what it holds in its process: close() releases it, for a process that builds apps
    in-process one after another (tests) rather than being a gunicorn worker that serves one."""

    def __init__(self, client: ModelServerClient, model_dir: str, metrics=None, server_timing: bool = False,
                 log_context: bool = False):
        super().__init__(media_type=answers.JSON)
        middleware.install(self, metrics, server_timing, log_context)
        self._client, self._model_dir = client, model_dir

    def close(self) -> None:
        """Close this thread's connections to the model servers and unload the handler script."""
        self._client.close()
        script.unload(self._model_dir)


def toolkit_invocations(handlers: script.Handlers, model_dir: str, model_name: str, servers: list[ModelServer],
                        client: ModelServerClient, default_accept: str):
    """An inference toolkit script's /invocations, after its start-up functions ran in this worker with `model_dir`
    (the default model_fn gives the model server's `model_name`, when there are model servers)."""
    from ..stack.commands import gpu_count
    from ..toolkit.invocations import ToolkitInvocations
    from ..toolkit.lifecycle import start
    from ..toolkit.served_model import ServedModel

    served = (lambda: ServedModel(model_name, servers, client)) if servers else None
    loaded = start(handlers.toolkit, str(Path(model_dir).resolve()), model_name, 0 if gpu_count() else None, served)
    try:
        return ToolkitInvocations(loaded, default_accept)
    except ImportError as exc:
        raise StartupFailure(f"{handlers.script}: the default input_fn and output_fn need numpy, which is not "
                             f"installed ({exc}): add numpy to code/requirements.txt, or define both") from None


def _configure_logging(level: str, log_format: str) -> None:
    """Our log lines (and the handler script's) on stderr next to gunicorn's, in gunicorn's text layout or as JSON,
    unless the host process set up logging already."""
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logs.formatter(log_format, "[%(asctime)s] [%(process)d] [%(levelname)s] %(name)s: "
                                                        "%(message)s", "%Y-%m-%d %H:%M:%S %z"))
        root.addHandler(handler)
    logging.getLogger("sagemaker_tfs").setLevel(level.upper())


def create_app(env: Mapping[str, str] | None = None) -> ProxyApp:
    """The app of one gunicorn worker: reads the environment (os.environ, else `env`), imports the handler
    script, builds the routes."""
    settings = Settings.from_env(env)
    settings.require_set_by_serve()
    _configure_logging(settings.gunicorn_loglevel, settings.log_format)
    servers = model_servers(settings)
    timeout = float(settings.gunicorn_timeout_seconds)
    client = ModelServerClient(timeout)
    try:
        handlers = script.load(settings.model_dir, settings.program, settings.inference_contract)
        if handlers.contract is Contract.TOOLKIT:
            invocations = toolkit_invocations(handlers, settings.model_dir, settings.default_model or "model", servers,
                                              client, settings.default_invocations_accept)
        else:
            invocations = Invocations(handlers, servers, client, settings.default_model, timeout)
    except (script.ScriptError, StartupFailure) as exc:
        settings.app_startup_error_file.write_text(f"{exc}\n")
        raise

    execution_parameters = settings.execution_parameters()
    metrics = None
    if settings.metrics:
        from ..stack.metrics_page import folder
        from ..web.metrics import ProxyMetrics

        metrics = ProxyMetrics(folder(settings.runtime_dir))
    app = ProxyApp(client, settings.model_dir, metrics, settings.server_timing, settings.log_format == logs.JSON)
    app.add_route("/ping", Ping(servers, client, settings.default_model))
    app.add_route("/invocations", invocations)
    app.add_route("/execution-parameters", ExecutionParameters(execution_parameters))

    if env is None:  # the process is ours (a gunicorn worker), not a host that embeds the app (tests)
        # Requests decode and encode large JSON bodies (a 6 MB Batch Transform payload is ~10^6 objects): with
        # the default threshold of 700 the collector runs thousands of times per such request, and parsing
        # takes 2.5 times longer. The objects alive now (modules, the script) are frozen out of every collection.
        gc.set_threshold(50_000, 20, 10)
        gc.freeze()
    if execution_parameters.get("MaxConcurrentTransforms") != settings.max_concurrent_transforms:
        log.warning("/execution-parameters reports MaxConcurrentTransforms=%d, not SAGEMAKER_MAX_CONCURRENT_TRANSFORMS="
                    "%d: SageMaker refuses more than 100 MB in flight (MaxConcurrentTransforms x MaxPayloadInMB)",
                    execution_parameters["MaxConcurrentTransforms"], settings.max_concurrent_transforms)
    log.info("app ready: model server(s) %s, default model %s, Batch Transform parameters %s",
             ", ".join(s.address for s in servers) or "none", settings.default_model or "none", execution_parameters)
    return app
