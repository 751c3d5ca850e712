"""TFS REST request bodies -> numpy tensors and tf.Examples, with TFS's checks and error texts.

Predict: row format (`instances`, one entry per batch row; rows are values, or objects keyed by input name)
or columnar (`inputs`, a value for the only input or an object of named inputs; no batch dimension added).
Dense shapes follow TFS: the shape comes from the first element at each level and every other element must
match. Numbers convert per the signature's dtype (`1.0` is not an int32, `true` is not a number); strings may
be `{"b64": "..."}`. Well-formed bulk input converts in one numpy call; only a bad request takes the slow
element-by-element path that finds the offending value and names it.

A big predict body that is one array of plain numbers (`{"instances": [[0.5, ...], ...]}`) for a signature whose
one input is a float is not parsed into Python objects at all: predict_request checks its brackets and reads its
numbers with simdjson (NumericArray). Any other body, or an array that is not plainly well-formed, takes the path
above, which alone decides errors, so that every answer stays the same.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import math
import re
import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import numpy as np
import simdjson

from ..shared import dtypes
from ..shared.error_codes import Code, ServingError, invalid_argument
from ..shared.tfs_json_text import debug, type_name
from .servable import TensorInfo

_NUMERIC_RANGES = dtypes.INT_RANGES
_FLOATS = (dtypes.DT_FLOAT, dtypes.DT_DOUBLE)
SUPPORTED = (*_FLOATS, *_NUMERIC_RANGES, dtypes.DT_BOOL, dtypes.DT_STRING)


# ---------------------------------------------------------------------------------------------- JSON parsing

_RAPIDJSON_MESSAGES = (  # Python's json message prefix -> rapidjson's wording, as TFS reports it
    ("Expecting property name enclosed in double quotes", "Missing a name for object member."),
    ("Expecting ':' delimiter", "Missing a colon after a name of object member."),
    ("Unterminated string", "Missing a closing quotation mark in string."),
    ("Invalid \\escape", "Invalid escape character in string."),
    ("Invalid \\uXXXX escape", "Incorrect hex digit after \\u escape in string."),
    ("Invalid control character", "Invalid encoding in string."),
)


def _comma_message(text: str, pos: int) -> str:
    """rapidjson says whether a missing comma was in an object or an array: find the open bracket."""
    stack, in_string, escaped = [], False, False
    for char in text[:pos]:
        if in_string:
            escaped = not escaped and char == "\\"
            in_string = escaped or char != '"'
        elif char == '"':
            in_string = True
        elif char in "[{":
            stack.append(char)
        elif char in "]}" and stack:
            stack.pop()
    if stack and stack[-1] == "[":
        return "Missing a comma or ']' after an array element."
    return "Missing a comma or '}' after an object member."


# the C scanner under json.loads, without its Python layers (~2 us a call); typeshed does not declare it
_SCAN = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_INT64_MIN, _INT64_MAX, _UINT64_MAX = -(2**63), 2**63 - 1, 2**64 - 1
TOO_DEEP = "JSON Value: arrays and objects are nested too deeply to be read"

_F = TypeVar("_F", bound=Callable[..., Any])


def _nesting_checked(function: _F) -> _F:
    """rapidjson parses iteratively, at any depth; Python's parser and our walks recurse: a request nested past
    the recursion limit is the client's error (400), not ours."""

    @functools.wraps(function)
    def checked(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except RecursionError:
            raise invalid_argument(TOO_DEEP) from None

    return checked  # type: ignore[return-value]


def _double(value: int) -> float:
    """An integer as rapidjson reads one beyond 64 bits: a double, +-inf beyond its range."""
    try:
        return float(value)
    except OverflowError:
        return float("inf") if value > 0 else float("-inf")


def _long_int(text: str) -> int | float:
    """An integer literal; past Python's int-string limit (4300 digits) a double, as rapidjson reads it."""
    try:
        return int(text)
    except ValueError:
        return float(text)  # +-inf: a literal that long is beyond the double range


_LONG_INTEGERS = json.JSONDecoder(parse_int=_long_int)


@_nesting_checked
def parse_json(body: bytes) -> object:
    """The JSON document of a request body, rapidjson-style: NaN/Infinity allowed, trailing bytes ignored,
    integers of any length (doubles past 64 bits)."""
    try:  # the usual body: UTF-8, a value from the first character, nothing after it but whitespace
        text = body.decode("utf-8")
        doc, end = _SCAN(text, 0)
        if end == len(text) or not text[end:].strip(" \t\n\r"):
            return doc
    except (ValueError, StopIteration):  # StopIteration: no value at 0 (leading whitespace, empty body)
        pass
    try:
        return json.loads(body, parse_int=_long_int)
    except ValueError:
        pass  # find out why, and whether only trailing bytes were the problem (rapidjson stops when done)
    if not body:
        raise invalid_argument("JSON Parse error: The document is empty")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise invalid_argument(f"JSON Parse error: Invalid encoding in string. at offset: {exc.start}") from None
    start = len(text) - len(text.lstrip(" \t\n\r"))
    if start == len(text):
        raise invalid_argument(f"JSON Parse error: The document is empty. at offset: {start}")
    try:
        return _LONG_INTEGERS.raw_decode(text, start)[0]
    except json.JSONDecodeError as exc:
        message = "Invalid value."
        if exc.msg.startswith("Expecting ',' delimiter"):
            message = _comma_message(text, exc.pos)
        for python, rapidjson in _RAPIDJSON_MESSAGES:
            if exc.msg.startswith(python):
                message = rapidjson
        offset = len(text[: exc.pos].encode("utf-8"))
        raise invalid_argument(f"JSON Parse error: {message} at offset: {offset}") from None


@_nesting_checked
def request_object(body: bytes) -> dict:
    doc = parse_json(body)
    if not isinstance(doc, dict):
        raise invalid_argument(f"JSON Value: {debug(doc)} Is not object")
    return doc


def signature_name(doc: dict) -> str:
    """The request's `signature_name` ('' when absent: the default signature)."""
    name = doc.get("signature_name", "")
    if not isinstance(name, str):
        raise invalid_argument(
            f"JSON Value: {debug(doc)} not formatted correctly. 'signature_name' key must be a string value."
        )
    return name


# ---------------------------------------------------------------------------------------------- big numeric arrays
# A JSON parse makes a Python float per number (~0.5 us each), and numpy then reads the nested lists back: for a
# 3 MB image that is most of a REST predict's time. A predict body that is one big array of plain numbers is
# instead read by simdjson (C++, correctly rounded like Python's float()) straight into a buffer of doubles. It is
# taken only when it is plainly well-formed: anything else (other members, NaN, true, strings, ragged lists, a
# number past the double range...) is parsed as before, so that every error, and every value, is the same as the
# element-by-element path gives.

FAST_MIN_BYTES = 1 << 14  # below this the fixed cost of the calls outweighs what they save
_MAX_FAST_RANK = 32  # deeper arrays take the usual path (and its rank error past 64)
_WS_CLASS = rb"[ \t\n\r]*"
_NAME = rb'"signature_name"' + _WS_CLASS + rb":" + _WS_CLASS + rb'"([ !#-Z^-~]*)"'  # printable ASCII, no \ [ ]
_HEAD = re.compile(
    _WS_CLASS + rb"\{" + _WS_CLASS + rb"(?:" + _NAME + _WS_CLASS + rb"," + _WS_CLASS + rb")?"
    rb'"(instances|inputs)"' + _WS_CLASS + rb":" + _WS_CLASS + rb"(?=\[)"
)
_TAIL = re.compile(_WS_CLASS + rb"(?:," + _WS_CLASS + _NAME + _WS_CLASS + rb")?\}" + _WS_CLASS)
# bytes.translate: keep the brackets and commas, drop number characters and whitespace, anything else -> X
_STRUCTURE = bytes(c if c in b"[]," else ord("X") for c in range(256))
_NOT_STRUCTURE = b"0123456789.eE+- \t\n\r"
_KEPT_PARSER_BYTES = 1 << 24  # a thread keeps its parser (~1.6x the text it read) for bodies up to this size
_parsers = threading.local()
# An integer token and a double round differently to float32 only past 2^53, where int64 -> double is inexact
# (the usual path casts an all-integer array from int64; simdjson reads integers up to 2^64, refuses larger ones).
_INEXACT_INTEGERS = (2.0**53, 2.0**64)


def _numeric_shape(structure: bytes) -> tuple[int, ...] | None:
    """The shape whose nested lists have exactly these brackets and commas (numbers left out), or None.

    The first list of level k ends at the first r-k closing brackets; its items are separated by the commas that
    follow r-k-1 of them (a comma after more would end the list). The structure built back from the shape must
    then be the same text."""
    rank = len(structure) - len(structure.lstrip(b"["))
    if not 0 < rank <= _MAX_FAST_RANK:
        return None
    shape = []
    for level in range(rank):
        closing = b"]" * (rank - level)
        end = structure.find(closing, level)
        if end < 0:
            return None
        shape.append(structure.count(closing[1:] + b",", level, end) + 1)
    expected = b""
    for size in reversed(shape):
        expected = b"[" + b",".join([expected] * size) + b"]"
    return tuple(shape) if expected == structure else None


class NumericArray:
    """A request's array of plain numbers, converted for its signature's one float input: `array`; the text
    (body[start:stop], valid JSON) is parsed as usual for any other use (value)."""

    __slots__ = ("array", "body", "start", "stop")

    def __init__(self, array: np.ndarray, body: bytes, start: int, stop: int):
        self.array, self.body, self.start, self.stop = array, body, start, stop

    def value(self) -> object:
        """The nested lists the usual parse gives."""
        return parse_json(self.body[self.start : self.stop])


def _doubles(body: bytes, member: str) -> np.ndarray | None:
    """The numbers of the body's array `member` (nested lists, read in order) as doubles, or None if the body is not
    JSON or the array holds anything but numbers. (Given bytes, simdjson reads them in place.)"""
    kept = len(body) <= _KEPT_PARSER_BYTES
    parser = getattr(_parsers, "parser", None) if kept else None
    if parser is None:
        parser = simdjson.Parser()
        if kept:
            _parsers.parser = parser
    try:
        doc: Any = parser.parse(body)  # (an Object here: the body's first byte is `{`)
        buffer = doc[member].as_buffer(of_type="d")
    except (ValueError, TypeError, RuntimeError):  # not JSON, not all numbers, or an integer past 64 bits
        return None
    finally:
        doc = None  # the parser reads the next text only once nothing of this one is held
    return np.frombuffer(buffer, np.float64)


def _numeric_array(body: bytes, member: str, start: int, stop: int, single: bool) -> np.ndarray | None:
    """The array body[start:stop] (from '[' to its ']', the body's `member`) as float32 (single) or float64 values,
    if the body is valid JSON and the array nested lists of a dense shape (the brackets and commas alone, from
    bytes.translate) holding only numbers; None if not, or if it holds what the usual path converts otherwise (an
    integer token beyond 2^53 for float32)."""
    structure = body.translate(_STRUCTURE, _NOT_STRUCTURE)  # the whole body's, then the array's part of it
    head, tail = (len(part.translate(_STRUCTURE, _NOT_STRUCTURE)) for part in (body[:start], body[stop:]))
    shape = _numeric_shape(structure[head : len(structure) - tail])
    if shape is None:
        return None
    values = _doubles(body, member)
    if values is None or values.size != math.prod(shape):
        return None
    if not single:
        return values.reshape(shape)
    magnitudes = np.abs(values)
    if ((magnitudes > _INEXACT_INTEGERS[0]) & (magnitudes <= _INEXACT_INTEGERS[1])).any() and body.count(
        b".", start, stop
    ) < values.size:  # and not every token has a decimal point
        return None
    with np.errstate(over="ignore"):  # past float32's range: inf, as in TFS
        return values.astype(np.float32).reshape(shape)


def predict_request(body: bytes, input_dtype: Callable[[str], int | None] | None = None) -> dict:
    """request_object for a predict. A big body that is one array of plain numbers (and maybe a signature name)
    for a signature whose one input is a float or double (input_dtype(signature name), None if not one input) is
    checked and converted with numpy: the doc holds a NumericArray, whose tensor predict_inputs takes."""
    if input_dtype is not None and len(body) >= FAST_MIN_BYTES:
        head = _HEAD.match(body)
        stop = body.rfind(b"]") + 1
        tail = _TAIL.fullmatch(body, stop) if head else None
        if head and tail and (head.group(1) is None or tail.group(1) is None):
            name = head.group(1) if head.group(1) is not None else tail.group(1)
            dtype = input_dtype((name or b"").decode())
            member = head.group(2).decode()
            single = dtype == dtypes.DT_FLOAT
            array = _numeric_array(body, member, head.end(), stop, single) if dtype in _FLOATS else None
            if array is not None:  # the members in the body's order, as the usual parse gives them
                doc: dict[str, object] = {member: NumericArray(array, body, head.end(), stop)}
                if head.group(1) is not None:
                    doc = {"signature_name": head.group(1).decode(), **doc}
                if tail.group(1) is not None:
                    doc["signature_name"] = tail.group(1).decode()
                return doc
    return request_object(body)


def may_hold_bools(doc: dict, body: bytes) -> bool:
    """Whether the body may hold a `true` or `false` token (else predict_inputs converts numbers without a walk):
    not searched for (3 MB: ms) in a NumericArray body, which holds none (asked again if it is parsed)."""
    if len(body) >= FAST_MIN_BYTES and any(isinstance(value, NumericArray) for value in doc.values()):
        return False
    return b"true" in body or b"false" in body


# ---------------------------------------------------------------------------------------------- values


def _is_b64(value: object) -> bool:
    return isinstance(value, dict) and len(value) == 1 and "b64" in value


def _type_error(value: object, dtype: int) -> ServingError:
    return invalid_argument(
        f"JSON Value: {debug(value)} Type: {type_name(value)} is not of expected type: {dtypes.name(dtype)}"
    )


def _leaf(value: object, dtype: int) -> object:
    """One JSON scalar as a value of `dtype`, or TFS's error."""
    if dtype == dtypes.DT_STRING:
        if isinstance(value, str):
            return value.encode("utf-8")
        if isinstance(value, dict):
            encoded = value.get("b64")
            if len(value) != 1 or not isinstance(encoded, str):
                raise invalid_argument(f"JSON Value: {debug(value)} not formatted correctly for base64 data")
            try:
                return base64.b64decode(encoded, validate=True)
            except (binascii.Error, ValueError):
                raise invalid_argument("Unable to base64 decode") from None
        raise _type_error(value, dtype)
    if dtype == dtypes.DT_BOOL:
        if isinstance(value, bool):
            return value
        raise _type_error(value, dtype)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _type_error(value, dtype)
    if dtype in _FLOATS:
        return _double(value) if isinstance(value, int) else value
    low, high = _NUMERIC_RANGES[dtype]
    if not isinstance(value, int) or not low <= value <= high:
        raise _type_error(value, dtype)
    return value


def _shape_of(value: object) -> list[int]:
    """TFS's dense shape: the length of the first element at each level."""
    shape = []
    while isinstance(value, list):
        shape.append(len(value))
        if not value:
            break
        value = value[0]
    return shape


def _flatten(value: object, shape: list[int], dtype: int, level: int, out: list) -> None:
    rank = len(shape)
    if isinstance(value, list):
        if level >= rank:
            raise invalid_argument(f"Encountered list at unexpected level: {level} expected < {rank}")
        if len(value) != shape[level]:
            raise invalid_argument(
                f"Encountered list at unexpected size: {len(value)} at level: {level} expected size: {shape[level]}"
            )
        for item in value:
            _flatten(item, shape, dtype, level + 1, out)
        return
    if level != rank:
        raise invalid_argument(
            f"JSON Value: {debug(value)} found at incorrect level: {level + 1} in the JSON DOM. "
            f"Expected at level: {rank}"
        )
    out.append(_leaf(value, dtype))


_MAX_RANK = 64  # numpy's limit (TensorFlow's is 254)


def _check_rank(rank: int) -> None:
    if rank > _MAX_RANK:
        raise invalid_argument(
            f"Tensor of {rank} dimensions: this model server supports at most {_MAX_RANK} (JSON "
            f"lists nested {rank} levels deep)"
        )


def _checked_array(value: object, dtype: int) -> np.ndarray:
    """Element by element, with TFS's messages: the path of a request that the fast path refused."""
    shape = _shape_of(value)
    _check_rank(len(shape))
    flat: list = []
    _flatten(value, shape, dtype, 0, flat)
    np_dtype = dtypes.to_numpy(dtype)
    if dtype == dtypes.DT_STRING:
        array = np.empty(len(flat), dtype=object)
        array[:] = flat
        return array.reshape(shape)
    with np.errstate(over="ignore"):
        return np.array(flat, dtype=np.float64 if dtype in _FLOATS else None).astype(np_dtype).reshape(shape)


def _fast_array(value: object, dtype: int, may_hold_bools: bool) -> np.ndarray | None:
    """One numpy conversion for well-formed numeric input; None when the checked path must decide."""
    if dtype == dtypes.DT_STRING:
        return None
    try:
        array = np.array(value)
    except (ValueError, TypeError, OverflowError):  # ragged, or ints beyond 64 bits
        return None
    kind = array.dtype.kind
    if dtype == dtypes.DT_BOOL:
        return array if kind == "b" else None
    if kind not in "iuf" or may_hold_bools:  # numpy reads True as 1: a body with true/false is checked
        return None
    np_dtype = dtypes.to_numpy(dtype)
    if dtype in _FLOATS:
        return array.astype(np_dtype)  # beyond float32's range: +-inf, as in TFS (the server mutes numpy's warning)
    if kind == "f":
        return None  # 1.0 is not an integer for TFS
    if array.size:
        low, high = _NUMERIC_RANGES[dtype]
        if array.min() < low or array.max() > high:
            return None
    return array.astype(np_dtype)


def to_array(value: object, info: TensorInfo, may_hold_bools: bool = True) -> np.ndarray:
    """A JSON value (scalar or nested lists) as a tensor of the input's dtype; raises TFS's errors."""
    if info.dtype not in SUPPORTED:
        raise ServingError(
            Code.UNIMPLEMENTED, f"Conversion of JSON Value: {debug(value)} to type: {dtypes.enum_name(info.dtype)}"
        )
    array = _fast_array(value, info.dtype, may_hold_bools)
    return array if array is not None else _checked_array(value, info.dtype)


# ---------------------------------------------------------------------------------------------- predict


def _shape_text(shape: tuple[int, ...]) -> str:
    return "[" + ",".join(map(str, shape)) + "]"


@_nesting_checked
def predict_inputs(
    doc: dict, inputs: Mapping[str, TensorInfo], may_hold_bools: bool = True
) -> tuple[dict[str, np.ndarray], bool]:
    """The tensors of a predict request by input alias, and whether it used the row (`instances`) format.

    may_hold_bools=False (the body has no `true`/`false` token) lets numbers convert without a walk.
    """
    has_instances, has_inputs = "instances" in doc, "inputs" in doc
    if has_instances == has_inputs:
        if has_instances:
            raise invalid_argument(
                f"JSON Value: {debug(doc)} Not formatted correctly expecting only one of "
                "'inputs' or 'instances' keys to exist "
            )
        raise invalid_argument("Missing 'inputs' or 'instances' key")
    if not inputs:
        raise invalid_argument("Signature has no inputs")
    key = "instances" if has_instances else "inputs"
    numbers = doc[key]
    if isinstance(numbers, NumericArray):  # converted for this input (else, if the model changed, parsed as usual)
        if len(inputs) == 1:
            ((alias, info),) = inputs.items()
            if info.dtype in _FLOATS and numbers.array.dtype == dtypes.to_numpy(info.dtype):
                return {alias: numbers.array}, has_instances
        doc = {**doc, key: numbers.value()}
        may_hold_bools = may_hold_bools or b"true" in numbers.body or b"false" in numbers.body
    if has_instances:
        return _row_inputs(doc, inputs, may_hold_bools), True
    return _columnar_inputs(doc["inputs"], inputs, may_hold_bools), False


def _columnar_inputs(value: object, inputs: Mapping[str, TensorInfo], may_hold_bools: bool) -> dict:
    if isinstance(value, dict) and not _is_b64(value):
        tensors = {}
        for alias, info in inputs.items():
            if alias not in value:
                raise invalid_argument(f"Missing named input: {alias} in 'inputs' object.")
            tensors[alias] = to_array(value[alias], info, may_hold_bools)
        return tensors  # other keys are ignored, as in TFS
    if len(inputs) != 1:
        raise invalid_argument(
            "inputs is a plain value/list, but expecting an object as multiple input tensors "
            "required as per tensorinfo_map"
        )
    ((alias, info),) = inputs.items()
    return {alias: to_array(value, info, may_hold_bools)}


def _element_error(index: int, alias: str | None, error: ServingError) -> ServingError:
    key = f" key: {alias}" if alias is not None else ""
    return ServingError(
        error.code,
        f"Failed to process element: {index}{key} of 'instances' list. Error: {error.code.name}: {error.message}",
    )


def _row_inputs(doc: dict, inputs: Mapping[str, TensorInfo], may_hold_bools: bool) -> dict:
    rows = doc["instances"]
    if not isinstance(rows, list):
        raise invalid_argument(f"JSON Value: {debug(doc)} Expecting 'instances' to be an list/array")
    if not rows:
        raise invalid_argument(f"JSON Value: {debug(doc)} No values in 'instances' array")
    first = rows[0]
    if isinstance(first, dict) and not _is_b64(first):
        return _object_rows(rows, inputs, may_hold_bools)
    if len(inputs) != 1:
        raise invalid_argument(
            "instances is a plain list, but expecting list of objects as multiple input "
            "tensors required as per tensorinfo_map"
        )
    ((alias, info),) = inputs.items()
    array = _fast_array(rows, info.dtype, may_hold_bools) if info.dtype in SUPPORTED else None
    if array is not None:
        return {alias: array}
    for index, row in enumerate(rows):
        if isinstance(row, dict) and not _is_b64(row):
            raise invalid_argument(f"Expecting value/list but got object at item {index} of input list")
    return {alias: _stack_rows(rows, alias, info, named=False)}


def _object_rows(rows: list, inputs: Mapping[str, TensorInfo], may_hold_bools: bool) -> dict:
    names = ",".join(sorted(inputs))
    for index, row in enumerate(rows):
        if not isinstance(row, dict) or _is_b64(row):
            raise invalid_argument(f"Expecting object but got list at item {index} of input list")
        if len(row) != len(inputs) or any(key not in inputs for key in row):
            for key in row:
                if key not in inputs:
                    raise _element_error(index, key, invalid_argument(f"JSON object: does not have named input: {key}"))
            raise invalid_argument(
                f"Failed to process element: {index} of 'instances' list. JSON object: "
                f"{debug(row)} keys must be equal to: {names}"
            )
    tensors = {}
    for alias, info in inputs.items():
        column = [row[alias] for row in rows]
        array = _fast_array(column, info.dtype, may_hold_bools) if info.dtype in SUPPORTED else None
        tensors[alias] = array if array is not None else _stack_rows(column, alias, info, named=True)
    return tensors


def _stack_rows(rows: list, alias: str, info: TensorInfo, named: bool) -> np.ndarray:
    """Rows converted one by one: every row must have the first row's shape (TFS's messages otherwise)."""
    arrays: list[np.ndarray] = []
    for index, row in enumerate(rows):
        try:
            array = to_array(row, info)
            if arrays and array.shape != arrays[0].shape:
                if array.size != arrays[0].size:
                    raise invalid_argument(f"Expecting tensor size: {arrays[0].size} but got: {array.size}")
                raise invalid_argument(
                    f"Expecting shape {_shape_text(arrays[0].shape)} but got: {_shape_text(array.shape)}"
                )
        except ServingError as exc:
            raise _element_error(index, alias if named else None, exc) from None
        arrays.append(array)
    _check_rank(arrays[0].ndim + 1)
    return np.stack(arrays)


# ---------------------------------------------------------------------------------------------- examples

_KINDS = {float: "float", int: "int64", bytes: "bytes"}


def _feature_values(feature: str, value: object) -> tuple[type | None, list]:
    items = value if isinstance(value, list) else [value]
    kind: type | None = None
    values: list = []
    for item in items:
        item_kind: type
        if isinstance(item, bool):
            item_kind, item = int, int(item)
        elif isinstance(item, int) and not _INT64_MIN <= item <= _UINT64_MAX:
            item_kind, item = float, _double(item)  # beyond 64 bits rapidjson reads a double
        elif isinstance(item, int):
            if item > _INT64_MAX:
                raise invalid_argument(f"Feature: {feature} has uint64_t element. Only int64_t is supported.")
            item_kind = int
        elif isinstance(item, float):
            item_kind = float
        elif isinstance(item, str):
            item_kind, item = bytes, item.encode("utf-8")
        elif isinstance(item, dict) and _is_b64(item) and isinstance(item["b64"], str):
            item_kind, item = bytes, _leaf(item, dtypes.DT_STRING)
        else:
            raise invalid_argument(f"Feature: {feature} has element with unexpected JSON type: {type_name(item)}")
        if kind is None:
            kind = item_kind
        elif item_kind is not kind:
            raise invalid_argument(f"Unexpected element type in feature: {feature} expecting type: {_KINDS[kind]}")
        values.append(item)
    return kind, values


def example_bytes(value: object) -> bytes:
    """A JSON object of features as a serialized tf.Example."""
    from tensorflow.core.example import example_pb2

    if not isinstance(value, dict):
        raise invalid_argument(f"Example must be JSON object but got JSON {type_name(value)}")
    example = example_pb2.Example()
    for name, raw in value.items():
        kind, values = _feature_values(name, raw)
        feature = example.features.feature[name]
        if kind is float:
            feature.float_list.value.extend(values)
        elif kind is int:
            feature.int64_list.value.extend(values)
        elif kind is bytes:
            feature.bytes_list.value.extend(values)
    return example.SerializeToString()


@_nesting_checked
def serialized_examples(doc: dict) -> list[bytes]:
    """The serialized tf.Examples of a classify/regress request (context merged into each, as in TFS)."""
    if "examples" not in doc:
        raise invalid_argument(
            f"JSON Value: {debug(doc)} When method is classify, key 'examples' is expected and was not found"
        )
    examples = doc["examples"]
    if not isinstance(examples, list):
        raise invalid_argument(f"JSON Value: {debug(doc)} Expecting 'examples' value to be an list/array")
    if not examples:
        raise invalid_argument(f"JSON Value: {debug(doc)} 'examples' value is an empty array")
    # TFS serializes context + example: protobuf merging makes the example's value win for shared features.
    context = example_bytes(doc["context"]) if "context" in doc else b""
    return [context + example_bytes(example) for example in examples]
