"""The protobuf wire format of TensorProto and PredictResponse/PredictRequest (shared/tensor_proto.py) against
tensorflow-serving-api's classes and TensorFlow's tf.make_ndarray.

data[0] picks the mode. Reading (even bytes): the rest is a PredictResponse (or a lone TensorProto) read by ours and
by protobuf + make_ndarray. Where both read it, the same arrays (dtype, shape, bits). Where ours raises WireError,
the reference must refuse it too, or it must be a case the module documents as unsupported: a dtype numpy has no
equal of, or a shape with a negative (unknown) size, which make_ndarray's reshape would infer. Where the reference
refuses what ours reads: protobuf's parse may be stricter than ours (field number 0, invalid UTF-8 in a map key),
and make_ndarray raises for values TensorFlow's C++ casts (an int_val beyond int8: wrapped as a C++ cast does,
half_val's high bits dropped) and for string tensors in tensor_content (TensorFlow's own string encoding, which
ours does not read: it reads their string_val). Any other exception is a finding.
Writing (odd bytes): an array made from the rest (dtype, shape, byte order, layout from its first bytes) as a
PredictRequest, which protobuf must parse to the same model spec and make_ndarray to the same array.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError
from sagemaker_tfs.shared import dtypes, tensor_proto
from tensorflow.core.framework import tensor_pb2
from tensorflow.python.framework.tensor_util import MakeNdarray  # tf.make_ndarray, without tf's lazy loader
from tensorflow_serving.apis import predict_pb2

MODULES = ("sagemaker_tfs.shared.tensor_proto",)
MAX_LEN = 1024
_MAX_ELEMENTS = 1 << 16  # a shape that asks for more is refused before any array is made


def _outputs_class() -> Any:
    """PredictResponse's outputs as the repeated entries a map is on the wire. (upb moves a map entry that holds an
    unknown field to the unknown fields, where TensorFlow Serving's C++ reads the entry and skips the field.)"""
    field = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="fuzz/predict_outputs.proto", package="fuzz", syntax="proto3")
    file.dependency.append(tensor_pb2.DESCRIPTOR.name)
    entry = file.message_type.add(name="OutputsEntry")
    entry.field.add(name="key", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=field.TYPE_MESSAGE, type_name=".tensorflow.TensorProto")
    outputs = file.message_type.add(name="PredictOutputs")
    outputs.field.add(name="outputs", number=1, type=field.TYPE_MESSAGE, type_name=".fuzz.OutputsEntry")
    outputs.field[0].label = field.LABEL_REPEATED
    pool = descriptor_pool.Default()
    pool.AddSerializedFile(file.SerializeToString())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("fuzz.PredictOutputs"))


_OUTPUTS = _outputs_class()


def _same(actual: np.ndarray, expected: np.ndarray, nan_bits: bool = True) -> None:
    """The same arrays to the bit; with nan_bits=False a NaN is any NaN (make_ndarray reads float_val through
    Python floats, which make a signalling NaN quiet)."""
    assert (actual.dtype, actual.shape) == (expected.dtype, expected.shape), (actual, expected)
    if expected.dtype == object:
        assert actual.tolist() == expected.tolist(), (actual, expected)
        return
    if not nan_bits and expected.dtype.kind in "fc":
        parts = np.dtype(expected.dtype.char.lower())  # a complex number's parts
        actual, expected = actual.reshape(-1).view(parts), expected.reshape(-1).view(parts)
        nan = np.isnan(expected)
        assert np.array_equal(np.isnan(actual), nan), (actual, expected)
        actual, expected = actual[~nan], expected[~nan]
    assert actual.tobytes() == expected.tobytes(), (actual, expected)


def _element_count(tensor: tensor_pb2.TensorProto) -> int:
    count = 1
    for dim in tensor.tensor_shape.dim:
        count *= max(dim.size, 0)
    return count


def _unsupported(tensor: tensor_pb2.TensorProto) -> bool:
    """What the module documents it cannot read: a dtype numpy cannot hold, an unknown (negative) size."""
    return dtypes.to_numpy(tensor.dtype) is None or any(dim.size < 0 for dim in tensor.tensor_shape.dim)


def _reference_refuses_what_tensorflow_reads(tensor: tensor_pb2.TensorProto, refusal: Exception) -> bool:
    """make_ndarray's refusals that TensorFlow's C++ (and ours) read: typed values out of the dtype's range, which
    C++ casts (np.fromiter: OverflowError); string tensors in tensor_content (TensorFlow's own string encoding: ours
    reads their string_val)."""
    if tensor.tensor_content:
        return tensor.dtype == dtypes.DT_STRING
    return isinstance(refusal, OverflowError)


def _reference(tensor: tensor_pb2.TensorProto) -> np.ndarray | Exception:
    if _element_count(tensor) > _MAX_ELEMENTS:
        return MemoryError("a shape of too many elements")
    try:
        array = np.asarray(MakeNdarray(tensor))
    except (ValueError, TypeError, OverflowError, KeyError) as exc:  # KeyError: a dtype numpy has no equal of
        return exc
    if array.dtype == object:  # make_ndarray pads an empty string_val with the str "", TensorFlow with b""
        array = np.array([v.encode() if isinstance(v, str) else v for v in array.reshape(-1).tolist()] + [None])
        array = array[:-1].reshape(MakeNdarray(tensor).shape)
    return array


def _compare(ours: dict[str, np.ndarray] | tensor_proto.WireError, tensors: dict[str, tensor_pb2.TensorProto]) -> None:
    references = {alias: _reference(tensor) for alias, tensor in tensors.items()}
    if isinstance(ours, tensor_proto.WireError):
        refused = [alias for alias, reference in references.items() if isinstance(reference, Exception)]
        assert refused or any(map(_unsupported, tensors.values())), (ours, references)
        return
    assert sorted(ours) == sorted(references), (list(ours), list(references))  # (a map: in no set order)
    for alias, reference in references.items():
        if isinstance(reference, Exception):
            assert _reference_refuses_what_tensorflow_reads(tensors[alias], reference), (alias, reference, ours[alias])
        else:
            _same(ours[alias], reference.astype(reference.dtype.newbyteorder("=")), bool(tensors[alias].tensor_content))


def _read(data: bytes, lone: bool) -> None:
    try:
        if lone:
            ours: dict[str, np.ndarray] | tensor_proto.WireError = {"": tensor_proto.tensor_array(memoryview(data))}
        else:
            ours = tensor_proto.predict_outputs(data)
    except tensor_proto.WireError as exc:
        ours = exc
    except MemoryError:
        return  # a shape past the memory (the fuzzer's rss limit finds a blow-up short of that)
    try:
        if lone:
            tensors = {"": tensor_pb2.TensorProto.FromString(data)}
        else:
            predict_pb2.PredictResponse.FromString(data)  # the reference refuses what this refuses
            tensors = {entry.key: entry.value for entry in _OUTPUTS.FromString(data).outputs}  # the last one wins
    except DecodeError:
        return  # protobuf refuses it: ours may read or refuse it
    if not isinstance(ours, Exception) and any(_element_count(t) > _MAX_ELEMENTS for t in tensors.values()):
        return
    _compare(ours, tensors)


_WRITTEN = [np.float32, np.float64, np.int32, np.uint8, np.int16, np.int8, np.int64, np.bool_, np.uint16]
_WRITTEN += [np.float16, np.uint32, np.uint64, np.complex64, np.complex128, object]


def _array(data: bytes) -> np.ndarray:
    """data[0]: dtype; data[1]: rank (0-3) and byte order, layout; data[2:2+rank]: dimensions; then the values."""
    dtype = np.dtype(_WRITTEN[data[0] % len(_WRITTEN)])
    rank, swapped, fortran = data[1] % 4, bool(data[1] & 4), bool(data[1] & 8)
    shape = tuple(size % 5 for size in data[2 : 2 + rank])
    rest, count = data[2 + rank :], int(np.prod(shape, dtype=np.int64))
    if dtype.kind == "O":
        parts = rest.split(b",") * count
        strings = np.empty(count, object)
        strings[:] = (parts + [b""] * count)[:count]
        return strings.reshape(shape)
    raw = (rest * count)[: count * dtype.itemsize].ljust(count * dtype.itemsize, b"\0")
    array: np.ndarray = np.frombuffer(raw, dtype).reshape(shape)
    if dtype == np.bool_:
        array = array.view(np.uint8) != 0  # numpy's booleans are 0 or 1 bytes
    if swapped and dtype.itemsize > 1:
        array = array.astype(dtype.newbyteorder(">"))
    return np.asfortranarray(array) if fortran else array


def _write(data: bytes) -> None:
    if len(data) < 3:
        return
    name, signature = data[:1].hex(), data[1:2].hex() if data[1] & 1 else ""
    version = data[2] if data[2] & 1 else None
    array = _array(data[3:].ljust(2, b"\0"))
    sliced = array[::2] if array.ndim else array  # a non-contiguous view
    body = tensor_proto.predict_request(name, {"x": array, "y": sliced}, version=version, signature_name=signature)
    request = predict_pb2.PredictRequest.FromString(body)
    spec = request.model_spec
    assert (spec.name, spec.signature_name) == (name, signature), spec
    assert spec.HasField("version") == (version is not None) and spec.version.value == (version or 0), spec
    assert sorted(request.inputs) == ["x", "y"]
    for alias, written in (("x", array), ("y", sliced)):
        tensor, expected = request.inputs[alias], written.astype(written.dtype.newbyteorder("="))
        assert tensor.dtype == dtypes.from_numpy(expected.dtype), tensor
        reference = MakeNdarray(tensor)
        if expected.dtype == object:
            assert list(tensor.string_val) == expected.reshape(-1).tolist() and reference.shape == expected.shape
        else:
            _same(reference, expected)
        _same(tensor_proto.tensor_array(memoryview(tensor.SerializeToString())), expected)  # and ours reads it back


def one_input(data: bytes) -> None:
    if not data:
        return
    if data[0] & 1:
        _write(data[1:])
    else:
        _read(data[1:], lone=bool(data[0] & 2))


def seeds() -> list[bytes]:
    """Answers and requests as test/unit/test_tensor_proto.py makes them: tensor_content and typed fields."""
    response = predict_pb2.PredictResponse()
    response.model_spec.name = "m"
    content = response.outputs["y"]
    content.dtype, content.tensor_content = dtypes.DT_FLOAT, np.arange(6, dtype=np.float32).tobytes()
    content.tensor_shape.dim.add(size=2)
    content.tensor_shape.dim.add(size=3)
    typed = {
        "float_val": (1, [float("nan"), -0.0, 1.5]),
        "double_val": (2, [float("-inf"), 3e-39]),
        "int_val": (3, [-(2**31), 2**31 - 1]),
        "int64_val": (9, [-(2**63), 2**63 - 1]),
        "bool_val": (10, [True, False]),
        "half_val": (19, [0x3E00, 0xC000]),
        "uint32_val": (22, [2**32 - 1]),
        "uint64_val": (23, [2**64 - 1]),
        "scomplex_val": (8, [1.0, 2.0]),
        "dcomplex_val": (18, [1.0, -3.5]),
        "string_val": (7, [b"a", b"\xff"]),
    }
    for field, (dtype, values) in typed.items():
        tensor = response.outputs[field]
        tensor.dtype = dtype
        tensor.tensor_shape.dim.add(size=4)  # shorter typed fields: the last value repeats
        getattr(tensor, field).extend(values)
    tensors = [t.SerializeToString() for t in response.outputs.values()]
    empty = tensor_pb2.TensorProto(dtype=14).SerializeToString()  # bfloat16
    written = [b"\x01m\x01\x01\x00\x02\x02\x03" + bytes(range(24)), b"\x01m\x00\x00\x0e\x01\x03ab,\xff"]
    written.append(b"\x01xyz\x07\x00")
    return [b"\x00" + response.SerializeToString(), b"\x00" + empty, *(b"\x02" + t for t in tensors), *written]
