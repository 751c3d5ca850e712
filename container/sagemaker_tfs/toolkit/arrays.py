"""The toolkit contract's default `input_fn` and `output_fn`: request bodies to numpy arrays and predictions to
bodies, for JSON, CSV, NPY and JSON lines. Scripts may import it; `sagemaker_inference.decoder` and `.encoder`
are this module.

    decode(body, content_type)       JSON array -> numpy array; JSON object -> the dict; a JSON number or
                                     string -> a 0-d array; CSV rows of numbers -> int64 (all integers) or
                                     float64, 1-D for one row or one column, else 2-D; NPY -> the array,
                                     never unpickled; JSON lines -> numpy.asarray of the values.
    encode(prediction, content_type) JSON (numpy through .tolist()); CSV one line per row (1-D: one value per
                                     line), every line ending in a newline; NPY; JSON lines, one value per
                                     first-axis item, without a trailing newline (Batch Transform adds them).
    default_output(prediction, accept) -> (body, the type chosen from accept)

Media types are compared without parameters and case. Bad input is a HandlerError 400 naming the problem;
a type neither side handles is UnsupportedFormatError (415 for a request, 406 for an Accept value).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from .. import codecs
from ..errors import HandlerError
from ..shared import media_types, npy
from ..shared.media_types import JSON, Format
from ..shared.text_records import csv_line, csv_rows, json_lines, lines, not_one_value
from .errors import UnsupportedFormatError
from .plain import json_default

TYPES = media_types.names(*media_types.TOOLKIT_FORMATS)  # with the JSON lines aliases; JSON first for `*/*`


# ---- decoding ----


def decode(body: Any, content_type: str | None) -> Any:
    """The default input_fn: the request `body` (str or bytes) of `content_type` as numpy data."""
    kind = media_types.format_of(content_type or JSON)
    if kind not in media_types.TOOLKIT_FORMATS:
        raise UnsupportedFormatError(content_type, 415)
    if not body:
        raise HandlerError(400, "empty request body")
    if kind is Format.NPY:
        return npy.load(body.encode() if isinstance(body, str) else body)
    text = body if isinstance(body, str) else _utf8(body)
    if not text.strip():
        raise HandlerError(400, "empty request body")
    if kind is Format.JSON:
        return _json(text)
    if kind is Format.CSV:
        return _csv(text)
    return _json_lines(text)


def _utf8(body: bytes | bytearray | memoryview) -> str:
    try:
        return bytes(body).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HandlerError(400, f"the request body is not UTF-8 text: invalid byte at position {exc.start}") from None


def _array(values: list, what: str) -> np.ndarray:
    try:
        return np.asarray(values)
    except ValueError as exc:  # ragged nesting
        raise HandlerError(400, f"{what} cannot be an array: {exc}") from None


def _json(text: str) -> Any:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HandlerError(400, f"the request body is not valid JSON: {exc}") from None
    except RecursionError:  # the client's nesting, not a fault of the script: the default handler's 400
        raise HandlerError(400, codecs.TOO_DEEP) from None
    if isinstance(value, dict):
        return value
    return _array(value, "the JSON value")


def _json_lines(text: str) -> np.ndarray:
    values = []
    for number, line in json_lines(text):
        try:
            values.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise not_one_value(number, exc) from None
        except RecursionError:
            raise HandlerError(400, codecs.TOO_DEEP) from None
    return _array(values, "the JSON lines")


def _csv(text: str) -> np.ndarray:
    """RFC 4180 rows of numbers; int64 when every field is an integer, else float64."""
    lines, rows = [], []
    for line, fields in csv_rows(text):
        lines.append(line)
        rows.append(fields)
    values: list[list[int]] | list[list[float]]
    dtype: type[np.number]
    try:
        values = [[int(field) for field in row] for row in rows]
        dtype = np.int64
    except ValueError:
        values = [[_float(field, number) for field in row] for row, number in zip(rows, lines, strict=True)]
        dtype = np.float64
    array = np.array(values, dtype=dtype)
    return array.reshape(-1) if array.shape[0] == 1 or array.shape[1] == 1 else array


def _float(field: str, line: int) -> float:
    try:
        return float(field)
    except ValueError:
        raise HandlerError(
            400,
            f"CSV line {line}: {field!r} is not a number (the default input_fn reads "
            "numbers only; write an input_fn for other fields)",
        ) from None


# ---- encoding ----


def encode(prediction: Any, content_type: str) -> str | bytes:
    """The body of `prediction` as `content_type` (one type): str for the text types, bytes for NPY."""
    kind = media_types.format_of(content_type)
    if kind is Format.JSON:
        return _json_text(prediction)
    if kind is Format.CSV:
        return _csv_text(np.asarray(prediction))
    if kind is Format.NPY:
        return npy.dump(np.asarray(prediction))
    if kind is Format.JSON_LINES:
        items = prediction.tolist() if hasattr(prediction, "tolist") else prediction
        items = items if isinstance(items, (list, tuple)) else [items]
        return lines(items, _json_text)  # no newline after the last line (Batch Transform adds them)
    raise UnsupportedFormatError(content_type, 406)


def _json_text(value: Any) -> str:
    return json.dumps(value, default=json_default)


def _csv_text(array: np.ndarray) -> str:
    """As numpy.savetxt(fmt="%s", delimiter=","): a line per row, values with str(), for 0-, 1- and 2-D (a 0-d array
    is one line, a 1-D one a value per line)."""
    if array.ndim > 2:  # a 406 as NPY's for predictions it cannot write: the client's input can make them so
        message = f"a {array.ndim}-D prediction cannot be written as CSV"
        raise HandlerError(406, f"{message}: return a 1-D or 2-D array, or write an output_fn")
    return lines(array.reshape(-1, 1) if array.ndim < 2 else array, csv_line, newline_after_last=True)


def response_type(accept: str | None) -> str:
    """The type of TYPES that `accept` prefers (the default handler's rule); UnsupportedFormatError 406."""
    media = codecs.negotiate(accept, TYPES)
    if media is None:
        raise UnsupportedFormatError(accept, 406)
    return media


def default_output(prediction: Any, accept: str | None) -> tuple[str | bytes, str]:
    """The default output_fn: (body, content type) in the type `accept` prefers."""
    media = response_type(accept)
    return encode(prediction, media), media
