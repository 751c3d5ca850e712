"""What the client gets: a handler's return value, or an error, as an Answer (status, body, content type), or a
Reply when it has headers of its own. web/app.py sends either; its headers always name the content type."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from .. import codecs
from ..shared import json_bodies
from ..shared.media_types import JSON

Answer = tuple[int, bytes, str]  # status, body, content type
Headers = Sequence[tuple[str, str]]  # (name, value) pairs, in the order they are sent


class Reply(NamedTuple):
    """An answer with headers of its own, sent after the content type (one named Content-Type replaces it; the
    Content-Length is always the body's)."""

    status: int
    body: bytes
    content_type: str
    headers: Headers


class AnsweringError(Exception):
    """An error that gives its own answer, in a form of its own (the runtime API's, as SageMaker Runtime answers):
    the app's error mapping (web/app.error_answer) asks it, and it logs what it must."""

    def answer(self, rid: str, method: str, path: str) -> Answer | Reply:
        raise NotImplementedError


class BadReturnValue(TypeError):
    """A handler returned something that cannot be sent; the message says what it returned."""


def error(status: int, message: Any) -> Answer:
    """The JSON error answer {"error": message}."""
    return status, json_bodies.error(message), JSON


def from_return_value(result: Any, accept: str, who: str) -> Answer:
    """The answer for what `who` (handler or output_handler) returned:
      (body, content_type)            200; content type None means application/json
      (body, content_type, status)    that status
      body                            200; str/bytes with the Accept header's preferred concrete type (else
                                      application/json), dict/list as JSON
    A body is bytes, str (sent as UTF-8), or a dict or list (sent as JSON). Anything else is BadReturnValue."""
    if isinstance(result, tuple):
        if len(result) == 2:
            body, content_type = result
            status = 200
        elif len(result) == 3:
            body, content_type, status = result
        else:
            raise BadReturnValue(
                f"{who} returned a tuple of {len(result)} items {_preview(result)}: return "
                "(body, content_type) or (body, content_type, status)"
            )
        if content_type is None:
            content_type = JSON
        elif not isinstance(content_type, str) or not content_type or "\n" in content_type or "\r" in content_type:
            raise BadReturnValue(
                f"{who} returned {_preview(result)}: the content type must be a string such as "
                f"'application/json' or None, not {_preview(content_type)}"
            )
        if isinstance(status, bool) or not isinstance(status, int) or not 200 <= status <= 599:
            # 1xx are interim answers: sent as final ones, nginx would wait for the real one (60 s)
            raise BadReturnValue(
                f"{who} returned {_preview(result)}: the status must be an integer from 200 "
                f"to 599, not {_preview(status)}"
            )
    else:
        body, status = result, 200
        text = isinstance(body, (str, bytes, bytearray, memoryview))
        content_type = (codecs.preferred_type(accept) or JSON) if text else JSON
    return int(status), _body(body, result, who), content_type


def _body(body: Any, result: Any, who: str) -> bytes:
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode()
    if isinstance(body, (bytearray, memoryview)):
        return bytes(body)
    if isinstance(body, (dict, list)):
        try:
            return json_bodies.encode(body)
        except (TypeError, ValueError) as exc:
            raise BadReturnValue(f"{who} returned {_preview(result)}, which cannot be sent as JSON: {exc}") from None
    if result is body:
        raise BadReturnValue(
            f"{who} returned {_preview(result)}, which cannot be sent: return (body, "
            "content_type), (body, content_type, status) or a body (str, bytes, dict or list)"
        )
    raise BadReturnValue(
        f"{who} returned {_preview(result)}: the body must be str, bytes, dict or list, not {type(body).__name__}"
    )


def _preview(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 100 else text[:97] + "..."
