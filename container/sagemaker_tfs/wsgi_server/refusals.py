"""The answer to a request refused before the app sees it (by our worker class or by gunicorn's own parser): JSON,
as every error of the stack, with gunicorn's status and message."""

from __future__ import annotations

from ..shared import json_bodies
from ..shared.headers import REQUEST_ID_HEADER
from ..shared.media_types import JSON


def closing_error(status: int, reason: str, message: str, request_id: str | None = None) -> bytes:
    """A whole HTTP/1.1 error answer that closes the connection: {"error": "<reason>: <message>"}, or the reason
    alone; with the request's id (web/request.request_id) first, as every answer of the app has it."""
    # UTF-8, not ASCII-escaped, as every error body of the stack (shared/json_bodies.py says why)
    body = json_bodies.error(f"{reason}: {message}" if message else reason)
    rid = f"{REQUEST_ID_HEADER}: {request_id}\r\n" if request_id else ""
    return (
        f"HTTP/1.1 {status} {reason}\r\n{rid}Connection: close\r\nContent-Type: {JSON}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode("latin-1") + body
