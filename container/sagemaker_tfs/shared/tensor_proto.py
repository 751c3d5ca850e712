"""TensorFlow Serving's PredictRequest and PredictResponse in protobuf's wire format, to and from numpy arrays.

Written by hand rather than through tensorflow-serving-api's classes for two reasons. Where TensorFlow is installed
(a laptop, CI), importing those classes imports TensorFlow itself (seconds and hundreds of MB in each gunicorn
worker), and the app must never do that. And a tensor's bytes go through untouched: an array's buffer is one slice
of the request (`tensor_content`), and an answer's packed values become an array with one `numpy.frombuffer`,
whether the model server wrote them as `tensor_content` (the embedded one with large tensors) or as packed typed
fields (`float_val`, ...: what tensorflow_model_server writes). Only the fields those messages need are read; an
unknown field is skipped, as protobuf does. test/unit/test_tensor_proto.py checks both directions against
tensorflow-serving-api's own classes.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from . import dtypes

# wire types
_VARINT, _FIXED64, _LEN, _START_GROUP, _END_GROUP, _FIXED32 = 0, 1, 2, 3, 4, 5
# TensorProto's fields
_DTYPE, _SHAPE, _CONTENT, _STRING_VAL = 1, 2, 4, 8
_DIM, _DIM_SIZE = 2, 1  # TensorShapeProto.dim, TensorShapeProto.Dim.size
# the typed value fields: field number -> (how each value is stored, numpy dtype of the stored values)
_FLOAT_VAL, _DOUBLE_VAL, _INT_VAL, _SCOMPLEX_VAL, _INT64_VAL, _BOOL_VAL = 5, 6, 7, 9, 10, 11
_DCOMPLEX_VAL, _HALF_VAL, _UINT32_VAL, _UINT64_VAL = 12, 13, 16, 17
_TYPED = {
    _FLOAT_VAL: (_FIXED32, "<f4"),
    _DOUBLE_VAL: (_FIXED64, "<f8"),
    _SCOMPLEX_VAL: (_FIXED32, "<f4"),
    _DCOMPLEX_VAL: (_FIXED64, "<f8"),
    _INT_VAL: (_VARINT, None),
    _INT64_VAL: (_VARINT, None),
    _BOOL_VAL: (_VARINT, None),
    _HALF_VAL: (_VARINT, None),
    _UINT32_VAL: (_VARINT, None),
    _UINT64_VAL: (_VARINT, None),
}
# the typed field TensorFlow reads each dtype's values from (the others are ignored, as it ignores them)
_FIELD_OF_DTYPE = {
    dtypes.DT_FLOAT: _FLOAT_VAL,
    dtypes.DT_DOUBLE: _DOUBLE_VAL,
    **dict.fromkeys((dtypes.DT_INT32, dtypes.DT_UINT8, dtypes.DT_INT16, dtypes.DT_INT8, dtypes.DT_UINT16), _INT_VAL),
    dtypes.DT_INT64: _INT64_VAL,
    dtypes.DT_BOOL: _BOOL_VAL,
    dtypes.DT_HALF: _HALF_VAL,
    dtypes.DT_UINT32: _UINT32_VAL,
    dtypes.DT_UINT64: _UINT64_VAL,
    dtypes.DT_COMPLEX64: _SCOMPLEX_VAL,
    dtypes.DT_COMPLEX128: _DCOMPLEX_VAL,
}
_MASK64, _MASK32 = (1 << 64) - 1, (1 << 32) - 1
_MAX_ELEMENTS = (1 << 63) - 1  # TensorFlow's TensorShape limit
# TensorFlow Serving writes every value of a tensor: a typed field shorter than its shape is a constant, which a
# few bytes would blow up to any size; past this it is refused
MAX_PADDED_BYTES = 1 << 26


class WireError(ValueError):
    """Bytes that are not the message they should be, or a tensor type numpy cannot hold."""


# ---- writing ----


def _varint(value: int) -> bytes:
    value &= _MASK64  # negative int64 values take ten bytes, as protobuf writes them
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _message(field: int, parts: list) -> list:
    """A length-delimited field around `parts` (bytes-like), still as parts: big payloads are copied once, by
    the final join."""
    return [_key(field, _LEN), _varint(sum(len(p) for p in parts)), *parts]


def _string(field: int, text: str | bytes) -> list:
    return _message(field, [text.encode() if isinstance(text, str) else text])


def tensor_parts(array: np.ndarray) -> list:
    """A TensorProto of the array: numbers and booleans as little-endian `tensor_content` (C order, whatever the
    array's order and byte order), strings as `string_val` (unicode as UTF-8)."""
    shape = [part for size in array.shape for part in _message(_DIM, [_key(_DIM_SIZE, _VARINT), _varint(size)])]
    kind = array.dtype.kind
    head = [_key(_DTYPE, _VARINT), _varint(dtypes.from_numpy(array.dtype.newbyteorder("="))), *_message(_SHAPE, shape)]
    if kind in "OSU":
        values = [v if isinstance(v, bytes) else str(v).encode() for v in array.reshape(-1).tolist()]
        return head + [part for value in values for part in _string(_STRING_VAL, value)]
    little = array.dtype.newbyteorder("<")
    content = np.ascontiguousarray(array, dtype=little).reshape(-1).view(np.uint8).data
    return head + _message(_CONTENT, [content])


def predict_request(
    model_name: str, inputs: Mapping[str, np.ndarray], version: int | None = None, signature_name: str | None = None
) -> bytes:
    """A serialized PredictRequest."""
    spec = _string(1, model_name)
    if version is not None:
        spec += _message(2, [_key(1, _VARINT), _varint(version)])  # google.protobuf.Int64Value
    if signature_name:
        spec += _string(3, signature_name)
    parts = _message(1, spec)
    for alias, array in inputs.items():
        parts += _message(2, _string(1, alias) + _message(2, tensor_parts(array)))  # map<string, TensorProto>
    return b"".join(parts)


# ---- reading ----


def _read_varint(data: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        try:
            byte = data[pos]
        except IndexError:
            raise WireError("truncated varint") from None
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result & _MASK64, pos  # a tenth byte's bits past 64 are dropped, as protobuf drops them
        shift += 7
        if shift > 63:
            raise WireError("varint too long")


def _skip_group(data: memoryview, pos: int, field: int) -> int:
    """The position after the group `field` that starts at pos (an unknown field of the deprecated group wire
    types, which protobuf skips), groups nested in it included."""
    open_groups, end = [field], len(data)
    while open_groups:
        if pos >= end:
            raise WireError("truncated group")
        key, pos = _read_varint(data, pos)
        field, wire = key >> 3, key & 7
        if wire == _VARINT:
            pos = _read_varint(data, pos)[1]
        elif wire in (_FIXED32, _FIXED64):
            pos += 4 if wire == _FIXED32 else 8
        elif wire == _LEN:
            length, pos = _read_varint(data, pos)
            pos += length
        elif wire == _START_GROUP:
            open_groups.append(field)
        elif wire == _END_GROUP and open_groups.pop() != field:
            raise WireError("mismatched end group")
        elif wire > _FIXED32:
            raise WireError(f"unsupported wire type {wire}")
        if pos > end:
            raise WireError("truncated field")
    return pos


def _fields(data: memoryview) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value) of each field: an int, or the bytes of a length-delimited field or of a
    fixed-width value (a memoryview), as the wire type says. Groups are skipped."""
    pos, end = 0, len(data)
    while pos < end:
        key, pos = _read_varint(data, pos)
        field, wire = key >> 3, key & 7
        value: Any
        if wire == _START_GROUP:
            pos = _skip_group(data, pos, field)
            continue
        if wire == _VARINT:
            value, pos = _read_varint(data, pos)
        elif wire in (_LEN, _FIXED32, _FIXED64):
            if wire == _LEN:
                length, pos = _read_varint(data, pos)
            else:
                length = 4 if wire == _FIXED32 else 8
            if pos + length > end:
                raise WireError("truncated field")
            value, pos = data[pos : pos + length], pos + length
        else:
            raise WireError(f"unsupported wire type {wire}")
        yield field, wire, value


def _signed(value: int) -> int:
    return value - (1 << 64) if value >> 63 else value


def _varints(payload: memoryview) -> np.ndarray:
    """The values of a packed varint field as uint64, decoded with whole-array operations."""
    raw = np.frombuffer(payload, np.uint8)
    if not raw.size:
        return np.zeros(0, np.uint64)
    ends = np.flatnonzero(raw < 0x80)
    if ends.size == 0 or ends[-1] != raw.size - 1:
        raise WireError("truncated packed varints")
    starts = np.concatenate(([0], ends[:-1] + 1)).astype(np.intp)
    if ends.size and (ends - starts).max() > 9:
        raise WireError("varint too long")
    position = np.arange(raw.size) - np.repeat(starts, ends - starts + 1)
    bits = (raw & 0x7F).astype(np.uint64) << (7 * position).astype(np.uint64)
    return np.add.reduceat(bits, starts)


def _typed_values(field: int, chunks: list) -> np.ndarray:
    """The values of a typed field, from its chunks: packed payloads or single values (memoryview: the bytes of
    either; int: a single varint)."""
    wire, stored = _TYPED[field]
    if wire == _VARINT:
        arrays = [_varints(c) if isinstance(c, memoryview) else np.array([c], np.uint64) for c in chunks]
    else:
        width = np.dtype(stored).itemsize
        if any(len(c) % width for c in chunks):
            raise WireError(f"packed field {field} of {sum(map(len, chunks))} bytes, not {width}-byte values")
        arrays = [np.frombuffer(c, stored).copy() for c in chunks]  # aligned and writable, not the message's bytes
    return np.concatenate(arrays) if len(arrays) != 1 else arrays[0]


def _as(values: np.ndarray, field: int, dtype: np.dtype) -> np.ndarray:
    """Stored values as the tensor's dtype (varints are two's complement 64-bit; half_val holds the bits)."""
    if field == _HALF_VAL:
        return values.astype(np.uint16).view(np.float16)
    if field in (_SCOMPLEX_VAL, _DCOMPLEX_VAL):  # real and imaginary parts interleaved (an odd last one: ignored)
        return values[: values.size // 2 * 2].view(dtype)
    if values.dtype == np.uint64 and dtype.kind == "i":
        values = values.view(np.int64)
    return values.astype(dtype, copy=False)


def tensor_array(data: memoryview) -> np.ndarray:
    """A serialized TensorProto as a numpy array. As TensorFlow reads one: `tensor_content` when present, else the
    typed field of its dtype, a shorter one padded with its last value (zeros when empty). A field of the wrong
    wire type is skipped, as protobuf skips it. WireError for a type numpy has no equal of (bfloat16, the quantized
    types, resources, variants), an unknown (negative) size, a shape of more elements than TensorFlow's limit, and
    a typed field that would be padded by more than MAX_PADDED_BYTES."""
    dtype_number, dims, content, strings = 0, [], None, []
    typed: dict[int, list[Any]] = {}
    for field, wire, value in _fields(data):
        if field == _DTYPE and wire == _VARINT:
            dtype_number = value & _MASK32  # an enum: protobuf keeps the low 32 bits
        elif field == _SHAPE and wire == _LEN:
            for dim_field, dim_wire, dim in _fields(value):
                if dim_field == _DIM and dim_wire == _LEN:
                    size = 0
                    for size_field, size_wire, number in _fields(dim):
                        if size_field == _DIM_SIZE and size_wire == _VARINT:
                            size = _signed(number)
                    dims.append(size)
        elif field == _CONTENT and wire == _LEN:
            content = value
        elif field == _STRING_VAL and wire == _LEN:
            strings.append(bytes(value))
        elif field in _TYPED and wire in (_TYPED[field][0], _LEN):  # a single value, or packed ones
            typed.setdefault(field, []).append(value)
    dtype = dtypes.to_numpy(dtype_number)
    if dtype is None:
        raise WireError(f"a tensor of type {dtypes.enum_name(dtype_number)} cannot be a numpy array")
    if any(size < 0 for size in dims):
        raise WireError(f"a tensor of unknown shape {dims}")
    count = math.prod(dims)
    if count > _MAX_ELEMENTS:
        raise WireError(f"a tensor of shape {dims} has more than {_MAX_ELEMENTS} elements")
    if dtype.kind == "O":
        values = np.empty(len(strings), dtype=object)
        values[:] = strings
    elif content:  # (empty bytes are protobuf's default: not there)
        if len(content) != count * dtype.itemsize:
            raise WireError(f"tensor_content holds {len(content)} bytes, not {count} x {dtype.itemsize}")
        return np.frombuffer(content, dtype.newbyteorder("<")).astype(dtype).reshape(dims)  # a writable copy
    else:
        field = _FIELD_OF_DTYPE[dtype_number]
        values = _as(_typed_values(field, typed[field]), field, dtype) if field in typed else np.zeros(0, dtype)
    if values.size != count:
        if values.size > count:
            raise WireError(f"a tensor of {count} values holds {values.size}")
        if (count - values.size) * dtype.itemsize > MAX_PADDED_BYTES:
            raise WireError(
                f"a tensor of shape {dims} holds {values.size} values: padded, more than {MAX_PADDED_BYTES} bytes"
            )
        padded = np.empty(count, dtype)  # (not np.full: it would read a string fill as numpy bytes, less its NULs)
        padded[: values.size] = values
        padded[values.size :] = [values[-1] if values.size else (b"" if dtype.kind == "O" else 0)]
        values = padded
    return values.reshape(dims)


def predict_outputs(data: bytes) -> dict[str, np.ndarray]:
    """The outputs of a serialized PredictResponse, by alias."""
    outputs = {}
    for field, wire, entry in _fields(memoryview(data)):
        if field == 1 and wire == _LEN:  # map<string, TensorProto> outputs
            alias, tensor = "", []
            for entry_field, entry_wire, value in _fields(entry):
                if entry_field == 1 and entry_wire == _LEN:
                    alias = bytes(value).decode("utf-8", "replace")
                elif entry_field == 2 and entry_wire == _LEN:
                    tensor.append(value)  # a message given twice is merged: read as their concatenation
            outputs[alias] = tensor_array(tensor[0] if len(tensor) == 1 else memoryview(b"".join(tensor)))
    return outputs
