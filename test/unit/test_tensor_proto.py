"""shared/tensor_proto.py, the hand-written wire format of PredictRequest and PredictResponse, against
tensorflow-serving-api's own classes: what it writes they read as the same request, and what they write (either
way TensorFlow stores values: tensor_content or the typed fields) it reads as the same arrays."""

from __future__ import annotations

import numpy as np
import pytest
from sagemaker_tfs.shared import dtypes, tensor_proto
from tensorflow.core.framework import tensor_pb2, types_pb2
from tensorflow_serving.apis import predict_pb2

RNG = np.random.default_rng(35)

ARRAYS = {
    "float32 2-d": RNG.standard_normal((3, 4)).astype(np.float32),
    "float64 with NaN, infinities and -0.0": np.array([np.nan, np.inf, -np.inf, -0.0, 1e-310, 1.5e300]),
    "big-endian int32": np.arange(-6, 6, dtype=">i4").reshape(3, 4),
    "Fortran-order float64": np.asfortranarray(RNG.standard_normal((4, 5))),
    "a non-contiguous slice": RNG.standard_normal((6, 6)).astype(np.float32)[::2, 1::3],
    "int64 beyond 32 bits": np.array([-(2**63), -1, 2**40, 2**63 - 1], dtype=np.int64),
    "int8": np.array([-128, -1, 0, 127], dtype=np.int8),
    "uint8 image": RNG.integers(0, 256, (2, 5, 5, 3), dtype=np.uint8),
    "uint16": np.array([0, 65535], dtype=np.uint16),
    "uint32": np.array([0, 2**32 - 1], dtype=np.uint32),
    "uint64": np.array([0, 2**64 - 1], dtype=np.uint64),
    "bool": np.array([[True, False], [False, True]]),
    "float16 0-d": np.array(3.5, dtype=np.float16),
    "complex64": np.array([1 + 2j, -3.5j], dtype=np.complex64),
    "complex128": np.array([1e300 + 1j]),
    "empty": np.zeros((0, 3), dtype=np.float32),
}


def _same(actual: np.ndarray, expected: np.ndarray) -> None:
    assert actual.dtype == expected.dtype.newbyteorder("=") and actual.shape == expected.shape
    assert actual.tobytes() == np.ascontiguousarray(expected, dtype=actual.dtype).tobytes()


@pytest.mark.parametrize("array", ARRAYS.values(), ids=ARRAYS.keys())
def test_a_request_reads_back_as_the_same_array_in_tensorflow_serving_apis_classes(array):
    import tensorflow as tf

    request = predict_pb2.PredictRequest.FromString(
        tensor_proto.predict_request("m", {"x": array, "y": array[..., None]}, version=7, signature_name="s")
    )
    assert (request.model_spec.name, request.model_spec.version.value, request.model_spec.signature_name) == (
        "m",
        7,
        "s",
    )
    assert set(request.inputs) == {"x", "y"}
    _same(tf.make_ndarray(request.inputs["x"]), array)
    _same(tf.make_ndarray(request.inputs["y"]), array[..., None])


def test_a_request_without_version_or_signature_leaves_them_unset():
    request = predict_pb2.PredictRequest.FromString(tensor_proto.predict_request("m", {"x": np.ones(2)}))
    assert not request.model_spec.HasField("version") and request.model_spec.signature_name == ""


def test_strings_go_as_utf8_string_values():
    request = predict_pb2.PredictRequest.FromString(
        tensor_proto.predict_request("m", {"s": np.array([["a", "é"]]), "b": np.array([b"\x00\xff"], dtype=object)})
    )
    assert request.inputs["s"].dtype == types_pb2.DT_STRING
    assert list(request.inputs["s"].string_val) == [b"a", "é".encode()]
    assert [d.size for d in request.inputs["s"].tensor_shape.dim] == [1, 2]
    assert list(request.inputs["b"].string_val) == [b"\x00\xff"]


@pytest.mark.parametrize("array", ARRAYS.values(), ids=ARRAYS.keys())
def test_an_answer_in_tensor_content_reads_as_the_same_array(array):
    import tensorflow as tf

    response = predict_pb2.PredictResponse()
    response.outputs["y"].CopyFrom(tf.make_tensor_proto(array.astype(array.dtype.newbyteorder("="))))
    response.model_spec.name = "m"
    outputs = tensor_proto.predict_outputs(response.SerializeToString())
    assert list(outputs) == ["y"]
    _same(outputs["y"], array)
    assert outputs["y"].flags.writeable


# Each dtype in the typed field tensorflow_model_server writes it in (TensorFlow's Tensor::AsProtoField).
TYPED = [
    (np.float32, "float_val"),
    (np.float64, "double_val"),
    (np.int32, "int_val"),
    (np.int16, "int_val"),
    (np.int8, "int_val"),
    (np.uint8, "int_val"),
    (np.uint16, "int_val"),
    (np.int64, "int64_val"),
    (np.uint32, "uint32_val"),
    (np.uint64, "uint64_val"),
    (np.bool_, "bool_val"),
]


@pytest.mark.parametrize("dtype, field", TYPED, ids=[np.dtype(d).name for d, _ in TYPED])
def test_an_answer_in_typed_fields_reads_as_the_same_array(dtype, field):
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else None
    if info is not None:
        values = np.array([info.min, -1 if info.min < 0 else 1, 0, info.max, 5, 6], dtype=dtype)
    elif dtype is np.bool_:
        values = np.array([True, False, True, True, False, False])
    else:
        values = np.array([np.nan, -np.inf, -0.0, 1.5, 3e-39, 7.0], dtype=dtype)
    tensor = tensor_pb2.TensorProto(dtype=dtypes.from_numpy(dtype))
    tensor.tensor_shape.dim.add(size=2)
    tensor.tensor_shape.dim.add(size=3)
    getattr(tensor, field).extend(values.tolist())
    response = predict_pb2.PredictResponse()
    response.outputs["y"].CopyFrom(tensor)
    _same(tensor_proto.predict_outputs(response.SerializeToString())["y"], values.reshape(2, 3))


def test_half_values_and_strings_and_short_typed_fields_read_as_tensorflow_reads_them():
    import tensorflow as tf

    response = predict_pb2.PredictResponse()
    half = response.outputs["half"]
    half.dtype = types_pb2.DT_HALF
    half.tensor_shape.dim.add(size=2)
    half.half_val.extend(np.array([1.5, -2.0], np.float16).view(np.uint16).tolist())
    response.outputs["strings"].CopyFrom(tf.make_tensor_proto(np.array([b"a", b"\xff"], dtype=object)))
    filled = response.outputs["filled"]  # a typed field shorter than the shape: its last value repeats
    filled.dtype = types_pb2.DT_FLOAT
    filled.tensor_shape.dim.add(size=4)
    filled.float_val.extend([1.0, 2.0])
    outputs = tensor_proto.predict_outputs(response.SerializeToString())
    assert outputs["half"].dtype == np.float16 and outputs["half"].tolist() == [1.5, -2.0]
    assert outputs["strings"].dtype == object and outputs["strings"].tolist() == [b"a", b"\xff"]
    assert outputs["filled"].tolist() == tf.make_ndarray(filled).tolist() == [1.0, 2.0, 2.0, 2.0]


def test_types_numpy_cannot_hold_and_broken_bytes_are_wire_errors():
    response = predict_pb2.PredictResponse()
    response.outputs["b"].dtype = types_pb2.DT_BFLOAT16
    with pytest.raises(tensor_proto.WireError, match="DT_BFLOAT16 cannot be a numpy array"):
        tensor_proto.predict_outputs(response.SerializeToString())
    good = predict_pb2.PredictResponse()
    good.outputs["y"].CopyFrom(tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, tensor_content=b"\x00" * 8))
    good.outputs["y"].tensor_shape.dim.add(size=2)
    with pytest.raises(tensor_proto.WireError, match="truncated"):
        tensor_proto.predict_outputs(good.SerializeToString()[:-3])
    wrong = predict_pb2.PredictResponse()
    wrong.outputs["y"].CopyFrom(good.outputs["y"])
    wrong.outputs["y"].tensor_shape.dim[0].size = 3
    with pytest.raises(tensor_proto.WireError, match="tensor_content holds 8 bytes, not 3 x 4"):
        tensor_proto.predict_outputs(wrong.SerializeToString())


# Found by fuzz/targets/tensor_proto.py (the inputs are in fuzz/corpus/tensor_proto/finding-*): bytes protobuf and
# TensorFlow read one way, ours read another way or failed with an error that was not a WireError.


def _tensor(dtype: int, dims: tuple[int, ...] = (), **fields) -> bytes:
    tensor = tensor_pb2.TensorProto(dtype=dtype, **fields)
    for size in dims:
        tensor.tensor_shape.dim.add(size=size)
    return tensor.SerializeToString()


def _read(data: bytes) -> np.ndarray:
    return tensor_proto.tensor_array(memoryview(data))


def test_values_come_from_the_typed_field_of_the_tensors_dtype():
    assert _read(_tensor(types_pb2.DT_COMPLEX64, (2,), float_val=[1.0, 2.0])).tolist() == [0j, 0j]
    assert _read(_tensor(types_pb2.DT_COMPLEX64, (1,), scomplex_val=[1.0, 2.0, 3.0])).tolist() == [1 + 2j]
    assert _read(_tensor(types_pb2.DT_INT32, (4,)) + b":\x00").tolist() == [0, 0, 0, 0]  # packed, empty
    assert _read(_tensor(types_pb2.DT_FLOAT, (2,), float_val=[1.0, 2.0]) + b'"\x00').tolist() == [1.0, 2.0]


def test_fields_of_another_wire_type_and_groups_are_skipped_as_protobuf_skips_them():
    assert _read(_tensor(types_pb2.DT_FLOAT, (2,)) + b"\x28\x05").tolist() == [0.0, 0.0]  # float_val as a varint
    group = b"\xa3\x01\x08\x01\xa4\x01"  # field 20: a group holding a varint
    assert _read(_tensor(types_pb2.DT_FLOAT, (1,), float_val=[1.0]) + group).tolist() == [1.0]
    with pytest.raises(tensor_proto.WireError, match="mismatched end group"):
        _read(b"\xa3\x01\xac\x01")


def test_varints_keep_what_protobuf_keeps_of_them():
    dtype = b"\x08\x81\x80\x80\x80\x10"  # 2^32 + 1: an enum keeps the low 32 bits, DT_FLOAT
    assert _read(dtype + _tensor(0, (1,), float_val=[3.0])).tolist() == [3.0]
    past_64_bits = b"\x50" + b"\xff" * 9 + b"\x7f"  # int64_val
    assert _read(_tensor(types_pb2.DT_INT64, (1,)) + past_64_bits).tolist() == [-1]


def test_a_short_string_field_repeats_its_last_value_whole():
    assert _read(_tensor(types_pb2.DT_STRING, (3,), string_val=[b"a\x00"])).tolist() == [b"a\x00"] * 3


def test_a_tensor_message_given_twice_in_an_answer_is_the_two_merged():
    tensors = _tensor(types_pb2.DT_FLOAT), _tensor(0, (1,), float_val=[1.0])
    entry = b"\n\x01y" + b"".join(b"\x12" + bytes([len(t)]) + t for t in tensors)
    assert tensor_proto.predict_outputs(b"\n" + bytes([len(entry)]) + entry)["y"].tolist() == [1.0]


@pytest.mark.parametrize(
    "data, message",
    [
        (_tensor(types_pb2.DT_FLOAT, (1,)) + b"*\x03abc", "packed field 5 of 3 bytes, not 4-byte values"),
        (_tensor(types_pb2.DT_FLOAT, (2**32, 2**32)), r"more than 9223372036854775807 elements"),
        (b"\xa3\x01\x08\x01", "truncated group"),
        (  # 21 bytes that asked for 6.4 GB of zeros
            b"\x08\x01\x12\x10\x12\x06\x08\x80\x80\x80\x80\x06\x08\x12\x10\x80\x80\x80\x80\x10",
            r"a tensor of shape \[1610612736\] holds 0 values: padded, more than 67108864 bytes",
        ),
    ],
)
def test_broken_typed_fields_and_impossible_shapes_are_wire_errors(data, message):
    with pytest.raises(tensor_proto.WireError, match=message):
        _read(data)
