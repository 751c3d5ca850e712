"""Calling a WSGI app for one request and taking its answer: whole (InvokeEndpoint calling the worker's own app
in-process, runtime_api/container.py; the testing Endpoint), or, by the app workers' servers
(wsgi_server/http_connection.py), whole when the app gives a list and part by part otherwise (a streamed answer,
web/app.py)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

WsgiApp = Callable[[dict, Callable], Any]

# What the environ of every request of these servers holds alike (PEP 3333's wsgi.* keys; no script name)
CONSTANT_ENVIRON: dict[str, Any] = {
    "SCRIPT_NAME": "",
    "wsgi.version": (1, 0),
    "wsgi.url_scheme": "http",
    "wsgi.errors": sys.stderr,
    "wsgi.multithread": True,
    "wsgi.multiprocess": True,
    "wsgi.run_once": False,
    "wsgi.input_terminated": True,
}


def whole_answer(app: WsgiApp, environ: dict) -> tuple[str, list[tuple[str, str]], bytes]:
    """The app's status line, headers and body (its iterable joined, then closed); what the app raises, raised."""
    status, headers, body = answer(app, environ)
    return status, headers, body if isinstance(body, bytes) else _joined(body)


def answer(app: WsgiApp, environ: dict) -> tuple[str, list[tuple[str, str]], Any]:
    """The app's status line, headers and body: bytes when the app gives a list (its items joined) or starts its
    answer only once iterated, else the app's iterable as it is, for the caller to iterate and close (a streamed
    answer); what the app raises, raised."""
    started: list = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable:
        if exc_info is not None and started:
            raise exc_info[1].with_traceback(exc_info[2])
        started[:] = [status, headers]
        return _no_write

    result = app(environ, start_response)
    if isinstance(result, list):
        body: Any = result[0] if len(result) == 1 else b"".join(result)
    elif not started:
        body = _joined(result)
    else:
        body = result
    status, headers = started
    return status, headers, body


def _joined(result: Any) -> bytes:
    """An app's iterable joined, then closed."""
    try:
        return b"".join(result)
    finally:
        close(result)


def close(iterable: Any) -> None:
    """Close an iterable that has a close() (PEP 3333's rule for an app's answer; a generator runs its `finally`
    then, once started)."""
    method = getattr(iterable, "close", None)
    if method is not None:
        method()


def _no_write(data: bytes) -> None:
    raise NotImplementedError("this server does not support the WSGI write() callable")
