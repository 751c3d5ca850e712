"""The JSON bodies the stack writes itself: every error body (the app's, the management routes', the refusals of
wsgi_server/) and the JSON of a handler's dict or list or of a management route's answer.

One form for all: UTF-8, with non-ASCII characters as they are (ensure_ascii=False). The original container's error
bodies came from falcon's JSON handler, which writes them so, and so does everything a client reads from the app; the
refusals (wsgi_server/refusals.py) used to escape them (`\\u00e9`), the one place that did. For ASCII text the two
forms are the same bytes. (The model servers' own errors keep TensorFlow Serving's layout: shared/
tfs_json_response.py.)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def encode(value: Any) -> bytes:
    """`value` as JSON, UTF-8; TypeError or ValueError when it cannot be."""
    return _ENCODER.encode(value).encode()


# json.dumps(value, ensure_ascii=False), without a new encoder per call (json.dumps makes one for any option)
_ENCODER = json.JSONEncoder(ensure_ascii=False)


def error(message: Any, more: Mapping[str, Any] | None = None) -> bytes:
    """The error body {"error": message}, with `more` members after it."""
    return encode({"error": message, **more} if more else {"error": message})
