"""A WSGI app (web/app.py) served on a UNIX socket by `serve`'s own threads (a thread per request), behind nginx: the
multi-model management routes (registry/management.py) and the local runtime API (runtime_api/). Requests that may
wait long (a model load, a model's answer) never hold a gunicorn worker or its timeout."""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler

from ..shared.sockets import unix_listener
from ..shared.wsgi_call import WsgiApp

READ_TIMEOUT = 10.0  # seconds a read of a request may wait (nginx sends a request whole, at once)
LINGER_SECONDS = 5.0  # how long what nginx still sends after the answer is read and dropped (shutdown_request)


class _Handler(WSGIRequestHandler):
    timeout = READ_TIMEOUT  # a half-sent request does not hold its thread for long (the socket's timeout)

    def setup(self) -> None:
        super().setup()
        self.client_address = ("127.0.0.1", 0)  # a UNIX socket's peer has no address; wsgiref wants one

    def log_message(self, format: str, *args: Any) -> None:  # nginx's access log has every request
        pass


class UnixAppServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """`app` on the UNIX socket `path` (created here, replacing a stale one), a thread per request."""

    daemon_threads = True
    # socketserver's default backlog is 5: a burst of nginx's connections would be refused (EAGAIN, a 503)
    request_queue_size = socket.SOMAXCONN

    def __init__(self, path: Path, app: WsgiApp, name: str):
        super().__init__(str(path), _Handler, bind_and_activate=False)
        self.socket.close()  # socketserver's own, unbound: ours is made as every socket nginx connects to
        self.socket = unix_listener(path, self.request_queue_size)
        self.name = name
        self.get_app = lambda: app
        self.base_environ = {
            "SERVER_NAME": "localhost",
            "SERVER_PORT": "80",
            "GATEWAY_INTERFACE": "CGI/1.1",
            "SCRIPT_NAME": "",
        }

    def start(self) -> None:
        threading.Thread(target=self.serve_forever, name=self.name, daemon=True).start()

    def shutdown_request(self, request: Any) -> None:
        """A lingering close: after the answer, read and drop what nginx still sends until it closes (or for
        LINGER_SECONDS). An answer given before the body was read (a refused request) would otherwise be lost: the
        socket closed with bytes unread resets the connection, and nginx, still writing the body, answers 502."""
        try:
            request.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + LINGER_SECONDS
            while (left := deadline - time.monotonic()) > 0:
                request.settimeout(left)
                if not request.recv(65536):
                    break
        except OSError:  # reset, or the time is up
            pass
        self.close_request(request)
