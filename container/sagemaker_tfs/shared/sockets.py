"""What the app's HTTP client and the gunicorn worker both do with a socket: send an HTTP message, set a timeout; and
the address the stack's own ports listen on."""

from __future__ import annotations

import socket
import struct
from typing import Any

HOST = "127.0.0.1"  # every port but the one SageMaker calls listens on loopback only


def timeval(seconds: float) -> bytes:
    """A socket timeout as SO_RCVTIMEO and SO_SNDTIMEO take it (struct timeval)."""
    whole = int(seconds)
    return struct.pack("ll", whole, int((seconds - whole) * 1e6))


def send(sock: socket.socket, head: bytes, body: Any) -> None:
    """An HTTP message's head and body: one segment when the body is small, else the body as it is, not copied."""
    if len(body) <= 65536:
        sock.sendall(head + body)
    else:
        sock.sendall(head)
        sock.sendall(body)
