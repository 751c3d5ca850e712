"""The management routes of a multi-model endpoint, served by the registry owner in `serve`'s process (nginx
sends `/models` and `/models/{name}` to its UNIX socket), so that a load never runs in a gunicorn worker and is
never cut by the worker timeout: it may take SAGEMAKER_TFS_WAIT_TIME_SECONDS.

  POST   /models           load (owner.load: the checks of docs/multi-model.md §3)
  GET    /models           list, paginated (`limit`, `next_page_token`)
  GET    /models/{name}    describe
  DELETE /models/{name}    unload
"""

from __future__ import annotations

import json
import logging
import os
import socketserver
import threading
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler

import falcon

from ..errors import HandlerError
from ..shared import json_bodies, runtime_dir
from ..web import answers, middleware
from ..web.middleware import log_target_model
from .owner import Owner

log = logging.getLogger("sagemaker_tfs.multi_model")

MAX_BODY = 65536  # a load request is {"model_name": ..., "url": ...}; nginx passes bodies of any size here
READ_TIMEOUT = 10.0  # seconds a read of a request may wait (nginx sends a request whole, at once)


def _json(resp: falcon.Response, body: dict[str, Any]) -> None:
    resp.data = json_bodies.encode(body)
    resp.content_type = answers.JSON


class Models:
    def __init__(self, owner: Owner):
        self._owner = owner

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        log_target_model(req)
        _json(resp, self._owner.list(req.get_param("limit"), req.get_param("next_page_token")))

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        log_target_model(req)
        data = req.bounded_stream.read(MAX_BODY + 1)
        if len(data) > MAX_BODY:
            raise HandlerError(413, f"The request body is larger than {MAX_BODY} bytes, the most a /models "
                                    "request may send")
        try:
            body = json.loads(data)
        except ValueError:
            body = None  # check 1 answers it
        _json(resp, self._owner.load(body))


class Model:
    def __init__(self, owner: Owner):
        self._owner = owner

    def on_get(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        log_target_model(req)
        _json(resp, self._owner.describe(name))

    def on_delete(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        log_target_model(req)
        _json(resp, self._owner.unload(name))


def create_app(owner: Owner) -> falcon.App:
    app = falcon.App(media_type=answers.JSON)
    middleware.install(app)  # request ids; LoadError is a HandlerError: its status and {"error": text}
    app.add_route("/models", Models(owner))
    app.add_route("/models/{name}", Model(owner))
    return app


class _Handler(WSGIRequestHandler):
    timeout = READ_TIMEOUT  # a half-sent request does not hold its thread for long (the socket's timeout)

    def setup(self) -> None:
        super().setup()
        self.client_address = ("127.0.0.1", 0)  # a UNIX socket's peer has no address; wsgiref wants one

    def log_message(self, format: str, *args: Any) -> None:  # nginx's access log has every request
        pass


class ManagementServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """The management app on a UNIX socket, a thread per request (loads of different names run in parallel)."""

    daemon_threads = True

    def __init__(self, path: Path, app: falcon.App):
        runtime_dir.remove(path)
        super().__init__(str(path), _Handler)
        os.chmod(path, 0o666)  # nginx's workers connect, as another user when serve is root (see stack/nginx.py)
        self.get_app = lambda: app
        self.base_environ = {"SERVER_NAME": "localhost", "SERVER_PORT": "80", "GATEWAY_INTERFACE": "CGI/1.1",
                             "SCRIPT_NAME": ""}

    def start(self) -> None:
        threading.Thread(target=self.serve_forever, name="models-api", daemon=True).start()
