"""What Falcon does for every route, each in one place: the request id (a middleware) and the mapping of
exceptions to JSON answers (error handlers). Resources only compute their answer and raise.

    HandlerError (ModelServerError too)       its status, {"error": message}
    falcon.HTTPError raised by a script       its status and headers, {"error": ..., "title": ..., "description": ...}
    falcon's routing errors (404, 405)        their status and headers, {"error": reason}
    any other exception                       500 {"error": str(exception)}, logged with its traceback
Every answer carries X-Amzn-RequestId (the client's, else a new UUID) and every error is logged with it.
"""

from __future__ import annotations

import json
import logging
import uuid

import falcon

from ..errors import HandlerError
from . import answers
from .answers import Answer

log = logging.getLogger("sagemaker_tfs.proxy")

REQUEST_ID_HEADER = "X-Amzn-RequestId"


class RequestId:
    """Sets req.context.request_id and the answer's X-Amzn-RequestId before routing, so that every answer,
    errors and unknown paths included, carries it."""

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        rid = req.context.request_id = req.env.get("HTTP_X_AMZN_REQUESTID") or str(uuid.uuid4())
        resp.set_header(REQUEST_ID_HEADER, rid)


def install(app: falcon.App) -> None:
    """Add the request id middleware and the error handlers to `app`."""
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
    fields = {"error": _message(exc), **exc.to_dict()}
    _answer(resp, (exc.status_code, json.dumps(fields, ensure_ascii=False).encode(), answers.JSON), exc.headers)


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
