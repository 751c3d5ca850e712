"""The management routes of a multi-model endpoint, served by the registry owner in `serve`'s process (nginx
sends `/models` and `/models/{name}` to its UNIX socket), so that a load never runs in a gunicorn worker and is
never cut by the worker timeout: it may take SAGEMAKER_TFS_WAIT_TIME_SECONDS.

  POST   /models           load (owner.load: the checks of §3, in order)
  GET    /models           list, paginated (`limit`, `next_page_token`)
  GET    /models/{name}    describe
  DELETE /models/{name}    unload
"""

from __future__ import annotations

import json
import logging
import socketserver
import threading
from pathlib import Path
from typing import Any, Callable
from wsgiref.simple_server import WSGIRequestHandler

import falcon

from ..proxy import answers
from ..proxy.app import _on_http_error, _on_unexpected_error
from ..proxy.invocations import REQUEST_ID_HEADER, request_id
from .owner import Owner
from .source import LoadError
from .worker import log_target_model

log = logging.getLogger("sagemaker_tfs.multi_model")


def _answer(req: falcon.Request, resp: falcon.Response, route: str, call: Callable[[], dict[str, Any]]) -> None:
    rid = request_id(req.env)
    log_target_model(req, rid, route)
    try:
        status, body = 200, call()
    except LoadError as exc:
        log.log(logging.ERROR if exc.status >= 500 else logging.INFO, "request %s: %s %s: %d %s", rid, req.method,
                route, exc.status, exc.message)
        status, body = exc.status, {"error": exc.message}
    resp.status = status
    resp.data = json.dumps(body, ensure_ascii=False).encode()
    resp.content_type = answers.JSON
    resp.set_header(REQUEST_ID_HEADER, rid)


class Models:
    def __init__(self, owner: Owner):
        self._owner = owner

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        _answer(req, resp, "/models", lambda: self._owner.list(req.get_param("limit"),
                                                                 req.get_param("next_page_token")))

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        raw = req.bounded_stream.read()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None  # check 1 answers it
        _answer(req, resp, "/models", lambda: self._owner.load(body))


class Model:
    def __init__(self, owner: Owner):
        self._owner = owner

    def on_get(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        _answer(req, resp, f"/models/{name}", lambda: self._owner.describe(name))

    def on_delete(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        _answer(req, resp, f"/models/{name}", lambda: self._owner.unload(name))


def create_app(owner: Owner) -> falcon.App:
    app = falcon.App(media_type=answers.JSON)
    app.add_route("/models", Models(owner))
    app.add_route("/models/{name}", Model(owner))
    app.add_error_handler(Exception, _on_unexpected_error)
    app.add_error_handler(falcon.HTTPError, _on_http_error)
    return app


class _Handler(WSGIRequestHandler):
    def setup(self) -> None:
        super().setup()
        self.client_address = ("127.0.0.1", 0)  # a UNIX socket's peer has no address; wsgiref wants one

    def log_message(self, format: str, *args: Any) -> None:  # nginx's access log has every request
        pass


class ManagementServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """The management app on a UNIX socket, a thread per request (loads of different names run in parallel)."""

    daemon_threads = True

    def __init__(self, path: Path, app: falcon.App):
        path.unlink(missing_ok=True)
        super().__init__(str(path), _Handler)
        self.get_app = lambda: app
        self.base_environ = {"SERVER_NAME": "localhost", "SERVER_PORT": "80", "GATEWAY_INTERFACE": "CGI/1.1",
                             "SCRIPT_NAME": ""}

    def start(self) -> None:
        threading.Thread(target=self.serve_forever, name="models-api", daemon=True).start()
