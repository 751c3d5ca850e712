"""What the app's HTTP client and the gunicorn workers all do with a socket: send an HTTP message (blocking, or
through the loop worker's hub: cooperative.Hub.send_all), set a timeout; and the address the stack's own ports
listen on."""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path
from typing import Any

from . import runtime_dir

HOST = "127.0.0.1"  # every port but the one SageMaker calls listens on loopback only


def timeval(seconds: float) -> bytes:
    """A socket timeout as SO_RCVTIMEO and SO_SNDTIMEO take it (struct timeval)."""
    whole = int(seconds)
    return struct.pack("ll", whole, int((seconds - whole) * 1e6))


def message_parts(head: bytes, body: Any) -> tuple:
    """What to write of an HTTP message: one segment when the body is small, else the body as it is, not copied."""
    return (head + body,) if len(body) <= 65536 else (head, body)


def send(sock: socket.socket, head: bytes, body: Any) -> None:
    """An HTTP message's head and body, on a blocking socket."""
    for part in message_parts(head, body):
        sock.sendall(part)


def unix_listener(path: Path, backlog: int) -> socket.socket:
    """A UNIX socket listening at `path` (whatever was there removed), which nginx's workers may connect to: they run
    as another user when serve is root (stack/nginx.py), in a runtime folder that only they and we may enter."""
    runtime_dir.remove(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    os.chmod(path, 0o666)
    listener.listen(backlog)
    return listener
