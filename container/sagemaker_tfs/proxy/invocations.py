"""POST /invocations: the Context from the headers, the handler chain, and the answer or error."""

from __future__ import annotations

import itertools
import json
import logging
import os
import uuid
from typing import Any

import falcon

from ..errors import HandlerError
from . import answers
from .answers import Answer
from .context import DEFAULT_ACCEPT, DEFAULT_CONTENT_TYPE, Context, model_path, tfs_attributes
from .model_servers import ModelServer, ModelServerClient
from .script import Handlers

log = logging.getLogger("sagemaker_tfs.proxy")

REQUEST_ID_HEADER = "X-Amzn-RequestId"


def request_id(env: dict) -> str:
    """The client's X-Amzn-RequestId, else a new UUID: every answer carries it, every error log names it."""
    return env.get("HTTP_X_AMZN_REQUESTID") or str(uuid.uuid4())


def http_error_answer(exc: falcon.HTTPError, falcon_fields: bool = False) -> Answer:
    """A falcon.HTTPError as a JSON answer: its status and {"error": description, else reason phrase}, plus
    falcon's own fields ("title", "description") for errors a script raised, whose clients may read them."""
    message = exc.description or exc.status.split(" ", 1)[-1]
    if not falcon_fields:
        return answers.error(exc.status_code, message)
    fields = {"error": message, **exc.to_dict()}
    return exc.status_code, json.dumps(fields, ensure_ascii=False).encode(), answers.JSON


class Invocations:
    """The /invocations resource: one per worker, shared by its threads (no locks: the model server
    instance is picked round-robin with itertools.cycle, whose next() is atomic)."""

    def __init__(self, handlers: Handlers, servers: list[ModelServer], client: ModelServerClient,
                 default_model: str, timeout: float):
        self._handlers = handlers
        self._client = client
        self._default_model = default_model
        self._default_path = model_path(default_model)
        self._timeout = timeout
        self._with_channel = handlers.contract != "default"
        start = os.getpid() % len(servers)  # workers start on different instances
        self._next_server = itertools.cycle(servers[start:] + servers[:start]).__next__
        if handlers.handler is not None:
            self._invoke = self._call_handler
        else:
            self._invoke = self._call_pair
            self._output_name = "default_output_handler" if handlers.contract == "default" else "output_handler"

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        env = req.env
        rid = request_id(env)
        try:
            context, server, path = self._context(env)
            status, body, content_type = self._invoke(req.stream, context, server, path, rid)
        except HandlerError as exc:
            log.log(logging.ERROR if exc.status >= 500 else logging.WARNING, "request %s: %d %s", rid, exc.status,
                    exc.message)
            status, body, content_type = answers.error(exc.status, exc.message)
        except falcon.HTTPError as exc:
            log.warning("request %s: the handler raised falcon.HTTPError %s: %s", rid, exc.status,
                        exc.description or "")
            status, body, content_type = http_error_answer(exc, falcon_fields=True)
            for name, value in (exc.headers or {}).items():
                resp.set_header(name, value)
        except Exception as exc:
            log.exception("request %s: 500 %s: %s", rid, type(exc).__name__, exc)
            status, body, content_type = answers.error(500, str(exc))
        resp.status = status
        resp.data = body
        resp.content_type = content_type
        resp.set_header(REQUEST_ID_HEADER, rid)

    def _context(self, env: dict) -> tuple[Context, ModelServer, str]:
        server = self._next_server()
        attributes = env.get("HTTP_X_AMZN_SAGEMAKER_CUSTOM_ATTRIBUTES")
        name, version, method, path = self._target(attributes)
        length = env.get("CONTENT_LENGTH")
        context = Context(
            name, version, method, server.base_uri + path, server.grpc_port,
            server.channel if self._with_channel else None, attributes,
            env.get("CONTENT_TYPE") or DEFAULT_CONTENT_TYPE, env.get("HTTP_ACCEPT") or DEFAULT_ACCEPT,
            int(length) if length else None, self._timeout)
        return context, server, path

    def _target(self, attributes: str | None) -> tuple[str | None, str | None, str | None, str]:
        """(context.model_name, version, method, model server path) for a request's custom attributes."""
        if not attributes:
            return None, None, None, self._default_path
        name, version, method = tfs_attributes(attributes)
        return name, version, method, model_path(name or self._default_model, version, method)

    def _call_handler(self, data: Any, context: Context, server: ModelServer, path: str, rid: str) -> Answer:
        return answers.from_return_value(self._handlers.handler(data, context), context.accept_header, "handler")

    def _call_pair(self, data: Any, context: Context, server: ModelServer, path: str, rid: str) -> Answer:
        handlers = self._handlers
        response = self._client.request(server, "POST", path, handlers.input_handler(data, context))
        try:
            result = handlers.output_handler(response, context)
        except (HandlerError, falcon.HTTPError):
            raise  # the script chose the status
        except Exception as exc:
            if response.status_code == 200:
                raise
            # Scripts written for the original raise on a model server error: the client gets that error.
            log.warning("request %s: %s raised %s: %s on the model server's %d answer, which is passed on",
                        rid, self._output_name, type(exc).__name__, exc, response.status_code, exc_info=True)
            return (response.status_code, response.content,
                    response.headers.get("Content-Type") or answers.JSON)
        return answers.from_return_value(result, context.accept_header, self._output_name)
