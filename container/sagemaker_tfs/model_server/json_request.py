"""TFS REST request bodies -> numpy tensors and tf.Examples, with TFS's checks and error texts.

Predict: row format (`instances`, one entry per batch row; rows are values, or objects keyed by input name)
or columnar (`inputs`, a value for the only input or an object of named inputs; no batch dimension added).
Dense shapes follow TFS: the shape comes from the first element at each level and every other element must
match. Numbers convert per the signature's dtype (`1.0` is not an int32, `true` is not a number); strings may
be `{"b64": "..."}`. Well-formed bulk input converts in one numpy call; only a bad request takes the slow
element-by-element path that finds the offending value and names it.

A big predict body that is one array of plain numbers (`{"instances": [[0.5, ...], ...]}`) for a signature whose
one input is a float is not parsed into Python objects at all: predict_request checks and converts its text with
numpy (NumericArray). Any other body, or an array that is not plainly well-formed, takes the path above, which
alone decides errors, so that every answer stays the same.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import re
from typing import Callable, Mapping, TypeVar

import numpy as np

from ..shared import dtypes
from ..shared.tfs_json_text import debug, type_name
from .servable import TensorInfo
from ..shared.error_codes import Code, ServingError, invalid_argument

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


_SCAN = json.JSONDecoder().scan_once  # the C scanner under json.loads, without its Python layers (~2 us a call)
_INT64_MIN, _INT64_MAX, _UINT64_MAX = -(2**63), 2**63 - 1, 2**64 - 1
TOO_DEEP = "JSON Value: arrays and objects are nested too deeply to be read"

_F = TypeVar("_F", bound=Callable)


def _nesting_checked(function: _F) -> _F:
    """rapidjson parses iteratively, at any depth; Python's parser and our walks recurse: a request nested past
    the recursion limit is the client's error (400), not ours."""
    @functools.wraps(function)
    def checked(*args, **kwargs):
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
        offset = len(text[:exc.pos].encode("utf-8"))
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
        raise invalid_argument(f"JSON Value: {debug(doc)} not formatted correctly. 'signature_name' key must be "
                               "a string value.")
    return name


# ---------------------------------------------------------------------------------------------- big numeric arrays
# A JSON parse makes a Python float per number (~0.5 us each, mostly decimal conversion), and numpy then reads the
# nested lists back: for a 3 MB image that is most of a REST predict's time. A predict body that is one big array
# of plain numbers is instead checked and converted by numpy over its bytes. It is taken only when it is plainly
# well-formed: anything else (other members, NaN, true, strings, ragged lists...) is parsed as before, so that
# every error, and every value, is the same as the element-by-element path gives. The work is done in blocks, whose
# temporaries stay in cache.

FAST_MIN_BYTES = 1 << 14  # below this the fixed cost of the numpy calls outweighs what they save
_MAX_FAST_RANK = 32  # deeper arrays take the usual path (and its rank error past 64)
_TEXT_BLOCK = 1 << 19  # bytes of text converted at a time (~26K numbers): its temporaries stay in cache
_WS_CLASS = rb"[ \t\n\r]*"
_NAME = rb'"signature_name"' + _WS_CLASS + rb":" + _WS_CLASS + rb'"([ !#-Z^-~]*)"'  # printable ASCII, no \ [ ]
_HEAD = re.compile(_WS_CLASS + rb"\{" + _WS_CLASS + rb"(?:" + _NAME + _WS_CLASS + rb"," + _WS_CLASS + rb")?"
                   rb'"(instances|inputs)"' + _WS_CLASS + rb":" + _WS_CLASS + rb"(?=\[)")
_TAIL = re.compile(_WS_CLASS + rb"(?:," + _WS_CLASS + _NAME + _WS_CLASS + rb")?\}" + _WS_CLASS)
# bytes.translate: keep the brackets and commas, drop number characters and whitespace, anything else -> X
_STRUCTURE = bytes(c if c in b"[]," else ord("X") for c in range(256))
_NOT_STRUCTURE = b"0123456789.eE+- \t\n\r"

# SWAR: 8 ASCII digits in a little-endian uint64 (the first character in the low byte) read at once
_U64 = np.uint64
_DIGIT_BITS = 0x0F0F0F0F0F0F0F0F  # an ASCII digit's value
_HIGH_DIGITS = np.array([(~((1 << 8 * (8 - n)) - 1)) & _DIGIT_BITS for n in range(9)], np.uint64)  # the last n
_PAD = 24  # bytes of '0' around a block's text: every word read lies inside
_PADDING = b"0" * _PAD
_POWERS = np.array([float(f"1e{k}") for k in range(-300, 301)])  # 10^k, correctly rounded; [k + 300]
_EXACT_POWERS = np.array([float(10 ** k) for k in range(23)])  # exact in a double
_INT_POWERS = np.array([10 ** k for k in range(19)], np.uint64)
# the two words from a token's '.': the digits kept for each count of fraction digits (up to 15; not the '.')
_FRACTION_KEEP = np.array([[((1 << 8 * min(n + 1, 8)) - 256) & _DIGIT_BITS for n in range(16)],
                           [((1 << 8 * min(max(n - 7, 0), 8)) - 1) & _DIGIT_BITS for n in range(16)]], np.uint64)


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
        return parse_json(self.body[self.start:self.stop])


def _numeric_array(body: bytes, start: int, stop: int, single: bool) -> np.ndarray | None:
    """The array body[start:stop] (from '[' to its ']') as float32 (single) or float64 values, if it is valid JSON:
    nested lists of a dense shape with a JSON number in every innermost slot and nothing but whitespace between;
    None if it is not, or holds what the usual path converts otherwise (integers past 15 digits).

    The brackets and commas (bytes.translate) must be exactly those of nested lists of a shape; then in blocks of
    text that end after a ',' or ']': the slots between them must each hold one token, and all the block's number
    characters (whose grammar is then checked as they convert, _block_numbers)."""
    structure = body.translate(_STRUCTURE, _NOT_STRUCTURE)  # the whole body's, then the array's part of it
    head, tail = (len(part.translate(_STRUCTURE, _NOT_STRUCTURE)) for part in (body[:start], body[stop:]))
    structure = structure[head:len(structure) - tail]
    shape = _numeric_shape(structure)
    if shape is None:
        return None
    marks = np.frombuffer(structure, np.uint8)
    view = memoryview(body)
    parts, block_start, mark = [], start + 1, 0  # mark: the structure index of the ',' or '[' before the block
    while block_start < stop:
        block_stop = stop
        if stop - block_start > _TEXT_BLOCK:  # after the next ',' or ']'
            found = [body.find(mark_char, block_start + _TEXT_BLOCK, stop) for mark_char in (b",", b"]")]
            block_stop = min(at for at in (*found, stop - 1) if at >= 0) + 1
        text = b"".join((_PADDING, view[block_start - 1:block_stop], _PADDING))  # from the mark before it
        chars = np.frombuffer(text, np.uint8)
        # the ',' '[' and ']' from the mark before the block; '[' 0x5B and ']' 0x5D are the only characters here
        # (X aside) whose bits 0x59 are set under 0xF9
        inner = chars[_PAD:len(text) - _PAD]
        brackets = np.flatnonzero((inner == 44) | ((inner & 0xF9) == 0x59)) + _PAD
        block_marks = marks[mark:mark + brackets.size]
        # innermost slots: after '[' or ',', before ',' or ']' (the structure is that of `shape`)
        slots = (block_marks[:-1] != 93) & (block_marks[1:] != 91)
        starts, ends = brackets[:-1][slots] + 1, brackets[1:][slots]
        while (space := chars[starts] <= 32).any():  # whitespace around the tokens (nothing else is <= 32)
            starts = starts + space
        while (space := chars[ends - 1] <= 32).any():
            ends = ends - space
        lengths = ends - starts
        # each slot holds one token, and all the number characters are in one
        numbers = inner.size - brackets.size - np.count_nonzero(inner <= 32)
        if (lengths.size and lengths.min() < 1) or int(lengths.sum()) != numbers:
            return None
        if lengths.size:
            with np.errstate(over="ignore", invalid="ignore"):  # past float32's range: inf, as in TFS
                values = _block_numbers(text, chars, starts, ends, single)
            if values is None:
                return None
            parts.append(values)
        block_start, mark = block_stop, mark + brackets.size - 1
    return np.concatenate(parts).reshape(shape)


def _block_numbers(text: bytes, chars: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                   single: bool) -> np.ndarray | None:
    """The values of the tokens text[starts[i]:ends[i]] (each made of number characters) as float32 (single) or
    float64, or None if one is not a JSON number or is an integer past 15 digits. `text` has _PAD '0's each side."""
    count = starts.size
    # A token's grammar, -?int(.fraction)?([eE][+-]?exponent)?, is checked by where its '-', '.', 'e' and '+' are:
    # every other character is then a digit.
    negative = chars[starts] == 45
    begin = starts + negative  # the first digit
    mantissa_end, owners = ends, None  # the mantissa ends at the token's 'e' or 'E', if any
    lower, upper = b"e" in text, b"E" in text  # (bytes' search is ~50x numpy's any() over an array without one)
    if lower or upper:
        marks = np.flatnonzero((chars | 0x20) == 0x65 if upper else chars == 101)
        owners = np.searchsorted(starts, marks, "right") - 1
        if (np.diff(owners) <= 0).any() or (marks <= begin[owners]).any():
            return None  # two in a token, or one without a mantissa before it
        mantissa_end = ends.copy()
        mantissa_end[owners] = marks
    fraction = None  # which tokens have a '.' (None: all)
    point = begin + 1  # where the '.' of a number like 0.25 is: the usual array, which needs no search
    if not ((chars[point] == 46).all() and (point < mantissa_end).all() and np.count_nonzero(chars == 46) == count):
        points = np.flatnonzero(chars == 46)
        dotted = np.searchsorted(starts, points, "right") - 1
        if (np.diff(dotted) <= 0).any() or (points >= mantissa_end[dotted]).any():
            return None  # two in a token, or one in an exponent
        point, fraction = mantissa_end.copy(), np.zeros(count, bool)
        point[dotted], fraction[dotted] = points, True
    integer_digits = point - begin
    fraction_digits = mantissa_end - point - 1  # -1: no '.'
    if (integer_digits < 1).any() or (fraction_digits == 0).any():
        return None  # '-' alone, '.5', '1.', '1e'
    if ((integer_digits > 1) & (chars[begin] == 48)).any():
        return None  # a leading zero
    integers = None  # tokens with neither '.' nor exponent (None: none)
    if fraction is not None:
        integers = ~fraction
        if owners is not None:
            integers[owners] = False
        if (integers & (integer_digits > 15)).any():
            return None  # numpy's conversion of big integers (int64, uint64, object) is the usual path's
    power, signs = None, (0, 0)
    long = integer_digits > 8  # tokens longer than the words below: converted one by one
    if owners is not None:
        sign = chars[mantissa_end[owners] + 1]
        plus, minus = sign == 43, sign == 45
        exponent_digits = ends[owners] - mantissa_end[owners] - 1 - (plus | minus)
        if (exponent_digits < 1).any():
            return None  # '1e', '1e+'
        signs = (np.count_nonzero(plus), np.count_nonzero(minus))
        if owners.size * 32 < count:  # a few (0.00001 in an array of 0.5s): one by one, cheaper than numpy calls
            long[owners] = True
        else:
            long[owners] |= exponent_digits > 3
            (word,) = _words_at(text, ends[owners] - 8)
            value = _digit_values(word, _HIGH_DIGITS[np.minimum(exponent_digits, 3)])
            power = np.where(minus, -value.astype(np.int64), value.astype(np.int64))
    pluses = np.count_nonzero(chars == 43) if b"+" in text else 0
    minuses = np.count_nonzero(chars == 45) if b"-" in text else 0
    if pluses != signs[0] or minuses != signs[1] + np.count_nonzero(negative):
        return None  # a '+' or '-' elsewhere

    # the digits: the integer part from the word that ends at the point (or its one digit), then the '.' and
    # 7 digits and the next 8 (a float32 needs no more: the rest only widens the rounding margin)
    kept = np.minimum(np.maximum(fraction_digits, 0), 15)
    fractions = [_digit_values(word, keep[kept]) for word, keep in zip(_words_at(text, point, 2), _FRACTION_KEEP)]
    if integer_digits.max() == 1:
        integer = (chars[point - 1] - 48).astype(np.float64)
    else:
        (word,) = _words_at(text, point - 8)
        integer = _digit_values(word, _HIGH_DIGITS[np.minimum(integer_digits, 8)])
    if single:
        result = _singles(integer, fractions, fraction_digits > 15, power, owners, negative, integers)
    else:
        result = _doubles(integer, fractions, fraction_digits, power, owners, negative, integers)
        long |= fraction_digits > 15
    slow = np.flatnonzero(long | np.isnan(result))  # converted one by one
    if slow.size:
        numbers = [float(text[a:b]) for a, b in zip(starts[slow].tolist(), ends[slow].tolist())]
        result[slow] = numbers
        if integers is not None:
            result[slow[integers[slow]]] += 0.0  # the integer -0 is 0: +0.0
    return result


def _words_at(text: bytes, positions: np.ndarray, count: int = 1) -> list[np.ndarray]:
    """The `count` words of `text` at each position and 8, 16... bytes on (every position + 8 * count + 8 within the
    text), as little-endian words: from its aligned words, shifted."""
    words = np.frombuffer(text, np.uint64, len(text) // 8)
    index = positions >> 3
    down = ((positions & 7) << 3).astype(np.uint64)
    up = _U64(63) - down  # the next word's bytes move up by 64 - down: in two steps, as a shift by 64 is not 0
    aligned = [words[index + i] for i in range(count + 1)]
    return [(aligned[i] >> down) | ((aligned[i + 1] << _U64(1)) << up) for i in range(count)]


def _digit_values(words: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """The 8-digit number of each word of ASCII digits, the bytes outside `keep` (its low nibbles: a digit's
    value) as 0: SWAR, adding up pairs, fours then the two halves, each by one multiplication (first digit in the
    low byte, so the higher lane is the lower digits)."""
    x = words & keep
    x = ((x * _U64(10 << 8 | 1)) >> _U64(8)) & _U64(0x00FF00FF00FF00FF)
    x = ((x * _U64(100 << 16 | 1)) >> _U64(16)) & _U64(0x0000FFFF0000FFFF)
    return (x * _U64(10000 << 32 | 1)) >> _U64(32)


def _scaled(value: np.ndarray, power: np.ndarray | None, owners: np.ndarray | None, negative: np.ndarray,
            integers: np.ndarray | None, factors: np.ndarray) -> np.ndarray:
    """value * factors[power] for the tokens with an exponent, then signed (the integer -0 is 0, +0.0)."""
    if power is not None:
        value[owners] *= factors[power]
    np.negative(value, out=value, where=negative)
    if integers is not None:
        value[integers] += 0.0  # -0.0 + 0.0 is +0.0; the float -0.0 stays -0.0
    return value


def _singles(integer, fractions, truncated, power, owners, negative, integers) -> np.ndarray:
    """float32 values: a double approximation of each token, rounded to float32 where every double within its
    error bound (2^-40 of it, and 10^-15 for digits left out) rounds the same, as the text's correctly rounded
    double then does (which the usual path rounds to float32); NaN where not, and past 10^+-300."""
    mantissa = integer + fractions[0] * 1e-7 + fractions[1] * 1e-15
    margin = mantissa * 2.0 ** -40 + truncated * 1e-15
    if power is not None:
        beyond = np.abs(power) > 300
        power = np.minimum(np.maximum(power, -300), 300) + 300
        margin[owners[beyond]] = np.nan
    value = _scaled(mantissa, power, owners, negative, integers, _POWERS)
    if power is not None:
        margin[owners] *= _POWERS[power]
    low, high = (value - margin).astype(np.float32), (value + margin).astype(np.float32)  # (warnings off)
    return np.where(low == high, low, np.float32(np.nan))


def _doubles(integer, fractions, fraction_digits, power, owners, negative, integers) -> np.ndarray:
    """float64 values where the decimal mantissa is an integer exact in a double and the power of ten too (then one
    multiplication or division rounds correctly); NaN elsewhere."""
    digits = np.maximum(fraction_digits, 0)
    shift = -digits  # the power of ten of the mantissa's last digit
    if power is not None:
        shift[owners] += power
    mantissa = integer.astype(np.uint64) * _INT_POWERS[np.minimum(digits, 15)] + \
        (fractions[0] * _U64(10 ** 8) + fractions[1]) // _INT_POWERS[15 - np.minimum(digits, 15)]
    exact = (digits <= 15) & (np.abs(shift) <= 22) & (mantissa <= _U64(2 ** 53))
    value = mantissa.astype(np.float64)
    factor = _EXACT_POWERS[np.minimum(np.abs(shift), 22)]
    value = np.where(shift >= 0, value * factor, value / factor)
    value = _scaled(value, None, None, negative, integers, _POWERS)
    return np.where(exact, value, np.nan)


def predict_request(body: bytes, input_dtype: Callable[[str], int | None] | None = None) -> dict:
    """request_object for a predict. A big body that is one array of plain numbers (and maybe a signature name)
    for a signature whose one input is a float or double (input_dtype(signature name), None if not one input) is
    checked and converted with numpy: the doc holds a NumericArray, whose tensor predict_inputs takes."""
    if input_dtype is not None and len(body) >= FAST_MIN_BYTES:
        head = _HEAD.match(body)
        stop = body.rfind(b"]") + 1
        tail = _TAIL.fullmatch(body, stop) if head else None
        if tail and (head.group(1) is None or tail.group(1) is None):
            name = head.group(1) if head.group(1) is not None else tail.group(1)
            dtype = input_dtype((name or b"").decode())
            array = _numeric_array(body, head.end(), stop, dtype == dtypes.DT_FLOAT) if dtype in _FLOATS else None
            if array is not None:  # the members in the body's order, as the usual parse gives them
                doc = {head.group(2).decode(): NumericArray(array, body, head.end(), stop)}
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
    return invalid_argument(f"JSON Value: {debug(value)} Type: {type_name(value)} is not of expected type: "
                            f"{dtypes.name(dtype)}")


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
            raise invalid_argument(f"Encountered list at unexpected size: {len(value)} at level: {level} "
                                   f"expected size: {shape[level]}")
        for item in value:
            _flatten(item, shape, dtype, level + 1, out)
        return
    if level != rank:
        raise invalid_argument(f"JSON Value: {debug(value)} found at incorrect level: {level + 1} in the JSON DOM. "
                               f"Expected at level: {rank}")
    out.append(_leaf(value, dtype))


_MAX_RANK = 64  # numpy's limit (TensorFlow's is 254)


def _check_rank(rank: int) -> None:
    if rank > _MAX_RANK:
        raise invalid_argument(f"Tensor of {rank} dimensions: this model server supports at most {_MAX_RANK} (JSON "
                               f"lists nested {rank} levels deep)")


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
        raise ServingError(Code.UNIMPLEMENTED,
                           f"Conversion of JSON Value: {debug(value)} to type: {dtypes.enum_name(info.dtype)}")
    array = _fast_array(value, info.dtype, may_hold_bools)
    return array if array is not None else _checked_array(value, info.dtype)


# ---------------------------------------------------------------------------------------------- predict

def _shape_text(shape: tuple[int, ...]) -> str:
    return "[" + ",".join(map(str, shape)) + "]"


@_nesting_checked
def predict_inputs(doc: dict, inputs: Mapping[str, TensorInfo],
                   may_hold_bools: bool = True) -> tuple[dict[str, np.ndarray], bool]:
    """The tensors of a predict request by input alias, and whether it used the row (`instances`) format.

    may_hold_bools=False (the body has no `true`/`false` token) lets numbers convert without a walk.
    """
    has_instances, has_inputs = "instances" in doc, "inputs" in doc
    if has_instances == has_inputs:
        if has_instances:
            raise invalid_argument(f"JSON Value: {debug(doc)} Not formatted correctly expecting only one of "
                                   "'inputs' or 'instances' keys to exist ")
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
        raise invalid_argument("inputs is a plain value/list, but expecting an object as multiple input tensors "
                               "required as per tensorinfo_map")
    ((alias, info),) = inputs.items()
    return {alias: to_array(value, info, may_hold_bools)}


def _element_error(index: int, alias: str | None, error: ServingError) -> ServingError:
    key = f" key: {alias}" if alias is not None else ""
    return ServingError(error.code, f"Failed to process element: {index}{key} of 'instances' list. "
                                    f"Error: {error.code.name}: {error.message}")


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
        raise invalid_argument("instances is a plain list, but expecting list of objects as multiple input "
                               "tensors required as per tensorinfo_map")
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
                    raise _element_error(index, key, invalid_argument(f"JSON object: does not have named input: "
                                                                      f"{key}"))
            raise invalid_argument(f"Failed to process element: {index} of 'instances' list. JSON object: "
                                   f"{debug(row)} keys must be equal to: {names}")
    tensors = {}
    for alias, info in inputs.items():
        column = [row[alias] for row in rows]
        array = _fast_array(column, info.dtype, may_hold_bools) if info.dtype in SUPPORTED else None
        tensors[alias] = array if array is not None else _stack_rows(column, alias, info, named=True)
    return tensors


def _stack_rows(rows: list, alias: str, info: TensorInfo, named: bool) -> np.ndarray:
    """Rows converted one by one: every row must have the first row's shape (TFS's messages otherwise)."""
    arrays = []
    for index, row in enumerate(rows):
        try:
            array = to_array(row, info)
            if arrays and array.shape != arrays[0].shape:
                if array.size != arrays[0].size:
                    raise invalid_argument(f"Expecting tensor size: {arrays[0].size} but got: {array.size}")
                raise invalid_argument(f"Expecting shape {_shape_text(arrays[0].shape)} but got: "
                                       f"{_shape_text(array.shape)}")
        except ServingError as exc:
            raise _element_error(index, alias if named else None, exc) from None
        arrays.append(array)
    _check_rank(arrays[0].ndim + 1)
    return np.stack(arrays)


# ---------------------------------------------------------------------------------------------- examples

_KINDS = {float: "float", int: "int64", bytes: "bytes"}


def _feature_values(feature: str, value: object) -> tuple[type | None, list]:
    items = value if isinstance(value, list) else [value]
    kind, values = None, []
    for item in items:
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
        elif _is_b64(item) and isinstance(item["b64"], str):
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
        raise invalid_argument(f"JSON Value: {debug(doc)} When method is classify, key 'examples' is expected and "
                               "was not found")
    examples = doc["examples"]
    if not isinstance(examples, list):
        raise invalid_argument(f"JSON Value: {debug(doc)} Expecting 'examples' value to be an list/array")
    if not examples:
        raise invalid_argument(f"JSON Value: {debug(doc)} 'examples' value is an empty array")
    # TFS serializes context + example: protobuf merging makes the example's value win for shared features.
    context = example_bytes(doc["context"]) if "context" in doc else b""
    return [context + example_bytes(example) for example in examples]
