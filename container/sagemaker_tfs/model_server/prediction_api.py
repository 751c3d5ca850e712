"""TFS's Predict, Classify, Regress and MultiInference at the level of their protos: from a request to its
response, with TFS's checks and messages (predict_util.cc, classifier.cc, regressor.cc, multi_inference.cc).

Who calls them decides two things: how a ModelSpec finds the servable (`resolve`: the gRPC service's lookup with its
checks, or warm-up's version being loaded) and how a signature runs (`run(servable, feeds, fetches, api)`: through
the Runner for gRPC, directly on the loading thread for warm-up). A `resolve` gets None for a request without a
model_spec.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from google.protobuf.message import Message
from tensorflow.core.framework import tensor_pb2
from tensorflow.python.framework import tensor_util
from tensorflow_serving.apis import classification_pb2, inference_pb2, model_pb2, predict_pb2, regression_pb2

from ..shared import dtypes
from ..shared.error_codes import Code, ServingError, invalid_argument
from . import signatures
from .servable import CLASSIFY_METHOD, REGRESS_METHOD, Servable, Signature

Resolve = Callable[["model_pb2.ModelSpec | None"], Servable]
Run = Callable[[Servable, dict[str, np.ndarray], Sequence[str], str], Awaitable[list[np.ndarray]]]
# Classify's or Regress's filling of a response's result: (servable, signature name, examples, run, result)
Fill = Callable[[Servable, str, list[bytes], Run, Any], Awaitable[None]]

# numpy kind/dtype -> TensorProto field holding the values (TFS's tensor.AsProtoField)
_VALUE_FIELDS = {
    dtypes.DT_FLOAT: "float_val",
    dtypes.DT_DOUBLE: "double_val",
    dtypes.DT_INT32: "int_val",
    dtypes.DT_UINT8: "int_val",
    dtypes.DT_INT16: "int_val",
    dtypes.DT_INT8: "int_val",
    dtypes.DT_UINT16: "int_val",
    dtypes.DT_INT64: "int64_val",
    dtypes.DT_BOOL: "bool_val",
    dtypes.DT_STRING: "string_val",
    dtypes.DT_UINT32: "uint32_val",
    dtypes.DT_UINT64: "uint64_val",
}


# numeric DataTypes whose TensorProto holds the values as bytes in tensor_content or in a typed field
_NUMERIC_DTYPES = {dtype: dtypes.to_numpy(dtype) for dtype in _VALUE_FIELDS if dtype != dtypes.DT_STRING}


def ndarray(proto: tensor_pb2.TensorProto) -> np.ndarray:
    """A request's TensorProto as a numpy array. Numeric values holding the shape's element count exactly are read
    directly (what TensorFlow's MakeNdarray does with them, without its generic dtype and padding steps); anything
    else is MakeNdarray's (strings, half, a typed field to pad with its last value, its errors)."""
    dtype = _NUMERIC_DTYPES.get(proto.dtype)
    if dtype is not None:
        shape = [d.size for d in proto.tensor_shape.dim]
        count = math.prod(shape)
        content = proto.tensor_content
        if content:
            if len(content) == count * dtype.itemsize:
                return np.frombuffer(content, dtype).reshape(shape).copy()
        else:
            values = getattr(proto, _VALUE_FIELDS[proto.dtype])
            if len(values) == count and count > 0:
                return np.fromiter(values, dtype, count).reshape(shape)
    return tensor_util.MakeNdarray(proto)


def fill_tensor(target: tensor_pb2.TensorProto, array: np.ndarray) -> None:
    """Write a numpy array into an empty TensorProto, with typed value fields."""
    dtype = dtypes.from_numpy(array.dtype)
    field = _VALUE_FIELDS.get(dtype)
    if field is None:  # half, complex...: let TensorFlow encode it
        target.CopyFrom(tensor_util.make_tensor_proto(array))
        return
    target.dtype = dtype
    dims = target.tensor_shape.dim
    for n in array.shape:
        dims.add(size=n)
    values = array.reshape(-1).tolist()
    if dtype == dtypes.DT_STRING:
        target.string_val.extend(v if isinstance(v, bytes) else str(v).encode("utf-8") for v in values)
    else:
        getattr(target, field).extend(values)


def requested_spec(request: Message) -> model_pb2.ModelSpec | None:
    """A request's model_spec, None when it has none (what a Resolve gets)."""
    return request.model_spec if request.HasField("model_spec") else None


def set_spec(target: model_pb2.ModelSpec, servable: Servable, signature_name: str | None) -> None:
    target.name = servable.name
    target.version.value = servable.version
    if signature_name is not None:
        target.signature_name = signature_name


def _set_of(names: Iterable[str]) -> str:
    return "{" + ",".join(sorted(names)) + "}"


def _predict_inputs(
    inputs: Mapping[str, tensor_pb2.TensorProto], signature: Signature
) -> list[tuple[str, tensor_pb2.TensorProto]]:
    """(graph tensor name, TensorProto) of each input of a Predict request, once TFS's checks passed: the request
    names exactly the signature's inputs."""
    named = []
    expected = signature.inputs
    for alias, proto in inputs.items():
        info = expected.get(alias)
        if info is None:
            break
        named.append((info.name, proto))
    if len(named) == len(expected) == len(inputs):
        return named
    sent, wanted = set(inputs), set(expected)
    if len(sent) != len(wanted):
        raise invalid_argument(
            f"input size does not match signature: {len(sent)}!={len(wanted)} "
            f"len({_set_of(sent)}) != len({_set_of(wanted)}). Sent extra: "
            f"{_set_of(sent - wanted)}. Missing but required: {_set_of(wanted - sent)}."
        )
    alias, info = next((alias, info) for alias, info in expected.items() if alias not in sent)
    raise invalid_argument(
        f"Signature input alias: {alias}(feed name: {info.name}) not found in request "
        f"and no default value provided. Inputs expected to be in the request "
        f"{_set_of(sent)}, or default input alias set: "
    )


def _predict_outputs(output_filter: Sequence[str], signature: Signature) -> tuple[Sequence[str], Sequence[str]]:
    """The output aliases a Predict request asks for (all without an output_filter) and their graph tensors."""
    if not output_filter:
        return signature.output_aliases, signature.fetches
    seen = set()
    for alias in output_filter:
        if alias not in signature.outputs:
            raise invalid_argument(
                f"output tensor alias not found in signature: {alias} Outputs expected to be "
                f"in the set {_set_of(signature.outputs)}."
            )
        if alias in seen:
            raise invalid_argument(f"duplicate output tensor alias: {alias}")
        seen.add(alias)
    return list(output_filter), [signature.outputs[alias].name for alias in output_filter]


def _serialized_examples(request_input: inference_pb2.Input) -> list[bytes]:
    kind = request_input.WhichOneof("kind")
    if kind == "example_list":
        return [e.SerializeToString() for e in request_input.example_list.examples]
    if kind == "example_list_with_context":
        with_context = request_input.example_list_with_context
        context = with_context.context.SerializeToString()
        return [context + e.SerializeToString() for e in with_context.examples]
    return []


async def predict(resolve: Resolve, request: predict_pb2.PredictRequest, run: Run) -> predict_pb2.PredictResponse:
    spec = request.model_spec
    servable = resolve(requested_spec(request))
    signature = signatures.predict_signature(servable, spec.signature_name, rest=False)
    feeds = {name: ndarray(proto) for name, proto in _predict_inputs(request.inputs, signature)}
    aliases, fetches = _predict_outputs(request.output_filter, signature)
    outputs = await run(servable, feeds, fetches, "Predict")
    response = predict_pb2.PredictResponse()
    set_spec(response.model_spec, servable, signature.key)
    for alias, array in zip(aliases, outputs, strict=True):
        fill_tensor(response.outputs[alias], array)
    return response


async def _run_examples(
    servable: Servable, example_run: signatures.ExampleRun, serialized: list[bytes], run: Run, api: str
) -> list[np.ndarray]:
    tensor = signatures.examples_tensor(serialized)
    return await run(servable, {example_run.input_name: tensor}, example_run.fetches, api)


async def _classify(
    servable: Servable,
    signature_name: str,
    serialized: list[bytes],
    run: Run,
    result: classification_pb2.ClassificationResult,
) -> None:
    example_run = signatures.classify_run(servable, signature_name)
    outputs = await _run_examples(servable, example_run, serialized, run, "Classify")
    labels, scores = signatures.classification(outputs, example_run, len(serialized))
    classes = len(labels[0]) if labels is not None else scores.shape[1]  # type: ignore[union-attr]  # labels or scores: never neither
    for i in range(len(serialized)):
        classification = result.classifications.add()
        for c in range(classes):
            entry = classification.classes.add()
            if labels is not None:
                entry.label = labels[i][c].decode("utf-8", "replace")
            if scores is not None:
                entry.score = float(scores[i, c])


async def _regress(
    servable: Servable, signature_name: str, serialized: list[bytes], run: Run, result: regression_pb2.RegressionResult
) -> None:
    example_run = signatures.regress_run(servable, signature_name)
    outputs = await _run_examples(servable, example_run, serialized, run, "Regress")
    for value in signatures.regression(outputs, len(serialized)).tolist():
        result.regressions.add(value=value)


async def _examples_response(resolve: Resolve, request: Message, response: Message, fill: Fill, run: Run) -> Message:
    """Classify or Regress: resolve the model, fill the response's result from its examples by fill()."""
    servable = resolve(requested_spec(request))
    set_spec(response.model_spec, servable, signatures.signature_key(request.model_spec.signature_name))
    await fill(servable, request.model_spec.signature_name, _serialized_examples(request.input), run, response.result)
    return response


async def classify(
    resolve: Resolve, request: classification_pb2.ClassificationRequest, run: Run
) -> classification_pb2.ClassificationResponse:
    return await _examples_response(resolve, request, classification_pb2.ClassificationResponse(), _classify, run)


async def regress(
    resolve: Resolve, request: regression_pb2.RegressionRequest, run: Run
) -> regression_pb2.RegressionResponse:
    return await _examples_response(resolve, request, regression_pb2.RegressionResponse(), _regress, run)


async def multi_inference(
    resolve: Resolve, request: inference_pb2.MultiInferenceRequest, run: Run
) -> inference_pb2.MultiInferenceResponse:
    if not request.tasks:
        raise invalid_argument("Found no tasks in MultiInferenceRequest.")
    names, seen = set(), set()
    for task in request.tasks:
        if not task.model_spec.name:
            raise invalid_argument("Found ModelSpec with an empty model name.")
        names.add(task.model_spec.name)
        key = signatures.signature_key(task.model_spec.signature_name)
        if key in seen:
            raise invalid_argument(f"Duplicate evaluation of signature: {key}")
        seen.add(key)
    if len(names) > 1:
        raise invalid_argument("All ModelSpecs in a MultiInferenceRequest must access the same model name.")
    servable = resolve(request.tasks[0].model_spec)
    serialized = _serialized_examples(request.input)
    response = inference_pb2.MultiInferenceResponse()
    for task in request.tasks:
        key = signatures.signature_key(task.model_spec.signature_name)
        if key not in servable.signatures:
            raise invalid_argument(f"Requested signature not found in model graph: {key}")
        result = response.results.add()
        set_spec(result.model_spec, servable, key)
        if task.method_name == CLASSIFY_METHOD:
            await _classify(servable, key, serialized, run, result.classification_result)
        elif task.method_name == REGRESS_METHOD:
            await _regress(servable, key, serialized, run, result.regression_result)
        else:
            raise ServingError(Code.UNIMPLEMENTED, f"Unsupported signature method_name: {task.method_name}")
    return response
