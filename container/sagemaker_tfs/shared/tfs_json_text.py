"""How TFS writes JSON text (rapidjson's PrettyWriter): numbers, strings, and values quoted in error messages.

TFS formats tensor floats with printf `%g` (6 significant digits), or `%.9g` (`%.17g` for doubles) when `%g`
does not round-trip, then appends `.0` to integral-looking texts; NaN and infinities are the bare tokens
`NaN`, `Infinity`, `-Infinity` (float32_json: the same texts for a big float32 array, made with numpy). Values of
the request quoted in error messages (`JSON Value: ...`) are written by rapidjson: arrays on one line, objects over
several lines with 4-space indents, cut after 256 characters.
"""

from __future__ import annotations

import decimal
import json
import math
import re
import struct
from fractions import Fraction

import numpy as np

DEBUG_LIMIT = 256
_NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def float_texts(values: np.ndarray) -> list[str]:
    """TFS's text of every float in an array (any shape, read in C order)."""
    flat = np.ascontiguousarray(values).reshape(-1)
    is_double = flat.dtype == np.float64
    if not is_double and flat.dtype != np.float32:
        flat = flat.astype(np.float32)
    if not is_double and flat.size >= VECTOR_MIN:
        return b"".join(float32_json(flat, [b" "])).decode("ascii").split(" ")[:-1]
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
    pairs = zip(texts, finite.tolist(), strict=True)
    return [t if ("." in t or "e" in t or not finite_t) else t + ".0" for t, finite_t in pairs]


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


# ---------------------------------------------------------------------------------------------- big float32 arrays
# printf is ~0.3 us an element, and the round-trip check parses every text back: most of a big answer's time. For
# float32 the same texts are made for a whole array with numpy. printf's digits are those of the float32 times a
# power of ten, rounded half to even: a double product gives them, except where its error (< 2^-52 of it) could
# change the rounding; the %g text's reading back is decided the same way, with a margin. Those elements,
# non-finite ones and integer parts too long for one word are written one by one (_float_text).
# A text is built in 64-bit words of ASCII (first character in the low byte), NUL where a shorter text has no
# character; one bytes.translate then drops the NULs. The work is done in blocks, whose temporaries stay in cache.

VECTOR_MIN = 512  # below this many elements the fixed cost of the numpy calls is more than what they save
_BLOCK = 1 << 14  # elements written at a time: their temporaries stay in cache
_U64 = np.uint64
_ASCII_ZEROS = _U64(0x3030303030303030)
_POWERS = np.array([float(f"1e{k}") for k in range(-64, 65)])  # [k + 64]: 10^k, correctly rounded


def _binade_table() -> tuple[np.ndarray, np.ndarray]:
    """Per binary exponent b (index b + 160): the decimal exponent of 2^b, and the power of ten within [2^b,
    2^(b+1)) if one is (else inf): a double's decimal exponent is the first, plus 1 from that power on. (No
    float32 comes within 2^-32 of a power of ten but 1, 10, 100...: comparing with the rounded power is exact.)"""
    low, threshold = [], []
    for b in range(-160, 130):
        two = Fraction(2) ** b
        exponent = math.floor(math.log10(2.0) * b)
        while Fraction(10) ** (exponent + 1) <= two:
            exponent += 1
        while Fraction(10) ** exponent > two:
            exponent -= 1
        low.append(exponent)
        threshold.append(float(f"1e{exponent + 1}") if Fraction(10) ** (exponent + 1) < 2 * two else math.inf)
    return np.array(low, np.int64), np.array(threshold)


_BINADE_EXPONENTS, _BINADE_THRESHOLDS = _binade_table()
# the integer word: "-123." right-aligned, '.' in its last byte; [n]: n digits before the '.', and the sign before
_INTEGER_BYTES = np.array([((1 << 8 * n) - 1) << 8 * (7 - n) for n in range(8)], np.uint64)
_SIGNS = np.array([ord("-") << 8 * (6 - n) if n < 7 else 0 for n in range(8)], np.uint64)
_POINT = _U64(ord(".") << 56)
_ZERO_POINT = _U64(ord("0") << 48 | ord(".") << 56)
_LOW_BYTES = np.array([(1 << 8 * n) - 1 for n in range(9)], np.uint64)  # [n]: a word's first n characters
_EXPONENTS = np.array([int.from_bytes(b"e%+03d" % e, "little") for e in range(-64, 64)], np.uint64)  # [e + 64]


def _ascii8(numbers: np.ndarray) -> np.ndarray:
    """Each number (< 10^8) as 8 ASCII digits, zero-padded: SWAR, splitting 4+4, 2+2 then 1+1 digits per lane."""
    numbers = numbers.astype(np.uint64)
    high = (numbers * _U64(109951163)) >> _U64(40)  # / 10^4 (exact below 10^8: 109951163 / 2^40 ~ 10^-4)
    x = high | ((numbers - high * _U64(10000)) << _U64(32))
    high = ((x * _U64(5243)) >> _U64(19)) & _U64(0x0000007F0000007F)  # / 100 in each 32-bit lane (< 10^4)
    x = high | ((x - high * _U64(100)) << _U64(16))
    high = ((x * _U64(103)) >> _U64(10)) & _U64(0x000F000F000F000F)  # / 10 in each 16-bit lane (< 100)
    return (high | ((x - high * _U64(10)) << _U64(8))) | _ASCII_ZEROS


def _significant(words: np.ndarray) -> np.ndarray:
    """How many characters of each 8-digit word go up to its last digit that is not '0' (0 to 8): the highest set
    bit, from the exponent of a double (exact: a digit's bits never round up to a higher power of two)."""
    return (np.frexp((words ^ _ASCII_ZEROS).astype(np.float64))[1] + 7) // 8


def float32_json(values: np.ndarray, separators: list[bytes], which: np.ndarray | None = None) -> list[bytes]:
    """TFS's text of every float32 of an array (read in C order), each followed by separators[which[i]]
    (separators[0] if which is None): the texts float_texts gives, in pieces to join (once: a big text's copies
    cost more than its digits)."""
    floats = np.ascontiguousarray(values, np.float32).reshape(-1)
    words = -(-max(map(len, separators)) // 8)
    table = np.frombuffer(b"".join(s.ljust(8 * words, b"\0") for s in separators), np.uint64).reshape(-1, words)
    with np.errstate(invalid="ignore", over="ignore"):  # signalling NaNs; past the range: not written here
        return [
            _float32_block(floats[i : i + _BLOCK], table[0 if which is None else which[i : i + _BLOCK]])
            for i in range(0, floats.size, _BLOCK)
        ]


def _decimal_exponents(magnitudes: np.ndarray) -> np.ndarray | int:
    """Each magnitude's decimal exponent; one int if all share one (a block's values often lie in one decade)."""
    low, high = _decimal_exponent(float(magnitudes.min())), _decimal_exponent(float(magnitudes.max()))
    if low == high:
        return low
    binade = (magnitudes.view(np.uint64) >> _U64(52)).astype(np.int64) - (1023 - 160)
    return _BINADE_EXPONENTS[binade] + (magnitudes >= _BINADE_THRESHOLDS[binade])


def _decimal_exponent(magnitude: float) -> int:
    binade = math.frexp(magnitude)[1] - 1 + 160
    return int(_BINADE_EXPONENTS[binade]) + int(magnitude >= _BINADE_THRESHOLDS[binade])


def _float32_block(floats: np.ndarray, separators: np.ndarray) -> bytes:
    """float32_json of a block: each text followed by its separator (a row of words of `separators`)."""
    negative, finite = np.signbit(floats), np.isfinite(floats)
    magnitudes32 = np.abs(floats)
    magnitudes = magnitudes32.astype(np.float64)
    nonzero = finite & (magnitudes != 0)
    magnitudes[~nonzero] = 1.0
    exponents = _decimal_exponents(magnitudes)
    # 9 digits: magnitude * 10^(8 - e) in [10^8, 10^9); 6 digits from it / 1000 (a second rounding, in the margin)
    scaled = magnitudes * _POWERS[72 - exponents]
    digits9 = np.rint(scaled)
    sure9 = np.abs(scaled - digits9) < 0.5 - 2.0**-20
    scaled *= 1e-3
    digits6 = np.rint(scaled)
    sure6 = np.abs(scaled - digits6) < 0.5 - 2.0**-25
    carry6, carry9 = digits6 >= 1e6, digits9 >= 1e9  # 999999.5 -> 1e+06
    if np.count_nonzero(carry6) or np.count_nonzero(carry9):
        exponents6, exponents9 = exponents + carry6, exponents + carry9
        digits6[carry6], digits9[carry9] = 1e5, 1e8
    else:
        exponents6 = exponents9 = exponents
    # %g is kept where its text reads back (as a double, then as float32) to the same value: decided for all the
    # doubles within 2^-40 of the approximate value (that text's double is one of them)
    back = digits6 * _POWERS[exponents6 + 59]
    low, high = (back * (1 - 2.0**-40)).astype(np.float32), (back * (1 + 2.0**-40)).astype(np.float32)
    kept = (low == magnitudes32) & (high == magnitudes32)
    sure = sure6 & (low == high) & (kept | sure9)
    digits6 *= 1000
    digits = np.where(kept, digits6, digits9)  # 9 digits: the value is digits * 10^(e-8)
    if exponents6 is not exponents9:
        exponents = np.where(kept, exponents6, exponents9)
    if np.count_nonzero(~nonzero):
        exponents = np.where(nonzero, exponents, 0)
        digits[~nonzero] = 0  # 0.0 and -0.0
    if isinstance(exponents, int) and -4 <= exponents < 6:
        scientific = None  # one decade, in fixed notation whatever the precision (the usual block)
    else:
        scientific = nonzero & ((exponents < -4) | (exponents >= np.where(kept, 6, 9)))

    # The 9 digits d0 d1..d8 as ASCII: d0, and d1..d8 in one word. Fixed notation with e >= 0 (-12.5): d0..de,
    # '.', then the rest; with e < 0 (0.0125): "0.", -e-1 zeros, then d0..d8; scientific (-1.5e-07): as e = 0, then
    # the exponent. Trailing zeros of the fraction go (one stays in fixed notation).
    lead = np.floor(digits * 1e-8)  # exact: 1e-8 rounds up, so no product falls below its integer
    rest = _ascii8(digits - lead * 1e8)
    head = (lead + 0x30).astype(np.uint64) | (rest << _U64(8))  # d0..d7
    significant = _significant(rest)  # of d1..d8
    # (count_nonzero: any() scans a whole array without one, ~20x slower)
    fixed = scientific is None or not np.count_nonzero(scientific)
    if fixed and (isinstance(exponents, int) or exponents.min() == exponents.max()):  # one layout for all
        exponent = int(exponents) if isinstance(exponents, int) else int(exponents[0])
        columns, too_long = _fixed_words(exponent, head, rest, significant, negative), exponent + negative > 6
    else:
        exponents = np.broadcast_to(exponents, floats.shape)
        scientific = np.zeros(floats.size, bool) if scientific is None else scientific
        columns, too_long = _mixed_words(exponents, scientific, head, rest, significant, negative)
    rows = np.empty((floats.size, len(columns) + separators.shape[-1]), np.uint64)
    for column, word in enumerate(columns):
        rows[:, column] = word
    rows[:, len(columns) :] = separators
    # one by one: NaN, infinities, what a double could not decide, and integer parts too long for one word
    for i in np.flatnonzero(~(finite & sure) | too_long).tolist():
        text = _float_text(float(floats[i]), False).encode("ascii")  # at most 15 characters
        rows[i, : len(columns)] = np.frombuffer(text.ljust(8 * len(columns), b"\0"), np.uint64)
    return rows.tobytes().translate(None, b"\0")


def _fixed_words(
    exponent: int, head: np.ndarray, rest: np.ndarray, significant: np.ndarray, negative: np.ndarray
) -> list[np.ndarray]:
    """The words of texts in fixed notation that all have this decimal exponent: d0..de, '.', then the rest
    (e >= 0: -12.5); "0.", -e-1 zeros, then d0..d8 (e < 0: 0.0125). Trailing zeros go but one after the '.'."""
    if exponent >= 0:
        exponent = min(exponent, 6)  # (7 digits or more before the '.' do not fit: written one by one)
        count = np.maximum(significant - exponent, 1)  # digits after the '.'
        integer = (head << _U64(48 - 8 * exponent)) & _INTEGER_BYTES[exponent + 1]
        return [
            integer | _POINT | (_SIGNS[exponent + 1] * negative),
            (rest >> _U64(8 * exponent)) & _LOW_BYTES[np.minimum(count, 8)],
        ]
    zeros = -exponent - 1
    count = significant + (zeros + 1)
    words = [
        _ZERO_POINT | (_SIGNS[1] * negative),
        ((head << _U64(8 * zeros)) | (_ASCII_ZEROS & _LOW_BYTES[zeros])) & _LOW_BYTES[np.minimum(count, 8)],
    ]
    if np.count_nonzero(count > 8):  # up to 12 digits after the point
        words.append((rest >> _U64(8 * (7 - zeros))) & _LOW_BYTES[np.maximum(count - 8, 0)])
    return words


def _mixed_words(
    exponents: np.ndarray,
    scientific: np.ndarray,
    head: np.ndarray,
    rest: np.ndarray,
    significant: np.ndarray,
    negative: np.ndarray,
) -> tuple[list[np.ndarray], np.ndarray]:
    """_fixed_words for texts of any exponent, and scientific notation (-1.5e-07: as e = 0, then the exponent);
    and which texts have an integer part too long for one word."""
    layout = np.where(scientific, 0, exponents)
    whole = np.maximum(layout, 0)  # e: the digits before the '.' are d0..de ("0" for e < 0)
    zeros = np.maximum(-layout - 1, 0).astype(np.uint64)  # after the '.', for e < 0
    below = layout < 0
    count = np.where(below, zeros.astype(np.int64) + 1 + significant, np.maximum(significant - whole, 1))
    count[scientific] = significant[scientific]  # digits after the '.'
    integer = np.where(below, _U64(0x30), head)
    shift = (whole * 8).astype(np.uint64)
    columns = [
        ((integer << (_U64(48) - shift)) & _INTEGER_BYTES[np.minimum(whole + 1, 7)])
        | np.where(count > 0, _POINT, _U64(0))
        | (_SIGNS[np.minimum(whole + 1, 7)] * negative),
        np.where(below, (head << (zeros * _U64(8))) | (_ASCII_ZEROS & _LOW_BYTES[zeros]), rest >> shift)
        & _LOW_BYTES[np.minimum(count, 8)],
    ]
    if np.count_nonzero(count > 8):  # e < 0: up to 12 digits after the point
        columns.append((rest >> ((_U64(7) - zeros) * _U64(8))) & _LOW_BYTES[np.maximum(count - 8, 0)])
    if np.count_nonzero(scientific):
        columns.append(np.where(scientific, _EXPONENTS[np.minimum(np.maximum(exponents, -64), 63) + 64], _U64(0)))
    return columns, whole + negative > 6


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
    assert isinstance(exponent, int)  # (a finite value)
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
