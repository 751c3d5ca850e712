"""What the client gets: a handler's return value, or an error, as (status, body, content type)."""

from __future__ import annotations

from typing import Any

from .. import codecs
from ..shared import json_bodies
from ..shared.media_types import JSON

Answer = tuple[int, bytes, str]  # status, body, content type


class DirectResource:
    """A resource whose POST is answered from the WSGI environ alone: `answer(env, request_id, timings, **params)`
    gives (status, body, content type), or raises as a falcon responder would. The app calls it without falcon's
    request and response objects (app/routes.App); `on_post` is the same answer in falcon's form (falcon's method
    map needs it, for the Allow header of a 405)."""

    def answer(self, env: dict, rid: str, timings: Any, **params: str) -> Answer:
        raise NotImplementedError

    def on_post(self, req: Any, resp: Any, **params: str) -> None:
        resp.status, resp.data, resp.content_type = self.answer(
            req.env, req.context.request_id, req.context.get("timings"), **params
        )


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
