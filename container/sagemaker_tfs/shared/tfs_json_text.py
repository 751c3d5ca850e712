"""How TFS writes JSON text (rapidjson's PrettyWriter): numbers, strings, and values quoted in error messages.

TFS formats tensor floats with printf `%g` (6 significant digits), or `%.9g` (`%.17g` for doubles) when `%g`
does not round-trip, then appends `.0` to integral-looking texts; NaN and infinities are the bare tokens
`NaN`, `Infinity`, `-Infinity`. Values of the request quoted in error messages (`JSON Value: ...`) are written
by rapidjson: arrays on one line, objects over several lines with 4-space indents, cut after 256 characters.
"""

from __future__ import annotations

import decimal
import json
import math
import re
import struct

import numpy as np

DEBUG_LIMIT = 256
_NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def float_texts(values: np.ndarray) -> list[str]:
    """TFS's text of every float in an array (any shape, read in C order)."""
    flat = np.ascontiguousarray(values).reshape(-1)
    is_double = flat.dtype == np.float64
    if not is_double and flat.dtype != np.float32:
        flat = flat.astype(np.float32)
    numbers = flat.tolist()
    if len(numbers) <= SMALL:
        return [_float_text(v, is_double) for v in numbers]
    texts = ["%g" % v for v in numbers]
    if not texts:
        return texts
    # Vectorised round-trip check: which `%g` texts do not read back as the same value? (No overflow: `%g` of a
    # finite float32 never exceeds FLT_MAX, and inf/nan texts read back as themselves.)
    back = np.array(texts, dtype=np.float64)
    if not is_double:
        back = back.astype(np.float32)
    finite = np.isfinite(flat)
    precise = "%.17g" if is_double else "%.9g"
    for i in np.flatnonzero((back != flat) & finite).tolist():
        texts[i] = precise % numbers[i]
    for i in np.flatnonzero(~finite).tolist():
        texts[i] = _NON_FINITE[texts[i]]
    return [t if ("." in t or "e" in t or not finite_t) else t + ".0"
            for t, finite_t in zip(texts, finite.tolist())]


# Up to this many values, a loop in Python is faster than the vectorised path's fixed cost of numpy calls.
SMALL = 16
_FLOAT32 = struct.Struct("f")


def _float_text(value: float, is_double: bool) -> str:
    """The text of one value (a Python float holding a float32 unless is_double): the rule of _float_texts."""
    text = "%g" % value
    if value - value != 0:  # NaN and infinities
        return _NON_FINITE[text]
    back = float(text) if is_double else _FLOAT32.unpack(_FLOAT32.pack(float(text)))[0]
    if back != value:
        text = ("%.17g" if is_double else "%.9g") % value
    return text if ("." in text or "e" in text) else text + ".0"


def float_text(value: float, is_double: bool = False) -> str:
    """TFS's text of one float (a float32 unless is_double)."""
    return float_texts(np.array([value], dtype=np.float64 if is_double else np.float32))[0]


_ESCAPES = {i: "\\u%04X" % i for i in range(0x20)}
_ESCAPES.update({ord('"'): '\\"', ord("\\"): "\\\\", 8: "\\b", 9: "\\t", 10: "\\n", 12: "\\f", 13: "\\r"})
_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f]')


def string(text: str) -> str:
    """A JSON string literal as rapidjson writes it (non-ASCII raw, control characters `\\u00XX`)."""
    if _NEEDS_ESCAPE.search(text) is None:
        return '"' + text + '"'
    return '"' + text.translate(_ESCAPES) + '"'


def rapidjson_double(value: float) -> str:
    """rapidjson's Writer::Double: shortest round-trip digits, `1000.0`, `1e21`, `1.5e-7`, NaN/Infinity."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    # shortest round-trip digits: value = digits * 10^exponent
    _, digit_tuple, exponent = decimal.Decimal(repr(abs(value))).normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    kk = len(digits) + exponent  # rapidjson's Prettify: 10^(kk-1) <= value < 10^kk
    length = len(digits)
    if length <= kk <= 21:
        text = digits + "0" * (kk - length) + ".0"
    elif 0 < kk <= 21:
        text = digits[:kk] + "." + digits[kk:]
    elif -6 < kk <= 0:
        text = "0." + "0" * -kk + digits
    elif length == 1:
        text = digits + "e" + str(kk - 1)
    else:
        text = digits[0] + "." + digits[1:] + "e" + str(kk - 1)
    return sign + text


class _Limited(Exception):
    pass


def debug(value: object, limit: int = DEBUG_LIMIT) -> str:
    """A parsed JSON value as TFS quotes it in error messages (rapidjson PrettyWriter, one-line arrays)."""
    parts: list[str] = []
    size = 0

    def put(text: str) -> None:
        nonlocal size
        parts.append(text)
        size += len(text)
        if size >= limit:
            raise _Limited

    def write(node: object, depth: int) -> None:
        if isinstance(node, dict):
            if not node:
                put("{}")
                return
            put("{")
            for i, (key, item) in enumerate(node.items()):
                put(("," if i else "") + "\n" + "    " * (depth + 1) + string(str(key)) + ": ")
                write(item, depth + 1)
            put("\n" + "    " * depth + "}")
        elif isinstance(node, list):
            put("[")
            for i, item in enumerate(node):
                if i:
                    put(", ")
                write(item, depth + 1)
            put("]")
        else:
            put(scalar(node))

    try:
        write(value, 0)
    except _Limited:
        pass
    return "".join(parts)[:limit]


def scalar(value: object) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return rapidjson_double(value)
    if isinstance(value, str):
        return string(value)
    return json.dumps(value)


def type_name(value: object) -> str:
    """rapidjson's name of a value's type: Null, False, True, Object, Array, String, Number."""
    if value is None:
        return "Null"
    if value is True:
        return "True"
    if value is False:
        return "False"
    if isinstance(value, dict):
        return "Object"
    if isinstance(value, list):
        return "Array"
    if isinstance(value, str):
        return "String"
    return "Number"
