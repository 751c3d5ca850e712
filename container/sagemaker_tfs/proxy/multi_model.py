"""The gunicorn workers' app in multi-model mode: `gunicorn 'sagemaker_tfs.proxy.multi_model:create_app()'`.

Routes:
  POST /models/{name}/invoke   the model's handler chain, as /invocations in single-model mode (§4)
  POST /invocations            400: a multi-model endpoint needs the model in the path
  GET  /ping                   200 when every model server instance answers (models or not), else 503
  GET  /execution-parameters   as single-model
The management routes (/models, /models/{name}) are the registry owner's (management.py); nginx sends them there.

Each worker follows the registry (publication.Subscriber): a snapshot is applied in the subscriber thread (scripts
imported, routes swapped as one dict, code of models that left forgotten) and never on a request. An invocation
reads the route dict and marks itself in its model's `active` set (set.add/discard are atomic): no lock, no sleep.
"""

from __future__ import annotations

import gc
import logging
import threading
from pathlib import Path
from typing import Any, Mapping

import falcon

from ..shared import logs
from ..config import Settings
from ..errors import HandlerError
from ..shared.handler_contract import Contract
from ..web import answers, middleware
from . import script
from .app import ExecutionParameters, _configure_logging, model_servers, toolkit_invocations
from .context import model_path, tfs_attributes
from .invocations import Invocations
from ..model_client.model_servers import ModelServer, ModelServerClient, ModelServerError
from ..toolkit.lifecycle import StartupFailure
from ..shared.model_names import digest
from ..registry.publication import Message, Subscriber

log = logging.getLogger("sagemaker_tfs.multi_model")

TARGET_MODEL_HEADER = "X-Amzn-SageMaker-Target-Model"
NO_MODEL_NAME = "Invocation request does not contain model name."
PING_TIMEOUT_SECONDS = 2.0


def log_target_model(req: falcon.Request) -> None:
    """SageMaker's TargetModel (e.g. `a/model-7.tar.gz`) with the request id: which archive a request was for."""
    target = req.get_header(TARGET_MODEL_HEADER)
    if target is not None:
        log.info("request %s: %s %s, target model %s", req.context.request_id, req.method, req.path, target)


class ModelInvocations(Invocations):
    """/invocations for one model: the path names the model, so the tfs-model-name attribute is ignored."""

    def _target(self, attributes: str | None) -> tuple[str | None, str | None, str | None, str]:
        version = method = None
        if attributes:
            _, version, method = tfs_attributes(attributes)
        return self._default_model, version, method, model_path(self._default_model, version, method)

    def _call_pair(self, *args: Any) -> answers.Answer:
        try:
            status, body, content_type = super()._call_pair(*args)
        except ModelServerError as exc:
            if exc.status == 502:  # the instance is down: serve is restarting it
                raise HandlerError(503, "model server restarting") from None
            raise
        if status == 429 and (b"OOM" in body or b"out of memory" in body.lower()):  # RESOURCE_EXHAUSTED: memory
            return answers.error(507, f"Memory exhausted: {body.decode(errors='replace')}")
        return status, body, content_type


class RoutedModel:
    """A ready model in one worker: its invocations and who is running them."""

    __slots__ = ("name", "load_id", "invocations", "active", "retired", "drained")

    def __init__(self, name: str, load_id: int, invocations: Any):
        self.name, self.load_id, self.invocations = name, load_id, invocations
        self.active: set[object] = set()
        self.retired = False
        self.drained = threading.Event()

    def retire(self, timeout: float) -> None:
        """No new invocation starts; wait for the running ones (each is bounded by the gunicorn timeout)."""
        self.retired = True
        if self.active and not self.drained.wait(timeout):
            log.warning("model %s: invocations still running after %g s; unloading it anyway", self.name, timeout)


class WorkerModels:
    """This worker's view of the registry: the code of every model being loaded or ready, the routes of the
    ready ones."""

    def __init__(self, universal: script.Handlers, servers: list[ModelServer], client: ModelServerClient,
                 timeout: float, default_accept: str = "application/json"):
        self.routes: dict[str, RoutedModel] = {}  # replaced as a whole; read by invocations without a lock
        self._universal = universal
        self._servers, self._client, self._timeout = servers, client, timeout
        self._default_accept = default_accept  # SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT, for toolkit scripts
        # name -> (load id, handlers, modules, the toolkit script's /invocations after its start-up functions)
        self._code: dict[str, tuple[int, script.Handlers, list[str], Any]] = {}

    def apply(self, message: Message) -> dict[str, str]:
        """Apply one snapshot (publication.py); returns the script errors by model name."""
        wanted = {model["name"]: model for model in message["models"]}
        errors: dict[str, str] = {}
        for name, model in wanted.items():
            have = self._code.get(name)
            if have is not None and have[0] == model["load_id"]:
                continue
            try:
                self._code[name] = self._import(name, model)
            except (script.ScriptError, StartupFailure) as exc:
                errors[name] = str(exc)
        routes = {}
        for name, model in wanted.items():
            if model["state"] != "ready" or name not in self._code:
                continue
            old = self.routes.get(name)
            load_id, handlers, _, toolkit = self._code[name]
            routes[name] = old if old is not None and old.load_id == load_id else RoutedModel(
                name, load_id, toolkit or ModelInvocations(handlers, self._servers, self._client, name, self._timeout))
        previous, self.routes = self.routes, routes
        for name, route in previous.items():
            if routes.get(name) is not route:
                route.retire(self._timeout + 5)
        for name in [n for n in self._code if n not in wanted or n in errors]:
            script.forget(self._code.pop(name)[2])
        return errors

    def _import(self, name: str, model: Message) -> tuple[int, script.Handlers, list[str], Any]:
        if model["script"] is None:
            handlers, modules = self._universal, []
        else:
            handlers, modules = script.load_private(Path(model["script"]), f"sagemaker_tfs_model_{digest(name)}_"
                                                                           f"{model['load_id']}")
            log.info("model %s: handler script %s (%s)", name, model["script"], handlers.contract.name.lower())
        toolkit = None
        if handlers.contract is Contract.TOOLKIT:
            try:  # the start-up functions, with model_dir = the model's url (toolkit-contract.md §11)
                toolkit = toolkit_invocations(handlers, model["url"], name, self._servers, self._client,
                                              self._default_accept)
            except StartupFailure:
                script.forget(modules)
                raise
        return model["load_id"], handlers, modules, toolkit


class Invoke:
    def __init__(self, models: WorkerModels):
        self._models = models

    def on_post(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        log_target_model(req)
        route = self._models.routes.get(name)
        if route is None:
            raise HandlerError(404, f"Model {name} is not loaded yet.")
        token = object()
        active = route.active
        active.add(token)
        try:
            if route.retired:  # an unload started after we found the route: as if it had not been there
                raise HandlerError(404, f"Model {name} is not loaded yet.")
            route.invocations.on_post(req, resp)
        finally:
            active.discard(token)
            if route.retired and not active:
                route.drained.set()


class NoModelInvocations:
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        log_target_model(req)
        raise HandlerError(400, NO_MODEL_NAME)


class Ping:
    """200 when every model server instance answers; models are not required (none is loaded at start-up)."""

    def __init__(self, servers: list[ModelServer], client: ModelServerClient):
        self._servers, self._client = servers, client

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        problems = []
        for server in self._servers:
            try:
                self._client.request(server, "GET", "/v1/models/sagemaker-tfs-ping", timeout=PING_TIMEOUT_SECONDS)
            except ModelServerError as exc:
                problems.append(exc.message)
        if problems:
            resp.status, resp.data, resp.content_type = answers.error(503, "not ready: " + "; ".join(problems))
        else:
            resp.status, resp.data = 200, b""


def create_app(env: Mapping[str, str] | None = None) -> falcon.App:
    """The app of one gunicorn worker of a multi-model endpoint: the universal script, the registry, the routes."""
    settings = Settings.from_env(env)
    settings.require_set_by_serve()
    _configure_logging(settings.gunicorn_loglevel, settings.log_format)
    servers = model_servers(settings)
    try:
        universal = script.load_code(Path(settings.multi_model_code_dir))
    except script.ScriptError as exc:
        settings.app_startup_error_file.write_text(f"{exc}\n")
        raise
    timeout = float(settings.gunicorn_timeout_seconds)
    client = ModelServerClient(timeout)
    models = WorkerModels(universal, servers, client, timeout, settings.default_invocations_accept)
    Subscriber(Path(settings.runtime_dir) / "registry.sock", models.apply).start(timeout=30)

    app = falcon.App(media_type=answers.JSON)
    middleware.install(app, None, settings.server_timing, settings.log_format == logs.JSON)
    app.add_route("/ping", Ping(servers, client))
    app.add_route("/invocations", NoModelInvocations())
    app.add_route("/models/{name}/invoke", Invoke(models))
    app.add_route("/execution-parameters", ExecutionParameters(settings.execution_parameters()))
    if env is None:  # a gunicorn worker: as the single-model app (proxy/app.py)
        gc.set_threshold(50_000, 20, 10)
        gc.freeze()
    log.info("multi-model app ready: model server(s) %s, %d model(s) routed, universal code: %s",
             ", ".join(s.address for s in servers), len(models.routes), universal.contract.name.lower())
    return app
