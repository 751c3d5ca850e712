"""gunicorn's own worker classes, chosen by name (`SAGEMAKER_GUNICORN_WORKER_CLASS=sync`, `gthread`; `gevent` in
gevent_worker.py), with the stack's JSON body for the requests gunicorn refuses itself.

gunicorn answers a request it refuses before the app (two Content-Type headers, more header fields than its limit,
a malformed chunk...) and an app that fails in `Worker.handle_error`, with an HTML page. Every error of the stack is
JSON (refusals.py): `JsonRefusals.handle_error` lets gunicorn's handle_error decide and log as it does, writing its
page to one end of a socket pair, and answers the client with gunicorn's status, reason and message as JSON.
"""

from __future__ import annotations

import html
import socket
from functools import partial
from typing import Any

from gunicorn import util
from gunicorn.workers import base, gthread, sync

from ..shared.headers import REQUEST_ID_HEADER, environ_key
from ..web.request import request_id
from .refusals import closing_error

_FAILED = (500, "Internal Server Error", "")  # gunicorn wrote nothing readable: what it answers an app's failure
_REQUEST_ID_KEY = environ_key(REQUEST_ID_HEADER)


class JsonRefusals(base.Worker):
    """A gunicorn worker class whose error answers are the stack's JSON (put before gunicorn's class in the bases)."""

    def handle_error(self, req: Any, client: socket.socket, addr: Any, exc: BaseException) -> None:
        ours, theirs = socket.socketpair()
        with ours:
            with theirs:
                super().handle_error(req, theirs, addr, exc)
            page = b"".join(iter(partial(ours.recv, 65536), b""))  # (closed: read to its end)
        try:
            util.write_nonblock(client, closing_error(*gunicorn_refusal(page), _request_id(req)))
        except Exception:  # noqa: BLE001 (the client went away: as gunicorn's handle_error, a debug line)
            self.log.debug("Failed to send error message.")


def _request_id(req: Any) -> str:
    """The refused request's id as the app would answer it (gunicorn's parser gives no request when the head is
    what it refuses: then a new id)."""
    sent = [value for name, value in getattr(req, "headers", None) or () if name == "X-AMZN-REQUESTID"]
    return request_id({_REQUEST_ID_KEY: sent[0]} if len(sent) == 1 else {})


def gunicorn_refusal(page: bytes) -> tuple[int, str, str]:
    """(status, reason, message) of the error answer gunicorn wrote: its status line, and the message that its HTML
    page has, escaped, after the heading (gunicorn.util.write_error)."""
    head, _, body = page.decode("latin-1").partition("\r\n\r\n")  # (gunicorn encodes it in latin-1)
    status_line = head.partition("\r\n")[0].split(" ", 2)
    if len(status_line) < 3 or not status_line[1].isdigit():
        return _FAILED
    _, heading, after = body.partition("</h1>")
    return int(status_line[1]), status_line[2], html.unescape(after.partition("</body>")[0].strip()) if heading else ""


class SyncWorker(JsonRefusals, sync.SyncWorker):
    """gunicorn's `sync`, with JSON error bodies."""


class ThreadWorker(JsonRefusals, gthread.ThreadWorker):
    """gunicorn's `gthread`, with JSON error bodies."""
