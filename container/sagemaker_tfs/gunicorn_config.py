"""gunicorn's settings module (`gunicorn -c python:sagemaker_tfs.gunicorn_config`, from serve).

Requests gunicorn refuses itself, before the app sees them (two Content-Type headers, more header fields than
its limit, a malformed chunk...), are answered by gunicorn.util.write_error, which writes HTML. Every error of
the stack is JSON `{"error": "..."}`: the `on_starting` hook replaces that writer in the master process, before
any worker is forked, so that every worker class (sync, gthread, gevent) writes JSON, with gunicorn's status
and message.
"""

from __future__ import annotations

import json
import socket

from gunicorn import util


def write_json_error(sock: socket.socket, status_int: int, reason: str, mesg: str) -> None:
    """gunicorn.util.write_error's contract, with a JSON body."""
    body = json.dumps({"error": f"{reason}: {mesg}" if mesg else reason}).encode()
    head = (f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n")
    util.write_nonblock(sock, head.encode("latin-1") + body)


def on_starting(server) -> None:  # a gunicorn server hook: runs in the master before the workers start
    util.write_error = write_json_error
