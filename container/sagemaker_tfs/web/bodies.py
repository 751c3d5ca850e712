"""The request body as handlers read it."""

from __future__ import annotations

from typing import Any

import falcon


def body_stream(req: falcon.Request, env: dict) -> Any:
    """The stream handlers read the body from. A server that sets wsgi.input_terminated (ours, gunicorn's) ends
    its stream with the body, so it is given as it is; otherwise req.bounded_stream, whose reads stop at
    Content-Length."""
    return req.stream if env.get("wsgi.input_terminated") else req.bounded_stream
