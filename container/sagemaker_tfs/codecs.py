"""The default handler: converts requests to TensorFlow Serving's REST JSON, and its answers back.

It serves /invocations when there is no code/inference.py, and scripts can use it with the very same
behaviour (it is one implementation):

    from sagemaker_tfs.codecs import default_input_handler, default_output_handler

    def input_handler(data, context):
        return default_input_handler(data, context)      # the TFS request body (bytes)

    def output_handler(response, context):
        return default_output_handler(response, context)  # (body, content_type[, status])

Requests, by Content-Type (compared case-insensitively without parameters, so `application/json;
charset=utf-8` is JSON; no Content-Type means JSON). The body must be UTF-8 (a BOM is dropped). Never guessed
from the body:
  application/json    One JSON value. An object with an "instances", "inputs" or "examples" key is a TFS
                      request and is sent byte for byte; a list of lists (a body starting with `[[`, spaces
                      allowed) is the instances (`[[1, 2], [3, 4]]` becomes `{"instances": [[1, 2], [3, 4]]}`);
                      any other value is one instance, as in the original container (`[1, 2]` becomes
                      `{"instances": [[1, 2]]}`, `{"x": 1}` becomes `{"instances": [{"x": 1}]}`). A body of
                      several JSON values, one per line (what Batch Transform sends with SplitType=Line), is
                      read as JSON lines. Integers of any length are valid JSON and are copied as written (the
                      model server reads those beyond 64 bits as doubles, as TensorFlow Serving does).
  application/jsonlines, application/jsons, application/x-jsonlines, application/jsonl
                      JSON lines: each non-blank line is one JSON value, one instance
                      (`1\\n[2]\\n` becomes `{"instances": [1, [2]]}`); a trailing newline is fine.
  application/x-npy   an NPY array (the SageMaker SDK's NumpySerializer), never unpickled: its first axis
                      is the instances (`[[1, 2], [3, 4]]` becomes `{"instances": [[1, 2], [3, 4]]}`).
  text/csv            RFC 4180: each row is one instance; a row of one field is a scalar instance
                      (`1.0\\n2.0` becomes `{"instances": [1.0, 2.0]}`), a longer row a list (`1,2,3` becomes
                      `{"instances": [[1,2,3]]}`). Quoted fields may hold commas, quotes ("") and newlines.
                      A field that is a decimal number (surrounding spaces ignored; quoted or not) is sent as a
                      number: as written when it is valid JSON, else normalised (`+1` -> 1, `.5` -> 0.5,
                      `007` -> 7); nan/inf/infinity (any case, signed) are sent as NaN/Infinity/-Infinity,
                      which TensorFlow Serving reads; any other field is a JSON string. CRLF or LF line ends;
                      blank lines are skipped. Every row must have the same number of fields.
JSON values, JSON lines and CSV numbers in JSON syntax are copied into the request text as written (never
re-encoded), so numbers keep their exact digits.
The types and their aliases are media_types.py's table, shared with the Batch Transform runner.
Errors: another content type -> 415; an empty body, invalid UTF-8, JSON or CSV, JSON nested too deeply to
read -> 400, with a message that names the problem and, for JSON lines and CSV, the line number.

Responses, by Accept: media ranges with q-values and wildcards (`*/*`, `application/*`, `text/*`); the
highest q wins, ties go to the type listed first, then to JSON. No Accept (or `*/*`) means JSON:
  application/json    the model server's answer, unchanged.
  application/jsonlines, application/jsons, application/x-jsonlines, application/jsonl
                      one compact JSON value per prediction, one per line.
  text/csv            one line per prediction: nested lists are flattened into
                      the line, the outputs of a multi-output prediction are columns in sorted name order,
                      strings are quoted per RFC 4180 when they hold a comma, quote or line break, booleans are
                      true/false, null is an empty field.
  application/x-npy   the predictions as one NPY array, when they are rectangular numbers (else 406).
  The predictions are the answer's "predictions" (row format), else "outputs" (columnar: a list gives a line
  per element, an object of equally long lists a line per index, anything else one line), else "results"
  (classify, regress); so a request of N instances gives N lines, as Batch Transform's AssembleWith=Line and
  joins need. Lines are separated by newlines and the last one has none: Batch Transform's AssembleWith=Line
  writes a newline after every answer, so one record in gives exactly one line out (no blank lines).
Errors: nothing acceptable -> 406. A model server error (any status but 200) is passed through with its
status and its JSON body, whatever the Accept.
Both directions are linear in the body size: numbers-only CSV (the usual case) is checked and converted with
a few whole-body C-speed operations, so megabytes take tens of milliseconds.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from .errors import HandlerError
from .shared import media_types, npy, tfs_api
from .shared.media_types import CSV, JSON, Format
from .shared.text_records import csv_line, csv_rows, json_lines, lines, not_one_value

REQUEST_TYPES = media_types.names(Format.JSON, Format.JSON_LINES, Format.CSV, Format.NPY)
RESPONSE_TYPES = REQUEST_TYPES  # in order of preference when a wildcard allows several


# ---- media types and Accept ----

media_type = media_types.base  # `Text/CSV; charset=utf-8` -> `text/csv`; None -> ''


def _accept_ranges(accept: str) -> list[tuple[str, float]]:
    """(media range, q) of each entry of an Accept header, in header order."""
    ranges = []
    for entry in accept.split(","):
        media = media_type(entry)
        if not media:
            continue
        q = 1.0
        for name, value in media_types.parameters(entry):
            if name == "q":
                try:
                    q = min(max(float(value), 0.0), 1.0)
                except ValueError:
                    pass  # a malformed q is ignored rather than refused
        ranges.append(("*/*" if media == "*" else media, q))
    return ranges


def _quality(media: str, ranges: list[tuple[str, float]]) -> tuple[float, int] | None:
    """(q, position in the header) of the most specific range matching `media`, or None."""
    family = media.split("/", 1)[0] + "/*"
    best = None  # (specificity, q, position)
    for position, (pattern, q) in enumerate(ranges):
        specificity = 2 if pattern == media else 1 if pattern == family else 0 if pattern == "*/*" else -1
        if specificity >= 0 and (best is None or specificity > best[0]):
            best = (specificity, q, position)
    return None if best is None else (best[1], best[2])


def negotiate(accept: str | None, types: tuple[str, ...] = RESPONSE_TYPES) -> str | None:
    """The type of `types` (JSON first) the Accept header prefers (JSON when it is absent or empty), or None if
    it accepts none of them."""
    if not accept or accept == JSON or accept == "*/*" or accept.isspace():
        return JSON
    ranges = _accept_ranges(accept)
    best, best_key = None, None
    for order, media in enumerate(types):
        quality = _quality(media, ranges)
        if quality is None or quality[0] <= 0:
            continue
        key = (quality[0], -quality[1], -order)  # highest q, then first in the header, then our order
        if best_key is None or key > best_key:
            best, best_key = media, key
    return best


def preferred_type(accept: str | None) -> str | None:
    """The media type the Accept header prefers among those it names without a wildcard (highest q, then
    first), or None: the content type of a handler's bare str/bytes answer."""
    if not accept:
        return None
    concrete = [(q, -i, media) for i, (media, q) in enumerate(_accept_ranges(accept)) if "*" not in media and q > 0]
    return max(concrete)[2] if concrete else None


def response_type(accept: str | None) -> str:
    """The type the default output handler answers in; HandlerError 406 when Accept allows none."""
    media = negotiate(accept)
    if media is None:
        raise HandlerError(
            406,
            f"none of the types in the Accept header {accept!r} can be produced: the default "
            f"output handler answers {', '.join(RESPONSE_TYPES)}",
        )
    return media


# ---- requests ----


def default_input_handler(data: Any, context: Any) -> bytes:
    """The TFS REST request body for the client's request: `data` is the request stream (or bytes), the
    format comes from `context.request_content_type`."""
    return tfs_request(_read(data), context.request_content_type)


def default_request(data: Any, context: Any) -> Any:
    """What the default handler sends: default_input_handler's TFS request, except that an NPY body stays an array
    (the instances), which goes to the model server in binary (model_client/tensor_calls.py)."""
    if media_type(context.request_content_type) == npy.NPY:
        return npy.load(_read(data))
    return default_input_handler(data, context)


def tfs_request(body: bytes, content_type: str | None = JSON) -> bytes:
    """The TFS REST request body (JSON) for a client body of this content type; HandlerError 415/400."""
    media = media_type(content_type) or JSON
    if media not in REQUEST_TYPES:
        raise HandlerError(
            415,
            f"unsupported content type {content_type!r}: the default input handler reads "
            f"{', '.join(REQUEST_TYPES)} (a code/inference.py script can read others)",
        )
    kind = media_types.format_of(media)
    if kind is Format.NPY:
        return npy.tfs_request(body)
    if body.startswith(b"\xef\xbb\xbf"):
        body = body[3:]
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HandlerError(400, f"the request body is not UTF-8 text: invalid byte at position {exc.start}") from None
    if not text or text.isspace():
        raise HandlerError(400, "the request body is empty")
    if kind is Format.JSON:
        return _json_request(body, text)
    instances = _csv_instances(text) if kind is Format.CSV else _json_lines_instances(text)
    return b'{"instances": ' + instances.encode() + b"}"


def _read(data: Any) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    if isinstance(data, str):
        return data.encode()
    return data.read()


def _json_request(body: bytes, text: str) -> bytes:
    try:
        value = _loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":  # several values: JSON lines sent as application/json
            return b'{"instances": ' + _json_lines_instances(text).encode() + b"}"
        raise HandlerError(400, f"the request body is not valid JSON: {exc}") from None
    if isinstance(value, dict) and any(key in value for key in tfs_api.REQUEST_KEYS):
        return body  # already a TFS request
    if isinstance(value, list) and value and isinstance(value[0], list):  # `[[...`: the instances, as the original
        return b'{"instances": ' + body + b"}"
    return b'{"instances": [' + body + b"]}"


TOO_DEEP = "the request body's JSON nests arrays and objects too deeply to be read"
# The app only looks at the kind of each value (the text is sent as written), so numbers are not converted: each
# reads as its length, a small cached int. A body of millions of numbers then makes no object per number (it parses
# about 5 times faster than with floats, and leaves no millions of floats to fragment the worker's heap), and
# integers longer than Python's int-string limit (4300 digits), valid JSON, are read like any other.
_STRUCTURE = json.JSONDecoder(parse_float=len, parse_int=len)


def _loads(text: str) -> Any:
    """The JSON value's structure (numbers as their lengths); JSONDecodeError if invalid, HandlerError 400 if nested
    too deeply."""
    try:
        return _STRUCTURE.decode(text)
    except RecursionError:
        raise HandlerError(400, TOO_DEEP) from None


def _value_end(line: str) -> int:
    """Where the JSON value at the start of `line` ends; -1 when no valid value starts there."""
    try:
        return _STRUCTURE.raw_decode(line)[1]
    except json.JSONDecodeError:
        return -1
    except RecursionError:
        raise HandlerError(400, TOO_DEEP) from None


def _json_lines_instances(text: str) -> str:
    """The JSON text of the instances list: one instance per non-blank line, each line copied as written."""
    if "," not in text:
        fast = _numbers_only(text)  # one number per line
        if fast:
            return fast
    items = []
    for number, line in json_lines(text):
        if _value_end(line) != len(line):
            try:
                _loads(line)
            except json.JSONDecodeError as exc:
                raise not_one_value(number, exc) from None
        items.append(line)
    if not items:
        raise HandlerError(400, "the request body has no JSON lines")
    return "[" + ", ".join(items) + "]"


# Characters of numbers-only CSV; anything else (letters, quotes, brackets) takes the field-by-field path.
_NOT_NUMERIC_CSV = re.compile(r"[^0-9eE.,+\- \t\r\n]").search
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?").fullmatch
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?").fullmatch
_NON_FINITE = {
    "nan": "NaN",
    "+nan": "NaN",
    "-nan": "NaN",
    "inf": "Infinity",
    "+inf": "Infinity",
    "-inf": "-Infinity",
    "infinity": "Infinity",
    "+infinity": "Infinity",
    "-infinity": "-Infinity",
}


def _csv_instances(text: str) -> str:
    """The JSON text of the instances list of a CSV body."""
    return _numbers_only(text) or _any_csv_instances(text)


def _numbers_only(text: str) -> str | None:
    """Fast path for rows of JSON numbers separated by commas (numeric CSV; also JSON lines of one number
    each): the rows joined into one JSON text, which one json.loads checks at C speed (every field a number,
    every row as wide as the first), are the instances as written. None when this does not apply (other
    characters, blank or CR-only lines, other number spellings, ragged rows): the general path decides."""
    if _NOT_NUMERIC_CSV(text):
        return None
    rows = text.replace("\r\n", "\n").rstrip(" \t\n")
    if not rows or "\r" in rows:
        return None
    newline = rows.find("\n")
    width = (rows if newline < 0 else rows[:newline]).count(",") + 1
    instances = "[" + rows.replace("\n", ",") + "]" if width == 1 else "[[" + rows.replace("\n", "],[") + "]]"
    try:
        values = _STRUCTURE.decode(instances)
    except ValueError:
        return None
    if len(values) != rows.count("\n") + 1 or (width > 1 and set(map(len, values)) != {width}):
        return None
    return instances


def _any_csv_instances(text: str) -> str:
    rows: list[str] = []
    for _, fields in csv_rows(text):
        values = [_csv_field_json(field) for field in fields]
        rows.append(values[0] if len(values) == 1 else "[" + ", ".join(values) + "]")
    if not rows:
        raise HandlerError(400, "the CSV request body has no rows")
    return "[" + ", ".join(rows) + "]"


def _csv_field_json(field: str) -> str:
    """The JSON text of one CSV field: a number when it is one, else a string."""
    number = field.strip(" \t")
    if _JSON_NUMBER(number):
        return number
    if _DECIMAL(number):
        if not any(c in number for c in ".eE"):  # an integer: its sign and leading zeros normalised as text
            digits = number.lstrip("+-").lstrip("0") or "0"
            return "-" + digits if number[0] == "-" and digits != "0" else digits
        value = float(number)
        return repr(value) if math.isfinite(value) else ("Infinity" if value > 0 else "-Infinity")
    token = _NON_FINITE.get(number.lower())
    if token:
        return token
    return json.dumps(field, ensure_ascii=False)


# ---- responses ----


def default_output_handler(response: Any, context: Any) -> tuple:
    """(body, content_type) for the client from the model server's `response` (a requests.Response, or
    anything with status_code, content and headers) in the type `context.accept_header` asks for; a model
    server error is passed through as (body, content_type, status)."""
    status = response.status_code
    if status != 200:
        return response.content, (response.headers.get("Content-Type") or JSON), status
    media = response_type(context.accept_header)
    if media == JSON:
        return response.content, JSON
    if media == npy.NPY:
        outputs = getattr(response, "outputs", None)  # a binary call's arrays (tensor_calls.TensorResponse)
        if outputs is not None and len(outputs) == 1:
            (array,) = outputs.values()
            if array.dtype.kind in "biuf":
                return npy.dump(array), media  # the model's own type: float32 where JSON would give float64
        return npy.predictions_body(predictions(_answer(response.content))), media
    return encode_predictions(response.content, media), media


def encode_predictions(tfs_body: bytes, media: str) -> bytes:
    """The model server's JSON answer as JSON lines or CSV (`media`), one line per prediction."""
    rows = predictions(_answer(tfs_body))
    text = _numeric_lines(rows, media)
    if text is None:
        text = lines(rows, _csv_line if media == CSV else _compact)
    return text.encode()  # no newline after the last line (see the module docstring)


def _answer(tfs_body: bytes) -> Any:
    try:
        return json.loads(tfs_body)
    except ValueError as exc:
        raise ValueError(f"the model server's answer is not JSON ({exc}): {tfs_body[:200]!r}") from None


def predictions(answer: Any) -> list:
    """The predictions of a TFS answer, one per instance (see the module docstring)."""
    if not isinstance(answer, dict):
        return answer if isinstance(answer, list) else [answer]
    for key in ("predictions", "outputs", "results"):
        if key in answer:
            rows = answer[key]
            break
    else:
        return [answer]
    if isinstance(rows, dict):  # columnar outputs: {name: [one value per instance]}
        columns = list(rows.values())
        if columns and all(isinstance(c, list) for c in columns) and len(set(map(len, columns))) == 1:
            return [dict(zip(rows, values, strict=True)) for values in zip(*columns, strict=True)]
        return [rows]
    return rows if isinstance(rows, list) else [rows]


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _numeric_lines(rows: list, media: str) -> str | None:
    """Fast path for the usual answers, all numbers (or booleans) or all flat lists of them: one compact dump
    of every row, split into lines with str.replace at C speed. None when it does not apply."""
    text = _compact(rows)[1:-1]
    if '"' in text or "{" in text or "null" in text:
        return None  # strings, objects and nulls: row by row
    if "[" not in text:
        return text.replace(",", "\n")  # scalars
    if text[0] != "[" or text[-1] != "]" or "[[" in text or "]]" in text:
        return None
    lines = text[1:-1].replace("],[", "\n")
    if "[" in lines or "]" in lines:
        return None  # lists mixed with scalars
    return lines if media == CSV else "[" + lines.replace("\n", "]\n[") + "]"


def _csv_line(row: Any) -> str:
    values: list = []
    _flatten(row, values)
    return csv_line(values, _csv_value)


def _flatten(value: Any, out: list) -> None:
    if isinstance(value, list):
        for item in value:
            _flatten(item, out)
    elif isinstance(value, dict):
        for key in sorted(value):
            _flatten(value[key], out)
    else:
        out.append(value)


_FLOAT_TOKENS = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}  # as TensorFlow Serving writes them


def _csv_value(value: Any) -> str:
    kind = type(value)
    if kind is float:
        text = repr(value)
        return _FLOAT_TOKENS.get(text, text)
    if kind is str:
        if any(c in value for c in ',"\r\n'):
            return '"' + value.replace('"', '""') + '"'
        return value
    if kind is bool:
        return "true" if value else "false"
    if value is None:
        return ""
    return str(value)
