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

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from . import dtypes

# wire types
_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5
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
_MASK64 = (1 << 64) - 1


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
            return result, pos
        shift += 7
        if shift > 63:
            raise WireError("varint too long")


def _fields(data: memoryview) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value) of each field: an int, or the bytes of a length-delimited field or of a
    fixed-width value (a memoryview), as the wire type says."""
    pos, end = 0, len(data)
    while pos < end:
        key, pos = _read_varint(data, pos)
        field, wire = key >> 3, key & 7
        value: Any
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
    ends = np.flatnonzero(raw < 0x80)
    if raw.size and (ends.size == 0 or ends[-1] != raw.size - 1):
        raise WireError("truncated packed varints")
    starts = np.concatenate(([0], ends[:-1] + 1)).astype(np.intp)
    if ends.size and (ends - starts).max() > 9:
        raise WireError("varint too long")
    position = np.arange(raw.size) - np.repeat(starts, ends - starts + 1)
    bits = (raw & 0x7F).astype(np.uint64) << (7 * position).astype(np.uint64)
    return np.add.reduceat(bits, starts) if raw.size else np.zeros(0, np.uint64)


def _typed_values(field: int, chunks: list) -> np.ndarray:
    """The values of a typed field, from its chunks: packed payloads (memoryview) or single values (int, or the
    bytes of a fixed-width value)."""
    wire, stored = _TYPED[field]
    if wire == _VARINT:
        arrays = [_varints(c) if isinstance(c, memoryview) else np.array([c], np.uint64) for c in chunks]
    else:
        arrays = [np.frombuffer(c, stored).copy() for c in chunks]  # aligned and writable, not the message's bytes
    return np.concatenate(arrays) if len(arrays) != 1 else arrays[0]


def _as(values: np.ndarray, field: int, dtype: np.dtype) -> np.ndarray:
    """Stored values as the tensor's dtype (varints are two's complement 64-bit; half_val holds the bits)."""
    if field == _HALF_VAL:
        return values.astype(np.uint16).view(np.float16)
    if field in (_SCOMPLEX_VAL, _DCOMPLEX_VAL):
        return values.view(dtype)  # real and imaginary parts interleaved
    if values.dtype == np.uint64 and dtype.kind == "i":
        values = values.view(np.int64)
    return values.astype(dtype, copy=False)


def tensor_array(data: memoryview) -> np.ndarray:
    """A serialized TensorProto as a numpy array. As TensorFlow reads one: `tensor_content` when present, else the
    typed field, a shorter one padded with its last value (zeros when empty). WireError for a type numpy has no
    equal of (bfloat16, the quantized types, resources, variants)."""
    dtype_number, dims, content, strings = 0, [], None, []
    typed: dict[int, list[Any]] = {}
    for field, wire, value in _fields(data):
        if field == _DTYPE and wire == _VARINT:
            dtype_number = value
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
        elif field in _TYPED:
            typed.setdefault(field, []).append(value)
    dtype = dtypes.to_numpy(dtype_number)
    if dtype is None:
        raise WireError(f"a tensor of type {dtypes.enum_name(dtype_number)} cannot be a numpy array")
    if any(size < 0 for size in dims):
        raise WireError(f"a tensor of unknown shape {dims}")
    count = int(np.prod(dims, dtype=np.int64))
    if dtype.kind == "O":
        values = np.empty(len(strings), dtype=object)
        values[:] = strings
    elif content is not None:
        if len(content) != count * dtype.itemsize:
            raise WireError(f"tensor_content holds {len(content)} bytes, not {count} x {dtype.itemsize}")
        return np.frombuffer(content, dtype.newbyteorder("<")).astype(dtype).reshape(dims)  # a writable copy
    else:
        first = next(iter(typed), None)
        values = _as(_typed_values(first, typed[first]), first, dtype) if first else np.zeros(0, dtype)
    if values.size != count:
        if values.size > count:
            raise WireError(f"a tensor of {count} values holds {values.size}")
        fill = values[-1] if values.size else (b"" if dtype.kind == "O" else 0)
        values = np.concatenate((values, np.full(count - values.size, fill, dtype=dtype)))
    return values.reshape(dims)


def predict_outputs(data: bytes) -> dict[str, np.ndarray]:
    """The outputs of a serialized PredictResponse, by alias."""
    outputs = {}
    for field, wire, entry in _fields(memoryview(data)):
        if field == 1 and wire == _LEN:  # map<string, TensorProto> outputs
            alias, tensor = "", memoryview(b"")
            for entry_field, entry_wire, value in _fields(entry):
                if entry_field == 1 and entry_wire == _LEN:
                    alias = bytes(value).decode("utf-8", "replace")
                elif entry_field == 2 and entry_wire == _LEN:
                    tensor = value
            outputs[alias] = tensor_array(tensor)
    return outputs
