"""What the default handler's harnesses (default_*.py) share: the reference readings of a body, built on Python's
json with exact numbers, and the comparison of the values ours and the reference give."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from sagemaker_tfs.errors import HandlerError

BOM = b"\xef\xbb\xbf"
TOO_DEEP = "the request body's JSON nests arrays and objects too deeply to be read"
EMPTY = "the request body is empty"
# json's nesting limit is the recursion limit (1000) less the stack in use, and ours reads from a little deeper in
# the stack than the reference: near the limit ours may refuse as too deep what the reference reads, or refuses
# for another reason
NEAR_THE_LIMIT = 900


def nests_deeply(text: str) -> bool:
    """Whether the text may nest near json's limit (more opening brackets than that)."""
    return text.count("[") + text.count("{") >= NEAR_THE_LIMIT


def refused_json(ours: bytes | HandlerError, text: str, *texts: str) -> None:
    """`refused` (400) for a JSON text, where a text nesting near the limit may also be too deep for ours."""
    refused(ours, 400, *texts, *((TOO_DEEP,) if nests_deeply(text) else ()))


def too_deep(ours: bytes | HandlerError, values: list[Any]) -> bool:
    """Whether ours refused as too deep values that nest near json's limit (which the reference read)."""
    return isinstance(ours, HandlerError) and ours.message == TOO_DEEP and max(map(depth, values)) >= NEAR_THE_LIMIT


def outcome(call: Callable[[], bytes]) -> bytes | HandlerError:
    """What the handler gave: its request body, or its documented error (anything else escapes: a finding)."""
    try:
        return call()
    except HandlerError as exc:
        return exc


def refused(ours: bytes | HandlerError, status: int, *texts: str) -> None:
    """Ours must have refused with `status` and a message holding one of `texts` (any message when none)."""
    assert isinstance(ours, HandlerError), f"accepted what the reference refuses ({texts}): {ours[:300]!r}"
    assert ours.status == status, (ours.status, ours.message)
    assert ours.message, "a refusal without a message"
    assert not texts or any(text in ours.message for text in texts), (ours.message, texts)


def accepted(ours: bytes | HandlerError) -> bytes:
    assert not isinstance(ours, HandlerError), f"refused what the reference reads: {ours!r}"
    return ours


def text_of(data: bytes, ours: bytes | HandlerError) -> str | None:
    """The body's text (UTF-8, a BOM dropped); None when it has none, after checking ours refused it so."""
    body = data[len(BOM) :] if data.startswith(BOM) else data
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        refused(ours, 400, "not UTF-8")
        return None
    if not text.strip():
        refused(ours, 400, EMPTY)
        return None
    return text


def loads(text: str) -> Any:
    """The JSON value with exact numbers (Decimal: every digit, no int-length limit); NaN and ±Infinity as floats,
    which both Python's json and TensorFlow Serving (rapidjson) read."""
    return json.loads(text, parse_float=exact, parse_int=exact)


def exact(number: str) -> Decimal | float:
    """The number as a Decimal; a float (0 or infinite) when its exponent is beyond what a Decimal holds."""
    try:
        return Decimal(number)
    except InvalidOperation:
        return float(number)


def loads_request(body: bytes) -> Any:
    """The JSON value of ours' request body: it wraps the client's values in two more levels than the reference read,
    so it gets that much more room to nest."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(limit + 50)
    try:
        return loads(body.decode("utf-8"))
    finally:
        sys.setrecursionlimit(limit)


def instances(body: bytes) -> Any:
    request = loads_request(body)
    assert isinstance(request, dict) and list(request) == ["instances"], body[:300]
    return request["instances"]


def json_lines(text: str) -> list[Any] | int:
    """The values of a JSON lines text (lines end at LF; a line of JSON whitespace only is blank), or the number of
    the first line that is not one JSON value. RecursionError as json raises it."""
    values = []
    for number, line in enumerate(text.split("\n"), 1):
        if line.strip(" \t\r"):
            try:
                values.append(loads(line))
            except json.JSONDecodeError:
                return number
    return values


def depth(value: Any) -> int:
    """How deeply lists and objects nest in `value` (a scalar: 0)."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if isinstance(item, list):
            stack.extend((child, level + 1) for child in item)
        elif isinstance(item, dict):
            stack.extend((child, level + 1) for child in item.values())
    return deepest


def _number(value: Any) -> bool:
    return isinstance(value, (int, float, Decimal)) and not isinstance(value, bool)


def _nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def same(left: Any, right: Any) -> bool:
    """Equal values: lists (or numpy's record tuples) item by item, objects key by key, NaN equal to NaN, booleans
    and null only equal to themselves; a float and an exact (Decimal) number compare as floats (the float's digits
    are its shortest repr). Iterative: the values may nest deeper than Python recurses."""
    stack = [(left, right)]
    while stack:
        a, b = stack.pop()
        if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
            if len(a) != len(b):
                return False
            stack.extend(zip(a, b, strict=True))
        elif isinstance(a, dict) and isinstance(b, dict):
            if a.keys() != b.keys():
                return False
            stack.extend((a[key], b[key]) for key in a)
        elif _number(a) and _number(b):
            if isinstance(a, float) != isinstance(b, float):
                a, b = float(a), float(b)
            if not (a == b or (_nan(a) and _nan(b))):
                return False
        elif type(a) is not type(b) or a != b:
            return False
    return True
