"""The WSGI app of every route we serve (the gunicorn workers' app, `serve`'s /models API and runtime API): one path
for every request, each rule of an answer written once here. Falcon gives the router (falcon.routing.CompiledRouter),
its HTTP errors (which handler scripts raise) and their status lines; the answers are ours.

A route's responders are given by method: `add_route("/models/{name}", GET=..., DELETE=...)`. Each is called as
`responder(env, request id, timings, **the template's fields)` with the WSGI environ, and returns an Answer
(status, body, content type) or a Reply (with headers), or raises: `error_answer` maps every exception to its
answer, once:

    HandlerError (ModelServerError too)       its status, {"error": message}
    AnsweringError (the runtime API's)        the answer it gives
    falcon.HTTPError raised by a script       its status and headers, {"error": ..., "title": ..., "description": ...}
    falcon.HTTPStatus raised by a script      its status, headers and text
    no route (404), another method (405)      their status (a 405 with Allow), {"error": reason}, as Falcon answers
                                              (a method Falcon does not know: its 400, as a falcon.HTTPError)
    any other exception                       500 {"error": str(exception)}, logged with its traceback

Every answer's headers, in this order: X-Amzn-RequestId (the client's, else a new id), Content-Type, the answer's
own headers, Server-Timing (SAGEMAKER_SERVER_TIMING), Content-Length; a HEAD request gets them without the body.
Every error is logged with the request id; while a request is handled, logs.request_id names it (JSON logs). With
SAGEMAKER_METRICS or SAGEMAKER_SERVER_TIMING, every request is timed: its stages (the `timings` the invocation routes
fill) and total go to the metrics and the Server-Timing header.
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import NoReturn

import falcon
from falcon.constants import COMBINED_METHODS
from falcon.routing import CompiledRouter

from ..errors import HandlerError
from ..shared import json_bodies, logs
from ..shared.headers import REQUEST_ID_HEADER, SERVER_TIMING_HEADER
from ..shared.media_types import JSON
from ..shared.wsgi_call import close
from . import answers
from .answers import Answer, AnsweringError, Headers, Reply
from .metrics import AppMetrics, Timings
from .request import request_id, request_path

log = logging.getLogger("sagemaker_tfs.app")

Responder = Callable[..., Answer | Reply]  # (env, request id, timings or None, **the route's fields)

# The names as sent: in lower case, as Falcon sends them
_REQUEST_ID_NAME, _SERVER_TIMING_NAME = REQUEST_ID_HEADER.lower(), SERVER_TIMING_HEADER.lower()
_KNOWN_METHODS = frozenset(COMBINED_METHODS)  # another method is refused with 400 (Falcon's rule), not 405


class _Route:
    """A URI template's responders by method; OPTIONS answers which there are, another known method is a 405."""

    __slots__ = ("responders", "allowed")

    def __init__(self, responders: Mapping[str, Responder]):
        methods = sorted(responders)
        self.allowed = [*methods, "OPTIONS"]  # a 405's Allow, as Falcon writes it
        options = Reply(200, b"", JSON, [("allow", ", ".join(methods))])
        self.responders: dict[str, Responder] = {"OPTIONS": lambda *args, **params: options, **responders}

    def refuse(self, method: str) -> NoReturn:
        if method in _KNOWN_METHODS:
            raise falcon.HTTPMethodNotAllowed(self.allowed)
        raise falcon.HTTPBadRequest(title="Bad request", description="Invalid HTTP method")


class RequestScope:
    """What lasts for a request, when asked for: the request id in logs.request_id (JSON logs), and the timings
    (metrics, Server-Timing)."""

    def __init__(self, metrics: AppMetrics | None, server_timing: bool, log_context: bool):
        self._metrics, self._server_timing, self._log_context = metrics, server_timing, log_context
        self._timed = metrics is not None or server_timing

    def begin(self, rid: str) -> tuple[contextvars.Token | None, Timings | None]:
        """(the log context's token, the timings) of a request starting now; None for what is not asked for."""
        token = logs.request_id.set(rid) if self._log_context else None
        timings = None
        if self._timed:
            timings = Timings()
            if self._metrics is not None:
                self._metrics.started()
        return token, timings

    def end(
        self, token: contextvars.Token | None, timings: Timings | None, route: str | None, status: int
    ) -> str | None:
        """The request is answered: its figures to the metrics; the Server-Timing header's value, if asked for."""
        header = None
        if timings is not None:
            total = time.perf_counter() - timings.started
            if self._server_timing:
                header = timings.server_timing(total)
            if self._metrics is not None:
                self._metrics.finished(route, status, timings, total)
        if token is not None:
            logs.request_id.reset(token)
        return header


class WebApp:
    """A WSGI app of routes (see the module's text); `metrics`, `server_timing` and `log_context` (the request id in
    JSON logs) are what its requests' scope holds."""

    def __init__(self, metrics: AppMetrics | None = None, server_timing: bool = False, log_context: bool = False):
        self._router = CompiledRouter()
        self.metrics = metrics
        self._scope = (
            RequestScope(metrics, server_timing, log_context)
            if metrics is not None or server_timing or log_context
            else None
        )

    def add_route(self, template: str, **responders: Responder) -> None:
        """`responders` by method name (GET=..., POST=...) for the URI template (Falcon's syntax: `/models/{name}`)."""
        self._router.add_route(template, _Route(responders))

    def __call__(self, env: dict, start_response: Callable) -> Iterable[bytes]:
        rid = request_id(env)
        scope = self._scope
        token, timings = scope.begin(rid) if scope is not None else (None, None)
        method = env["REQUEST_METHOD"]
        path = request_path(env)
        template = None
        answer: Answer | Reply
        try:
            found = self._router.find(path)
            if found is None:
                raise falcon.HTTPRouteNotFound()
            route, _, params, template = found
            assert isinstance(route, _Route)  # (the router holds only these)
            answer = (route.responders.get(method) or route.refuse(method))(env, rid, timings, **params)
        except Exception as exc:  # noqa: BLE001 - every exception is an answer (error_answer)
            answer = error_answer(exc, rid, method, path)
        timing = scope.end(token, timings, template, answer[0]) if scope is not None else None
        return _send(start_response, answer, rid, timing, method == "HEAD")


def _send(
    start_response: Callable, answer: Answer | Reply, rid: str, timing: str | None, head: bool
) -> Iterable[bytes]:
    """Start the answer with its headers, in their order; its body (none for HEAD): whole, with its length, or its
    parts as they are made, with none, and nginx told not to buffer them (X-Accel-Buffering)."""
    body: bytes | Iterator[bytes]
    if isinstance(answer, Reply):
        status, body, content_type, own = answer
    else:
        (status, body, content_type), own = answer, ()
    headers = [(_REQUEST_ID_NAME, rid), ("content-type", content_type)]
    for name, value in own:
        name = name.lower()
        if name == "content-type":
            headers[1] = (name, value)
        elif name != "content-length":
            headers.append((name, value))
    if timing is not None:
        headers.append((_SERVER_TIMING_NAME, timing))
    if not isinstance(body, bytes):
        headers.append(("x-accel-buffering", "no"))
        start_response(falcon.code_to_http_status(status), headers)
        if head:
            close(body)
            return []
        return _streamed(body, rid)
    headers.append(("content-length", str(len(body))))
    start_response(falcon.code_to_http_status(status), headers)
    return [] if head else [body]


def _streamed(parts: Iterator[bytes], rid: str) -> Iterator[bytes]:
    """A streamed answer's parts, with what ends it early logged: the script's error after its first part (the
    server then ends the answer unfinished, without its last chunk), or the client gone."""
    try:
        yield from parts
    except GeneratorExit:
        log.info("request %s: the client went away before the answer's last part; the script's iterator is closed", rid)
        raise
    except Exception:
        log.exception("request %s: the answer's stream failed after its first part; it ends unfinished", rid)
        raise


def error_answer(exc: Exception, rid: str, method: str, path: str) -> Answer | Reply:
    """The answer to an exception raised while answering a request (the module's text), logged with the request
    id."""
    if isinstance(exc, (falcon.HTTPRouteNotFound, falcon.HTTPMethodNotAllowed)):
        log.info("request %s: %s %s: %s", rid, method, path, exc.status)
        return Reply(*answers.error(exc.status_code, _message(exc)), _pairs(exc.headers))
    if isinstance(exc, HandlerError):
        log.log(
            logging.ERROR if exc.status >= 500 else logging.WARNING, "request %s: %d %s", rid, exc.status, exc.message
        )
        return answers.error(exc.status, exc.message)
    if isinstance(exc, AnsweringError):
        return exc.answer(rid, method, path)
    if isinstance(exc, falcon.HTTPError):
        # raised by a handler script: its clients may read falcon's own fields, so they are kept next to "error"
        log.warning("request %s: the handler raised falcon.HTTPError %s: %s", rid, exc.status, exc.description or "")
        return Reply(exc.status_code, json_bodies.error(_message(exc), exc.to_dict()), JSON, _pairs(exc.headers))
    if isinstance(exc, falcon.HTTPStatus):
        text = exc.text
        return Reply(exc.status_code, text.encode() if text else b"", JSON, _pairs(exc.headers))
    log.exception("request %s: 500 %s: %s (%s %s)", rid, type(exc).__name__, exc, method, path)
    return answers.error(500, str(exc))


def _message(exc: falcon.HTTPError) -> str:
    """The error's description, else its reason phrase ("Not Found")."""
    return exc.description or falcon.code_to_http_status(exc.status).split(" ", 1)[-1]


def _pairs(headers: Mapping[str, str] | Iterable[tuple[str, str]] | None) -> Headers:
    """An exception's headers (a dict, or (name, value) pairs, as Falcon takes them) as pairs."""
    return list(headers.items() if isinstance(headers, Mapping) else headers or ())
