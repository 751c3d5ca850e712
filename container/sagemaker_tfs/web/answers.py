"""What the client gets: a handler's return value, or an error, as an Answer (status, body, content type), or a
Reply when it has headers of its own. web/app.py sends either; its headers always name the content type.

A body is bytes, or the parts of an answer sent as they are made (an iterator of bytes): a script that returns an
iterator or a generator of bytes or str (alone, or as a tuple's first item) streams its answer. Its first part is
taken here, so that what the script raises before it is the request's ordinary error answer."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

from .. import codecs
from ..shared import json_bodies
from ..shared.media_types import JSON
from ..shared.wsgi_call import close

Answer = tuple[int, "bytes | Iterator[bytes]", str]  # status, body (whole, or its parts as made), content type
Step = Callable[[Iterator[Any]], Any]  # the next item of a script's iterator, END after its last
Headers = Sequence[tuple[str, str]]  # (name, value) pairs, in the order they are sent


class Reply(NamedTuple):
    """An answer with headers of its own, sent after the content type (one named Content-Type replaces it; the
    Content-Length is always the body's, none for parts)."""

    status: int
    body: bytes | Iterator[bytes]
    content_type: str
    headers: Headers


class AnsweringError(Exception):
    """An error that gives its own answer, in a form of its own (the runtime API's, as SageMaker Runtime answers):
    the app's error mapping (web/app.error_answer) asks it, and it logs what it must."""

    def answer(self, rid: str, method: str, path: str) -> Answer | Reply:
        raise NotImplementedError


class BadReturnValue(TypeError):
    """A handler returned something that cannot be sent; the message says what it returned."""


END = object()  # a Step's value after an iterator's last item


def next_item(parts: Iterator[Any]) -> Any:
    return next(parts, END)


def error(status: int, message: Any) -> tuple[int, bytes, str]:
    """The JSON error answer {"error": message}."""
    return status, json_bodies.error(message), JSON


def from_return_value(result: Any, accept: str, who: str, step: Step = next_item) -> Answer:
    """The answer for what `who` (handler or output_handler) returned:
      (body, content_type)            200; content type None means application/json
      (body, content_type, status)    that status
      body                            200; str/bytes with the Accept header's preferred concrete type (else
                                      application/json), dict/list as JSON
    A body is bytes, str (sent as UTF-8), a dict or list (sent as JSON), or an iterator of bytes or str, whose
    items `step` takes (the script's code runs then) and which is sent part by part. Anything else is
    BadReturnValue."""
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
        text = isinstance(body, (str, bytes, bytearray, memoryview, Iterator))
        content_type = (codecs.preferred_type(accept) or JSON) if text else JSON
    if isinstance(body, Iterator):  # (str, bytes and the like are iterables, not iterators)
        try:
            first = step(body)
            if first is not END:
                first = _part(first, who)
        except BaseException:
            close(body)
            raise
        return int(status), _parts(first, body, who, step), content_type
    return int(status), _body(body, result, who), content_type


def _parts(first: Any, rest: Iterator[Any], who: str, step: Step) -> Iterator[bytes]:
    """A script's parts as bytes, the first already taken and converted; its iterator closed at the end, or when
    the client goes away (a generator's `finally` runs then)."""
    try:
        if first is END:
            return
        yield first
        while (item := step(rest)) is not END:
            yield _part(item, who)
    finally:
        close(rest)


def _bytes(value: Any) -> bytes | None:
    """bytes, str (as UTF-8), a bytearray or a memoryview as bytes; None for anything else."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return None


def _part(item: Any, who: str) -> bytes:
    data = _bytes(item)
    if data is None:
        raise BadReturnValue(f"{who}'s iterator gave {_preview(item)}: each part must be bytes or str")
    return data


def _body(body: Any, result: Any, who: str) -> bytes:
    data = _bytes(body)
    if data is not None:
        return data
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
