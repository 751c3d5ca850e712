"""The TFS JSON writer (shared/tfs_json_text.py): what it writes is valid JSON that reads back as what was written.

The first byte picks a writer; the rest is its input, read with np.frombuffer (floats) or decoded (strings, JSON
values). Float texts must be TFS's (printf `%g`, else `%.9g` for float32 or `%.17g` for double when `%g` does not
read back, `.0` after an integral text; NaN, Infinity, -Infinity), checked against that rule written here element
by element, and read back with json.loads to the same float32/float64 (NaN as NaN). rapidjson_double must read back
to the same double in as many digits as repr's shortest; string() to the same text, with no raw control character;
debug() of a parsed JSON value is at most `limit` characters, the start of the whole text, which (when it fits)
json.loads reads back as the value.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable

import numpy as np
from sagemaker_tfs.shared import tfs_json_text

MODULES = ("sagemaker_tfs.shared.tfs_json_text",)
MAX_LEN = 512

_NON_FINITE = {math.inf: "Infinity", -math.inf: "-Infinity"}
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")


def _tfs_text(value: float, double: bool) -> str:
    """The rule, from TFS's json_tensor.cc as the module describes it."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return _NON_FINITE[value]
    text = f"{value:g}"  # printf's %g
    back = float(text) if double else float(np.float32(float(text)))
    if back != value:
        text = f"{value:.17g}" if double else f"{value:.9g}"
    return text if "." in text or "e" in text else text + ".0"


def _reads_back(texts: list[str], values: np.ndarray) -> None:
    """The texts, as one JSON array, read back as the values (to the bit but NaN's payload and sign)."""
    back = np.array(json.loads("[" + ",".join(texts) + "]"), np.float64).astype(values.dtype)
    assert back.shape == values.shape, (texts, values)
    nan = np.isnan(values)
    assert np.array_equal(np.isnan(back), nan), (texts, values)
    assert back[~nan].tobytes() == values[~nan].tobytes(), (texts, values)
    for text in texts:
        assert text in ("NaN", "Infinity", "-Infinity") or _NUMBER.fullmatch(text), text


def _float_texts(data: bytes, dtype: type) -> None:
    size = np.dtype(dtype).itemsize
    values: np.ndarray = np.frombuffer(data[: len(data) // size * size], dtype)
    texts = tfs_json_text.float_texts(values)
    double = dtype is np.float64
    assert texts == [_tfs_text(v, double) for v in values.astype(np.float64).tolist()], values
    _reads_back(texts, values.astype(np.float64 if double else np.float32))


_SEPARATORS = [b", ", b"],\n[", b"\n"]


def _float32_json(data: bytes) -> None:
    """The vectorised writer at any size, in blocks of the usual 16384 elements or a few (data[0] picks), each text
    followed by the separator data[1] picks for it."""
    if len(data) < 2:
        return
    values = np.frombuffer(data[2 : 2 + (len(data) - 2) // 4 * 4], np.float32)
    which = (np.arange(values.size) * data[1] // 7) % len(_SEPARATORS)
    kept = tfs_json_text._BLOCK  # noqa: SLF001 (the block size, which the unit tests vary too)
    tfs_json_text._BLOCK = (kept, kept, kept, 29)[data[0] % 4]  # noqa: SLF001
    try:
        pieces = tfs_json_text.float32_json(values, _SEPARATORS, which)
    finally:
        tfs_json_text._BLOCK = kept  # noqa: SLF001
    texts = [_tfs_text(v, False) for v in values.astype(np.float64).tolist()]
    expected = b"".join(t.encode() + _SEPARATORS[w] for t, w in zip(texts, which.tolist(), strict=True))
    assert b"".join(pieces) == expected, (values, which)
    _reads_back(texts, values)


def _rapidjson_double(data: bytes) -> None:
    for value in np.frombuffer(data[: len(data) // 8 * 8], np.float64).tolist():
        text = tfs_json_text.rapidjson_double(value)
        if math.isnan(value) or math.isinf(value):
            assert text == ("NaN" if math.isnan(value) else _NON_FINITE[value]), (value, text)
            continue
        assert _NUMBER.fullmatch(text) and ("." in text or "e" in text), (value, text)
        back = json.loads(text)
        assert isinstance(back, float) and back == value and math.copysign(1, back) == math.copysign(1, value), text
        mantissa = text.lstrip("-").split("e")[0].replace(".", "").strip("0") or "0"
        shortest = repr(abs(value)).split("e")[0].replace(".", "").strip("0") or "0"
        assert len(mantissa) == len(shortest), (value, text)


def _string(data: bytes) -> None:
    text = data.decode("utf-8", "replace")
    literal = tfs_json_text.string(text)
    assert json.loads(literal) == text, (text, literal)
    assert not any(c < " " for c in literal), literal
    assert all(c in literal for c in text if c > "\x7f"), literal  # non-ASCII written raw


def _same_json(actual: object, expected: object) -> bool:
    """JSON values equal, NaN equal to NaN and -0.0 told from 0.0 (json.loads reads `-0` as the int 0)."""
    if isinstance(expected, float) and isinstance(actual, float):
        return (math.isnan(actual) and math.isnan(expected)) or repr(actual) == repr(expected)
    if isinstance(expected, list) and isinstance(actual, list):
        return len(actual) == len(expected) and all(map(_same_json, actual, expected))
    if isinstance(expected, dict) and isinstance(actual, dict):
        return list(actual) == list(expected) and all(map(_same_json, actual.values(), expected.values()))
    return type(actual) is type(expected) and actual == expected


def _debug(data: bytes) -> None:
    """data[0] picks the limit (the default, or 1 to 255); the rest is a JSON value as json.loads reads it."""
    if not data:
        return
    try:
        value = json.loads(data[1:].decode("utf-8"), object_pairs_hook=dict)
    except (ValueError, RecursionError):
        return
    limit = data[0] or tfs_json_text.DEBUG_LIMIT
    text = tfs_json_text.debug(value, limit)
    whole = tfs_json_text.debug(value, 1 << 30)  # (a JSON value of MAX_LEN bytes is written in much less)
    assert len(text) <= limit and whole.startswith(text), (text, whole)
    if len(whole) < limit:
        assert text == whole and _same_json(json.loads(whole), value), (value, text)


_WRITERS: list[Callable[[bytes], None]] = [
    lambda data: _float_texts(data, np.float32),
    lambda data: _float_texts(data, np.float64),
    _float32_json,
    _rapidjson_double,
    _string,
    _debug,
]


def one_input(data: bytes) -> None:
    if data:
        with np.errstate(invalid="ignore"):  # signalling NaNs, made quiet by a cast
            _WRITERS[data[0] % len(_WRITERS)](data[1:])


def seeds() -> list[bytes]:
    """The special values of the tests (test/model_server/test_model_server_units.py's FLOAT32 cases) and texts."""
    info = np.finfo(np.float32)
    special = [0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, info.max, -info.max, info.tiny, info.smallest_subnormal]
    special += [1e-5, 9e6, 1e5, 999999.5, 9999999, 123456789, 1e9, 2**24 + 1, 1 + 2.0**-23, 0.1, 1 / 3, 1e-310]
    tens = np.array([10.0**k for k in range(-45, 39)], np.float32)
    float32 = np.array(special, np.float32).tobytes()
    near = np.concatenate([tens, np.nextafter(tens, np.float32(0)), np.nextafter(tens, np.float32(np.inf))]).tobytes()
    double = np.array([*special, 1e300, 5e-324, 1e21, 1e-7, 1000.0, 0.1 + 0.2], np.float64).tobytes()
    texts = ['{"a": [1, 2.5, "x\\n\\u0001"], "b": {"c": null, "d": true}}', "[NaN, -Infinity, 1e308, -0.0]", '"é\\""']
    return [
        b"\x00" + float32,
        b"\x00" + near[:60],
        b"\x01" + double,
        b"\x02\x00\x03" + float32 + near[:300],
        b"\x02\x03\x01" + near[-200:],
        b"\x03" + double,
        b"\x04" + 'a"\\\x00\x1f\x7fé€'.encode(),
        *(b"\x05\x00" + text.encode() for text in texts),
        b"\x05\x10" + texts[0].encode(),
    ]
