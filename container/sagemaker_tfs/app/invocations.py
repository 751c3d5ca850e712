"""POST /invocations: the Context from the headers, the handler chain, and its answer."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import falcon

from ..errors import HandlerError
from ..model_client.model_servers import ModelServer, ModelServerClient, round_robin
from ..shared.cooperative import call_script, script_step
from ..shared.handler_contract import Contract
from ..shared.tfs_api import model_path
from ..web import answers
from ..web.answers import Answer, Reply
from ..web.bodies import Body, body_stream
from ..web.metrics import Timings
from ..web.sessions import NO_SESSION, request_session, with_session_headers
from .context import CUSTOM_ATTRIBUTES_KEY, DEFAULT_ACCEPT, DEFAULT_CONTENT_TYPE, Context, tfs_attributes
from .script import Handlers

log = logging.getLogger("sagemaker_tfs.app")


class Invocations:
    """The /invocations resource: one per worker, shared by its threads (no locks: the model server
    instance is picked by model_servers.round_robin)."""

    def __init__(
        self,
        handlers: Handlers,
        servers: list[ModelServer],
        client: ModelServerClient,
        default_model: str,
        timeout: float,
        session_expiry: float = 1200.0,
    ):
        self._session_expiry = session_expiry
        self._client = client
        self._default_model = default_model
        self._default_path = model_path(default_model)
        self._timeout = timeout
        self._with_channel = handlers.contract is not Contract.DEFAULT
        # a script's functions may block (cooperative.py decides where they run); the default handler's never do
        self._run = _call if handlers.contract is Contract.DEFAULT else call_script
        self._step = answers.next_item if handlers.contract is Contract.DEFAULT else script_step(answers.END)
        self._next_server = round_robin(servers)
        if handlers.handler is not None:
            self._handler = handlers.handler
            self._invoke = self._call_handler
        elif handlers.input_handler is not None and handlers.output_handler is not None:
            self._input_handler, self._output_handler = handlers.input_handler, handlers.output_handler
            self._invoke = self._call_pair
            default = handlers.contract is Contract.DEFAULT
            self._input_name = "default_input_handler" if default else "input_handler"
            self._output_name = "default_output_handler" if default else "output_handler"
        else:  # script.contract() gives one or the other
            raise ValueError(f"{handlers.script}: neither handler nor input_handler and output_handler")

    def answer(self, env: dict, rid: str, timings: Timings | None) -> Answer | Reply:
        """The answer of the handler chain (POST), with the session headers of what the script opened or closed;
        what it raises is answered by web/app.error_answer."""
        context, server, path = self._context(env)
        answer = self._invoke(body_stream(env), context, server, path, rid, timings)
        return with_session_headers(answer, context.session_state)

    def _context(self, env: dict) -> tuple[Context, ModelServer, str]:
        server = self._next_server()
        attributes = env.get(CUSTOM_ATTRIBUTES_KEY)
        name, version, method, path = self._target(attributes)
        length = env.get("CONTENT_LENGTH")
        context = Context(
            name,
            version,
            method,
            server.base_uri + path,
            server.grpc_port,
            server.channel if self._with_channel else None,
            attributes,
            env.get("CONTENT_TYPE") or DEFAULT_CONTENT_TYPE,
            env.get("HTTP_ACCEPT") or DEFAULT_ACCEPT,
            int(length) if length else None,
            self._timeout,
        )
        session = request_session(env, self._session_expiry)
        if session is not NO_SESSION:
            context.session_state = session
        return context, server, path

    def _target(self, attributes: str | None) -> tuple[str | None, str | None, str | None, str]:
        """(context.model_name, version, method, model server path) for a request's custom attributes."""
        if not attributes:
            return None, None, None, self._default_path
        name, version, method = tfs_attributes(attributes)
        return name, version, method, model_path(name or self._default_model, version, method)

    def _call_handler(
        self, data: Body, context: Context, server: ModelServer, path: str, rid: str, timings: Timings | None
    ) -> Answer:
        started = time.perf_counter()
        result = self._run(self._handler, data, context)
        if timings is not None:
            timings.add("handler", started)
        return answers.from_return_value(result, context.accept_header, "handler", self._step)

    def _call_pair(
        self, data: Body, context: Context, server: ModelServer, path: str, rid: str, timings: Timings | None
    ) -> Answer:
        """input_handler, the model server, output_handler; each stage timed when timings are asked for."""
        since = time.perf_counter()
        request = self._run(self._input_handler, data, context)
        if timings is not None:
            since = timings.add(self._input_name, since)
        if _is_arrays(request):  # numpy arrays go in binary (over gRPC) where that gives the REST call's answer
            from ..model_client import tensor_calls  # imports numpy: on the first array only

            response = tensor_calls.answer(server, self._client, path, request, self._timeout)
        else:
            response = self._client.request(server, "POST", path, request)
        if timings is not None:
            since = timings.add("model_server", since)
        try:
            result = self._run(self._output_handler, response, context)
            if timings is not None:
                timings.add(self._output_name, since)
        except (HandlerError, falcon.HTTPError):
            raise  # the script chose the status
        except Exception as exc:
            if response.status_code == 200:
                raise
            # Scripts written for the original raise on a model server error: the client gets that error.
            log.warning(
                "request %s: %s raised %s: %s on the model server's %d answer, which is passed on",
                rid,
                self._output_name,
                type(exc).__name__,
                exc,
                response.status_code,
                exc_info=True,
            )
            return (response.status_code, response.content, response.headers.get("Content-Type") or answers.JSON)
        return answers.from_return_value(result, context.accept_header, self._output_name, self._step)


def _call(fn: Callable, *args: Any) -> Any:
    return fn(*args)


def _is_arrays(value: Any) -> bool:
    """An array (numpy's array interface, tested without importing numpy), or a dict of them."""
    if isinstance(value, dict):
        return bool(value) and all(hasattr(item, "__array_interface__") for item in value.values())
    return hasattr(value, "__array_interface__")
