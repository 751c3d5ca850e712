"""What Falcon does for every route, each in one place: the request id (a middleware) and the mapping of
exceptions to JSON answers (error handlers). Resources only compute their answer and raise.

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

import logging
import random
import re
import time

import falcon

from ..shared import json_bodies, logs
from ..shared.headers import REQUEST_ID_HEADER, TARGET_MODEL_HEADER, environ_key
from ..errors import HandlerError
from . import answers
from .answers import Answer
from .metrics import AppMetrics, Timings

log = logging.getLogger("sagemaker_tfs.app")

_REQUEST_ID_KEY = environ_key(REQUEST_ID_HEADER)


def log_target_model(req: falcon.Request) -> None:
    """SageMaker's TargetModel (e.g. `a/model-7.tar.gz`) with the request id, for the multi-model routes: which
    archive a request was for."""
    target = req.get_header(TARGET_MODEL_HEADER)
    if target is not None:
        logging.getLogger("sagemaker_tfs.multi_model").info("request %s: %s %s, target model %s",
                                                            req.context.request_id, req.method, req.path, target)


def new_request_id() -> str:
    """A random (version 4) UUID as text: str(uuid.uuid4()) at a fraction of its cost. From the process's own
    generator (seeded anew in each forked worker), not the kernel's (a system call each): an id, not a secret."""
    digits = f"{random.getrandbits(128):032x}"
    return (f"{digits[:8]}-{digits[8:12]}-4{digits[13:16]}-{_VARIANT[digits[16]]}{digits[17:20]}-"
            f"{digits[20:]}")


_VARIANT = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}  # RFC 4122's variant bits


# A client's X-Amzn-RequestId is kept when it is this (SageMaker's are UUIDs); another one is replaced by a new id:
# a long one would outgrow nginx's buffer for the answer's headers (a 503 after the handler ran), control
# characters would end up in logs.
_SANE_REQUEST_ID = re.compile(r"[\x20-\x7e]{1,256}")


class RequestId:
    """Sets req.context.request_id and the answer's X-Amzn-RequestId before routing, so that every answer,
    errors and unknown paths included, carries it."""

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        rid = req.env.get(_REQUEST_ID_KEY)
        if not rid or not _SANE_REQUEST_ID.fullmatch(rid):  # echoed and logged: printable ASCII, 256 at most
            rid = new_request_id()
        req.context.request_id = rid
        resp.set_header(REQUEST_ID_HEADER, rid)


class RequestScope(RequestId):
    """RequestId, and what lasts for the request (one middleware, so that the request path pays for one): the
    request id in logs.request_id (JSON logs), and the timings (metrics, Server-Timing): req.context.timings
    collects the stages; at the end, the total and the stages go to the metrics and the Server-Timing header."""

    def __init__(self, metrics: AppMetrics | None, server_timing: bool, log_context: bool):
        self._metrics, self._server_timing, self._log_context = metrics, server_timing, log_context
        self._timed = metrics is not None or server_timing

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        super().process_request(req, resp)
        context = req.context
        if self._log_context:
            context.log_token = logs.request_id.set(context.request_id)
        if self._timed:
            context.timings = Timings()
            if self._metrics is not None:
                self._metrics.started()

    def process_response(self, req: falcon.Request, resp: falcon.Response, resource, req_succeeded: bool) -> None:
        context = req.context
        timings = context.get("timings")
        if timings is not None:
            total = time.perf_counter() - timings.started
            if self._server_timing:
                resp.set_header("Server-Timing", timings.server_timing(total))
            if self._metrics is not None:
                self._metrics.finished(req.uri_template, resp.status_code, timings, total)
        token = context.get("log_token")
        if token is not None:
            logs.request_id.reset(token)


def install(app: falcon.App, metrics: AppMetrics | None = None, server_timing: bool = False,
            log_context: bool = False) -> None:
    """Add the request id middleware (RequestScope when the request needs more: JSON logs, metrics, Server-Timing)
    and the error handlers to `app`."""
    if metrics is not None or server_timing or log_context:
        app.add_middleware(RequestScope(metrics, server_timing, log_context))
    else:
        app.add_middleware(RequestId())
    app.add_error_handler(Exception, _on_unexpected_error)
    app.add_error_handler(HandlerError, _on_handler_error)
    app.add_error_handler(falcon.HTTPError, _on_script_http_error)
    app.add_error_handler((falcon.HTTPRouteNotFound, falcon.HTTPMethodNotAllowed), _on_routing_error)


def _answer(resp: falcon.Response, answer: Answer, headers: dict[str, str] | None = None) -> None:
    resp.status, resp.data, resp.content_type = answer
    if headers:
        resp.set_headers(headers)


def _on_handler_error(req: falcon.Request, resp: falcon.Response, exc: HandlerError, params: dict) -> None:
    log.log(logging.ERROR if exc.status >= 500 else logging.WARNING, "request %s: %d %s", req.context.request_id,
            exc.status, exc.message)
    _answer(resp, answers.error(exc.status, exc.message))


def _on_script_http_error(req: falcon.Request, resp: falcon.Response, exc: falcon.HTTPError, params: dict) -> None:
    """A falcon.HTTPError that is not falcon's routing error was raised by a handler script: its clients may
    read falcon's own fields, so they are kept next to "error"."""
    log.warning("request %s: the handler raised falcon.HTTPError %s: %s", req.context.request_id, exc.status,
                exc.description or "")
    _answer(resp, (exc.status_code, json_bodies.error(_message(exc), exc.to_dict()), answers.JSON), exc.headers)


def _on_routing_error(req: falcon.Request, resp: falcon.Response, exc: falcon.HTTPError, params: dict) -> None:
    log.info("request %s: %s %s: %s", req.context.request_id, req.method, req.path, exc.status)
    _answer(resp, answers.error(exc.status_code, _message(exc)), exc.headers)


def _on_unexpected_error(req: falcon.Request, resp: falcon.Response, exc: Exception, params: dict) -> None:
    log.exception("request %s: 500 %s: %s (%s %s)", req.context.request_id, type(exc).__name__, exc, req.method,
                  req.path)
    _answer(resp, answers.error(500, str(exc)))


def _message(exc: falcon.HTTPError) -> str:
    """The error's description, else its reason phrase ("Not Found")."""
    return exc.description or exc.status.split(" ", 1)[-1]
