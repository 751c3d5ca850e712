"""The Falcon app gunicorn runs: `gunicorn 'sagemaker_tfs.proxy.app:create_app()'` (one app per worker).

Routes:
  GET  /ping                   200 (empty body) when every model server reports the default model AVAILABLE
                               (and the handler script imported, which create_app guarantees); else 503 with a
                               JSON body saying what is not ready.
  POST /invocations            the handler chain (invocations.py).
  GET  /execution-parameters   {"MaxConcurrentTransforms", "BatchStrategy", "MaxPayloadInMB"} for Batch Transform.
  anything else                404 {"error": "Not Found"} (405 for another method on a known path).
Every answer carries X-Amzn-RequestId (the client's, else a new UUID) and every error is logged with it.

Read once at start-up: Settings.from_env() and, set by `serve`, TFS_REST_PORTS and TFS_GRPC_PORTS (the
model server instances on 127.0.0.1, comma-separated, same order), TFS_DEFAULT_MODEL_NAME and
SAGEMAKER_MODEL_DIR (the handler script is <model_dir>/code/inference.py). A problem stops the worker
with one message (gunicorn then exits: "Worker failed to boot").
"""

from __future__ import annotations

import gc
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import falcon

from ..config import ConfigError, Settings, _int_at_least, _read
from ..errors import HandlerError
from ..toolkit.lifecycle import StartupFailure
from . import answers, script
from .invocations import REQUEST_ID_HEADER, Invocations, http_error_answer, request_id
from .model_servers import ModelServer, ModelServerClient, ModelServerError, parse_ports

log = logging.getLogger("sagemaker_tfs.proxy")

PING_TIMEOUT_SECONDS = 2.0  # SageMaker gives /ping 2 s


@dataclass(frozen=True)
class ProxyConfig:
    """Everything the app reads from the environment, once."""

    settings: Settings
    servers: list[ModelServer]
    default_model: str
    model_dir: str
    execution_parameters: dict[str, Any]

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "ProxyConfig":
        settings = Settings.from_env(env)
        names = ("TFS_REST_PORTS", "TFS_GRPC_PORTS", "TFS_DEFAULT_MODEL_NAME")
        missing = [name for name in names if name not in env]
        if missing:
            raise ConfigError(f"{', '.join(missing)} not set: the app is started by `serve`, which sets them")
        if not any(env[name] for name in names):  # no SavedModel: no model server (toolkit scripts only)
            servers = []
        else:
            try:
                servers = parse_ports(env["TFS_REST_PORTS"], env["TFS_GRPC_PORTS"])
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
        return cls(settings, servers, env["TFS_DEFAULT_MODEL_NAME"], env.get("SAGEMAKER_MODEL_DIR") or settings.model_dir,
                   execution_parameters(env, settings))


def _batch_strategy(raw: str) -> str:
    spelled = raw.replace("_", "").lower()
    if spelled not in ("multirecord", "singlerecord"):
        raise ValueError("must be MULTI_RECORD or SINGLE_RECORD")
    return "MULTI_RECORD" if spelled == "multirecord" else "SINGLE_RECORD"


def execution_parameters(env: Mapping[str, str], settings: Settings) -> dict[str, Any]:
    """What GET /execution-parameters answers: the SAGEMAKER_* values Batch Transform set, else the
    concurrency the workers can serve, MULTI_RECORD and 6 MB (SageMaker's default payload limit)."""
    return {
        "MaxConcurrentTransforms": _read(env, "SAGEMAKER_MAX_CONCURRENT_TRANSFORMS", _int_at_least(1),
                                         settings.gunicorn_workers * settings.gunicorn_threads),
        "BatchStrategy": _read(env, "SAGEMAKER_BATCH_STRATEGY", _batch_strategy, "MULTI_RECORD"),
        "MaxPayloadInMB": _read(env, "SAGEMAKER_MAX_PAYLOAD_IN_MB", _int_at_least(0), 6),
    }


class Ping:
    def __init__(self, servers: list[ModelServer], client: ModelServerClient, model: str):
        self._servers, self._client, self._model = servers, client, model
        self._path = f"/v1/models/{model}"

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        rid = request_id(req.env)
        resp.set_header(REQUEST_ID_HEADER, rid)
        problems = [problem for problem in map(self._problem, self._servers) if problem]
        if problems:
            message = "not ready: " + "; ".join(problems)
            log.warning("request %s: /ping 503 %s", rid, message)
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
        resp.set_header(REQUEST_ID_HEADER, request_id(req.env))
        resp.data = self._body
        resp.content_type = answers.JSON


def _on_http_error(req: falcon.Request, resp: falcon.Response, exc: falcon.HTTPError, params: dict) -> None:
    """Errors falcon raises itself (unknown path, method not allowed) in the app's JSON form."""
    rid = request_id(req.env)
    log.info("request %s: %s %s: %s", rid, req.method, req.path, exc.status)
    resp.status, resp.data, resp.content_type = http_error_answer(exc)
    for name, value in (exc.headers or {}).items():
        resp.set_header(name, value)
    resp.set_header(REQUEST_ID_HEADER, rid)


def _on_unexpected_error(req: falcon.Request, resp: falcon.Response, exc: Exception, params: dict) -> None:
    rid = request_id(req.env)
    log.exception("request %s: %s %s: 500 %s: %s", rid, req.method, req.path, type(exc).__name__, exc)
    resp.status, resp.data, resp.content_type = answers.error(500, str(exc))
    resp.set_header(REQUEST_ID_HEADER, rid)


def _on_handler_error(req: falcon.Request, resp: falcon.Response, exc: HandlerError, params: dict) -> None:
    rid = request_id(req.env)
    log.log(logging.ERROR if exc.status >= 500 else logging.WARNING, "request %s: %d %s", rid, exc.status,
            exc.message, exc_info=exc.status >= 500)
    resp.status, resp.data, resp.content_type = answers.error(exc.status, exc.message)
    resp.set_header(REQUEST_ID_HEADER, rid)


def toolkit_invocations(handlers: script.Handlers, config: ProxyConfig, client: ModelServerClient):
    """The toolkit script's /invocations, after its start-up functions ran in this worker."""
    from ..toolkit.invocations import ToolkitInvocations
    from ..toolkit.lifecycle import start
    from ..toolkit.served_model import ServedModel

    model_name = config.default_model or "model"
    served = (lambda: ServedModel(model_name, config.servers, client)) if config.servers else None
    loaded = start(handlers.toolkit, str(Path(config.model_dir).resolve()), model_name, gpu_id(), served)
    return ToolkitInvocations(loaded, config.settings.default_invocations_accept, REQUEST_ID_HEADER, request_id)


def gpu_id() -> int | None:
    """The GPU the context's system_properties name: the first visible one, else None (CPU)."""
    from ..serve import gpu_count

    return 0 if gpu_count() else None


def _configure_logging(level: str) -> None:
    """Our log lines on stderr next to gunicorn's, unless the host process set up logging already."""
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("[%(asctime)s] [%(process)d] [%(levelname)s] %(name)s: %(message)s",
                                               "%Y-%m-%d %H:%M:%S %z"))
        root.addHandler(handler)
    logging.getLogger("sagemaker_tfs").setLevel(level.upper())


def create_app(env: Mapping[str, str] | None = None) -> falcon.App:
    """The app of one gunicorn worker: reads the environment, imports the handler script, builds the routes."""
    env = os.environ if env is None else env
    config = ProxyConfig.from_env(env)
    settings = config.settings
    _configure_logging(settings.gunicorn_loglevel)
    timeout = float(settings.gunicorn_timeout_seconds)
    client = ModelServerClient(timeout)
    try:
        handlers = script.load(config.model_dir, settings.program, settings.inference_contract)
        if handlers.contract == "toolkit":
            invocations = toolkit_invocations(handlers, config, client)
        else:
            invocations = Invocations(handlers, config.servers, client, config.default_model, timeout)
    except (script.ScriptError, StartupFailure) as exc:
        settings.app_startup_error_file.write_text(f"{exc}\n")
        raise

    app = falcon.App(media_type=answers.JSON)
    app.add_route("/ping", Ping(config.servers, client, config.default_model))
    app.add_route("/invocations", invocations)
    app.add_route("/execution-parameters", ExecutionParameters(config.execution_parameters))
    app.add_error_handler(Exception, _on_unexpected_error)
    app.add_error_handler(falcon.HTTPError, _on_http_error)
    app.add_error_handler(HandlerError, _on_handler_error)

    # Requests decode and encode large JSON bodies (a 6 MB Batch Transform payload is ~10^6 objects): with the
    # default threshold of 700 the collector runs thousands of times per such request, and parsing takes
    # 2.5 times longer. The objects alive now (modules, the script) are frozen out of every collection.
    gc.set_threshold(50_000, 20, 10)
    gc.freeze()
    log.info("app ready: model server(s) %s, default model %s, Batch Transform parameters %s",
             ", ".join(s.address for s in config.servers) or "none", config.default_model or "none",
             config.execution_parameters)
    return app
