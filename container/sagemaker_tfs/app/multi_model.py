"""The app's routes of a multi-model endpoint (app/routes.py builds them when SAGEMAKER_MULTI_MODEL=true):

  POST /models/{name}/invoke   the model's handler chain, as /invocations in single-model mode (docs/multi-model.md §4)
  POST /invocations            400: a multi-model endpoint needs the model in the path
The management routes (/models, /models/{name}) are the registry owner's (registry/management.py); nginx sends
them there.

Each worker follows the registry (registry/publication.py's Subscriber): a snapshot is applied in the subscriber
thread (scripts imported, routes swapped as one dict, code of models that left forgotten) and never on a request.
An invocation reads the route dict and marks itself in its model's `active` set (set.add/discard are atomic): no
lock, no sleep.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path

from ..errors import HandlerError
from ..model_client.model_servers import ModelServer, ModelServerClient, ModelServerError
from ..registry.publication import Message, ModelState
from ..shared.model_names import digest
from ..shared.tfs_api import model_path
from ..toolkit.invocations import ToolkitInvocations, start_invocations
from ..toolkit.lifecycle import StartupFailure
from ..web import answers
from ..web.bodies import Body
from ..web.metrics import Timings
from ..web.request import log_target_model
from . import script
from .context import Context, tfs_attributes
from .invocations import Invocations

log = logging.getLogger("sagemaker_tfs.multi_model")

NO_MODEL_NAME = "Invocation request does not contain model name."


class ModelInvocations(Invocations):
    """/invocations for one model: the path names the model, so the tfs-model-name attribute is ignored."""

    def _target(self, attributes: str | None) -> tuple[str | None, str | None, str | None, str]:
        version = method = None
        if attributes:
            _, version, method = tfs_attributes(attributes)
        return self._default_model, version, method, model_path(self._default_model, version, method)

    def _call_pair(
        self, data: Body, context: Context, server: ModelServer, path: str, rid: str, timings: Timings | None
    ) -> answers.Answer:
        try:
            status, body, content_type = super()._call_pair(data, context, server, path, rid, timings)
        except ModelServerError as exc:
            if exc.status == 502:  # the instance is down: serve is restarting it
                raise HandlerError(503, "model server restarting") from None
            raise
        # RESOURCE_EXHAUSTED for memory (a script's streamed answer is not looked into)
        if status == 429 and isinstance(body, bytes) and (b"OOM" in body or b"out of memory" in body.lower()):
            return answers.error(507, f"Memory exhausted: {body.decode(errors='replace')}")
        return status, body, content_type


class RoutedModel:
    """A ready model in one worker: its invocations and who is running them."""

    __slots__ = ("name", "load_id", "invocations", "active", "retired", "drained")

    def __init__(self, name: str, load_id: int, invocations: Invocations | ToolkitInvocations):
        self.name, self.load_id, self.invocations = name, load_id, invocations
        self.active: set[object] = set()
        self.retired = False
        self.drained = threading.Event()

    def retire(self, timeout: float) -> None:
        """No new invocation starts; wait for the running ones (each is bounded by the gunicorn timeout)."""
        self.retired = True
        if self.active and not self.drained.wait(timeout):
            log.warning("model %s: invocations still running after %g s; unloading it anyway", self.name, timeout)


@dataclass(frozen=True)
class ModelCode:
    """A model's code in this worker, imported when its load started."""

    load_id: int
    handlers: script.Handlers
    modules: list[str]  # the script's private modules, forgotten when the model leaves
    toolkit: ToolkitInvocations | None  # a toolkit script's /invocations, after its start-up functions


class WorkerModels:
    """This worker's view of the registry: the code of every model being loaded or ready, the routes of the
    ready ones."""

    def __init__(
        self,
        universal: script.Handlers,
        servers: list[ModelServer],
        client: ModelServerClient,
        timeout: float,
        default_accept: str = answers.JSON,
        gpu_id: int | None = None,
    ):
        self.routes: dict[str, RoutedModel] = {}  # replaced as a whole; read by invocations without a lock
        self._universal = universal
        self._servers, self._client, self._timeout = servers, client, timeout
        self._default_accept = default_accept  # SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT, for toolkit scripts
        self._gpu_id = gpu_id  # this worker's, for toolkit scripts (shared/gpus.py)
        self._code: dict[str, ModelCode] = {}

    def apply(self, message: Message) -> dict[str, str]:
        """Apply one snapshot (registry/publication.py); returns the script errors by model name."""
        wanted = {model["name"]: model for model in message["models"]}
        errors: dict[str, str] = {}
        for name, model in wanted.items():
            have = self._code.get(name)
            if have is not None and have.load_id == model["load_id"]:
                continue
            try:
                self._code[name] = self._import(name, model)
            except (script.ScriptError, StartupFailure) as exc:
                errors[name] = str(exc)
        routes = {}
        for name, model in wanted.items():
            if model["state"] != ModelState.READY or name not in self._code:
                continue
            old = self.routes.get(name)
            code = self._code[name]
            routes[name] = (
                old
                if old is not None and old.load_id == code.load_id
                else RoutedModel(
                    name,
                    code.load_id,
                    code.toolkit or ModelInvocations(code.handlers, self._servers, self._client, name, self._timeout),
                )
            )
        previous, self.routes = self.routes, routes
        for name, route in previous.items():
            if routes.get(name) is not route:
                route.retire(self._timeout + 5)
        for name in [n for n in self._code if n not in wanted or n in errors]:
            script.forget(self._code.pop(name).modules)
        return errors

    def forget(self) -> None:
        """Drop every model's code (an app closed in-process)."""
        self.routes = {}
        for code in self._code.values():
            script.forget(code.modules)
        self._code = {}

    def _import(self, name: str, model: Message) -> ModelCode:
        modules: list[str] = []
        if model["script"] is None:
            handlers = self._universal
        else:
            handlers, modules = script.load_private(
                Path(model["script"]), f"sagemaker_tfs_model_{digest(name)}_{model['load_id']}"
            )
            log.info("model %s: handler script %s (%s)", name, model["script"], handlers.contract.name.lower())
        toolkit = None
        if handlers.toolkit is not None:  # Contract.TOOLKIT
            try:  # the start-up functions, with model_dir = the model's url (docs/toolkit-contract.md §11)
                toolkit = start_invocations(
                    handlers.toolkit,
                    model["url"],
                    name,
                    self._servers,
                    self._client,
                    self._default_accept,
                    self._gpu_id,
                )
            except StartupFailure:
                script.forget(modules)
                raise
        return ModelCode(model["load_id"], handlers, modules, toolkit)


class Invoke:
    def __init__(self, models: WorkerModels):
        self._models = models

    def answer(self, env: dict, rid: str, timings: Timings | None, name: str) -> answers.Answer | answers.Reply:
        log_target_model(env, rid)
        route = self._models.routes.get(name)
        if route is None:
            raise HandlerError(404, f"Model {name} is not loaded yet.")
        token = object()
        active = route.active
        active.add(token)
        try:
            if route.retired:  # an unload started after we found the route: as if it had not been there
                raise HandlerError(404, f"Model {name} is not loaded yet.")
            return route.invocations.answer(env, rid, timings)
        finally:
            active.discard(token)
            if route.retired and not active:
                route.drained.set()


class NoModelInvocations:
    def answer(self, env: dict, rid: str, timings: Timings | None) -> answers.Answer:
        log_target_model(env, rid)
        raise HandlerError(400, NO_MODEL_NAME)
