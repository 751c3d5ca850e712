"""What Falcon does for every route, each in one place: the request id (a middleware) and the mapping of
exceptions to JSON answers (one error handler, `error_answer`). Resources only compute their answer and raise.
A resource that answers from the WSGI environ alone (the invocation routes) is called without Falcon's request and
response objects (`answer_directly`, a quarter of a scripted request's CPU less), with the same rules.

    HandlerError (ModelServerError too)       its status, {"error": message}
    falcon.HTTPError raised by a script       its status and headers, {"error": ..., "title": ..., "description": ...}
    falcon's routing errors (404, 405)        their status and headers, {"error": reason}
    any other exception                       500 {"error": str(exception)}, logged with its traceback
Every answer carries X-Amzn-RequestId (the client's, else a new UUID) and every error is logged with it; while
a request is handled, logs.request_id names it, so that every JSON log line of the request carries it.
With SAGEMAKER_METRICS or SAGEMAKER_SERVER_TIMING, the middleware (then RequestScope) also times every request: its
stages (req.context.timings, which the invocation path fills) and total go to the metrics and the Server-Timing
header.
"""

from __future__ import annotations

import contextvars
import itertools
import logging
import os
import random
import re
import time
from collections.abc import Callable
from typing import Any

import falcon

from ..errors import HandlerError
from ..shared import json_bodies, logs
from ..shared.headers import REQUEST_ID_HEADER, SERVER_TIMING_HEADER, TARGET_MODEL_HEADER, environ_key
from . import answers
from .answers import Answer
from .metrics import AppMetrics, Timings

log = logging.getLogger("sagemaker_tfs.app")

_REQUEST_ID_KEY = environ_key(REQUEST_ID_HEADER)
_TARGET_MODEL_KEY = environ_key(TARGET_MODEL_HEADER)
# the names as falcon sends them (lower case), for the answers made without it
_REQUEST_ID_NAME, _SERVER_TIMING_NAME = REQUEST_ID_HEADER.lower(), SERVER_TIMING_HEADER.lower()


def log_target_model(env: dict, rid: str) -> None:
    """SageMaker's TargetModel (e.g. `a/model-7.tar.gz`) with the request id, for the multi-model routes: which
    archive a request was for."""
    target = env.get(_TARGET_MODEL_KEY)
    if target is not None:
        logging.getLogger("sagemaker_tfs.multi_model").info(
            "request %s: %s %s, target model %s", rid, env["REQUEST_METHOD"], request_path(env), target
        )


def request_path(env: dict) -> str:
    """The request's path as falcon's req.path reads it: PATH_INFO, "/" when empty, UTF-8 (PEP 3333 carries it
    as latin-1)."""
    path = env["PATH_INFO"] or "/"
    return path if path.isascii() else path.encode("latin-1").decode("utf-8", "replace")


def new_request_id() -> str:
    """An id in the layout of a random (version 4) UUID, unique in the process and, with overwhelming probability,
    beyond: 74 random bits drawn once per process, then a 48-bit counter that starts at a random value. A fifth of
    str(uuid.uuid4())'s cost, and no system call: an id, not a secret."""
    return f"{_ids.prefix}{next(_ids.counter) & 0xFFFF_FFFF_FFFF:012x}"


class _Ids:
    def __init__(self) -> None:
        self.draw()

    def draw(self) -> None:
        """New random bits (at start, and in each forked child: the workers must not share them)."""
        digits = f"{random.getrandbits(80):020x}"
        variant = "89ab"[int(digits[16], 16) & 3]  # RFC 4122's variant bits
        self.prefix = f"{digits[:8]}-{digits[8:12]}-4{digits[13:16]}-{variant}{digits[17:20]}-"
        self.counter = itertools.count(random.getrandbits(48))


_ids = _Ids()
os.register_at_fork(after_in_child=_ids.draw)


# A client's X-Amzn-RequestId is kept when it is this (SageMaker's are UUIDs); another one is replaced by a new id:
# a long one would outgrow nginx's buffer for the answer's headers (a 503 after the handler ran), control
# characters would end up in logs.
_SANE_REQUEST_ID = re.compile(r"[\x20-\x7e]{1,256}")


def request_id(env: dict) -> str:
    """The client's X-Amzn-RequestId when it is sane (echoed and logged: printable ASCII, 256 at most), else a new
    one."""
    rid = env.get(_REQUEST_ID_KEY)
    if not rid or not _SANE_REQUEST_ID.fullmatch(rid):
        rid = new_request_id()
    return rid


class RequestId:
    """Sets req.context.request_id and the answer's X-Amzn-RequestId before routing, so that every answer,
    errors and unknown paths included, carries it."""

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        rid = req.context.request_id = request_id(req.env)
        resp.set_header(REQUEST_ID_HEADER, rid)


class RequestScope(RequestId):
    """RequestId, and what lasts for the request (one middleware, so that the request path pays for one): the
    request id in logs.request_id (JSON logs), and the timings (metrics, Server-Timing): req.context.timings
    collects the stages; at the end, the total and the stages go to the metrics and the Server-Timing header.
    `begin` and `end` are the same for a request answered without Falcon's objects (answer_directly)."""

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

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        super().process_request(req, resp)
        context = req.context
        context.log_token, context.timings = self.begin(context.request_id)

    def process_response(self, req: falcon.Request, resp: falcon.Response, resource, req_succeeded: bool) -> None:
        context = req.context
        header = self.end(context.get("log_token"), context.get("timings"), req.uri_template, resp.status_code)
        if header is not None:
            resp.set_header(SERVER_TIMING_HEADER, header)


def install(
    app: falcon.App, metrics: AppMetrics | None = None, server_timing: bool = False, log_context: bool = False
) -> RequestScope | None:
    """Add the request id middleware (RequestScope when the request needs more: JSON logs, metrics, Server-Timing)
    and the error handler to `app`; returns the RequestScope, if any."""
    scope = (
        RequestScope(metrics, server_timing, log_context)
        if metrics is not None or server_timing or log_context
        else None
    )
    app.add_middleware(scope or RequestId())
    # for Exception and for HTTPError, for which falcon has a handler of its own (HTTPStatus keeps falcon's)
    app.add_error_handler((Exception, falcon.HTTPError), _on_error)
    return scope


def answer_directly(
    env: dict,
    start_response: Callable,
    path: str,
    answer: Callable[..., Answer],
    params: dict,
    route: str,
    scope: RequestScope | None,
) -> list[bytes]:
    """The WSGI answer of a route whose resource answers from the environ alone (its `answer(env, request_id,
    timings, **params)`), without falcon's request and response objects: what falcon with this module's middleware
    and error handler would answer, header for header (test/app/test_app_direct_answers.py compares them)."""
    rid = request_id(env)
    token, timings = scope.begin(rid) if scope is not None else (None, None)
    extra = None
    try:
        status, body, content_type = answer(env, rid, timings, **params)
    except Exception as exc:
        (status, body, content_type), extra = error_answer(exc, rid, env["REQUEST_METHOD"], path)
    headers = [(_REQUEST_ID_NAME, rid)]
    if content_type is not None:
        headers.append(("content-type", content_type))
    if extra:  # a dict, or (name, value) pairs, as falcon takes them
        headers += [(name.lower(), value) for name, value in (extra.items() if isinstance(extra, dict) else extra)]
    if scope is not None:
        timing = scope.end(token, timings, route, status)
        if timing is not None:
            headers.append((_SERVER_TIMING_NAME, timing))
    headers.append(("content-length", str(len(body))))
    if content_type is None:  # falcon's default type, which it adds last
        headers.append(("content-type", answers.JSON))
    start_response(falcon.code_to_http_status(status), headers)
    return [body]


def error_answer(exc: Exception, rid: str, method: str, path: str) -> tuple[Answer, Any]:
    """The answer to an exception raised while answering a request (the module's text), and the headers it adds (a
    dict or pairs, as the exception holds them); logged with the request id. A content type None is falcon's default
    (application/json, added last)."""
    if isinstance(exc, (falcon.HTTPRouteNotFound, falcon.HTTPMethodNotAllowed)):
        log.info("request %s: %s %s: %s", rid, method, path, exc.status)
        return answers.error(exc.status_code, _message(exc)), exc.headers
    if isinstance(exc, HandlerError):
        log.log(
            logging.ERROR if exc.status >= 500 else logging.WARNING, "request %s: %d %s", rid, exc.status, exc.message
        )
        return answers.error(exc.status, exc.message), None
    if isinstance(exc, falcon.HTTPError):
        # raised by a handler script: its clients may read falcon's own fields, so they are kept next to "error"
        log.warning("request %s: the handler raised falcon.HTTPError %s: %s", rid, exc.status, exc.description or "")
        return (exc.status_code, json_bodies.error(_message(exc), exc.to_dict()), answers.JSON), exc.headers
    if isinstance(exc, falcon.HTTPStatus):  # (falcon's own handler answers it on falcon's path); the default type
        text = exc.text
        return (exc.status_code, text.encode() if text else b"", None), exc.headers
    log.exception("request %s: 500 %s: %s (%s %s)", rid, type(exc).__name__, exc, method, path)
    return answers.error(500, str(exc)), None


def _on_error(req: falcon.Request, resp: falcon.Response, exc: Exception, params: dict) -> None:
    (resp.status, resp.data, resp.content_type), headers = error_answer(
        exc, req.context.request_id, req.method, req.path
    )
    if headers:
        resp.set_headers(headers)


def _message(exc: falcon.HTTPError) -> str:
    """The error's description, else its reason phrase ("Not Found")."""
    return exc.description or exc.status.split(" ", 1)[-1]
