"""The request body as handlers read it."""

from __future__ import annotations

from typing import Protocol

from falcon.stream import BoundedStream


class Body(Protocol):
    """What a handler reads the request body from."""

    def read(self, size: int = -1, /) -> bytes: ...


def body_stream(env: dict) -> Body:
    """The stream handlers read the body from. A server that sets wsgi.input_terminated (ours, gunicorn's) ends
    its stream with the body, so it is given as it is; otherwise one whose reads stop at Content-Length (falcon's
    BoundedStream, as its req.bounded_stream)."""
    stream = env["wsgi.input"]
    if env.get("wsgi.input_terminated"):
        return stream
    length = env.get("CONTENT_LENGTH")
    return BoundedStream(stream, int(length) if length and length.isdigit() else 0)
