"""The model server's gRPC API through tensorflow-serving-api's own stubs, as users call it."""

from __future__ import annotations

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    inference_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
    regression_pb2,
)


@pytest.fixture(scope="module")
def channel(server):
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as opened:
        yield opened


@pytest.fixture(scope="module")
def prediction(channel):
    return prediction_service_pb2_grpc.PredictionServiceStub(channel)


@pytest.fixture(scope="module")
def models(channel):
    return model_service_pb2_grpc.ModelServiceStub(channel)


def predict_request(
    model: str, version: int | None = None, signature: str = "", label: str = "", **inputs
) -> predict_pb2.PredictRequest:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = signature
    if version is not None:
        request.model_spec.version.value = version
    if label:
        request.model_spec.version_label = label
    for alias, value in inputs.items():
        request.inputs[alias].CopyFrom(tf.make_tensor_proto(value))
    return request


def rpc_error(call, request) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as info:
        call(request, timeout=30)
    return info.value.code(), info.value.details()


def examples_input(target, *features: dict[str, float], context: dict[str, float] | None = None) -> None:
    def example(values):
        return tf.train.Example(
            features=tf.train.Features(
                feature={k: tf.train.Feature(float_list=tf.train.FloatList(value=[v])) for k, v in values.items()}
            )
        )

    if context is None:
        target.example_list.examples.extend(example(f) for f in features)
    else:
        target.example_list_with_context.context.CopyFrom(example(context))
        target.example_list_with_context.examples.extend(example(f) for f in features)


def test_predict_returns_typed_values_and_the_resolved_model_spec(prediction):
    response = prediction.Predict(
        predict_request("half_plus_two", x=np.array([[1.0], [2.0], [5.0]], np.float32)), timeout=30
    )
    assert list(response.outputs["y"].float_val) == [2.5, 3.0, 4.5]
    assert [d.size for d in response.outputs["y"].tensor_shape.dim] == [3, 1]
    assert response.outputs["y"].dtype == tf.float32.as_datatype_enum
    assert (response.model_spec.name, response.model_spec.version.value, response.model_spec.signature_name) == (
        "half_plus_two",
        123,
        "serving_default",
    )


def test_predict_version_label_and_output_filter(prediction):
    x = np.array([1.0], np.float32)
    assert list(prediction.Predict(predict_request("by_version", x=x), timeout=30).outputs["y"].float_val) == [3.5]
    by_version = prediction.Predict(predict_request("by_version", version=1, x=x), timeout=30)
    assert list(by_version.outputs["y"].float_val) == [2.5] and by_version.model_spec.version.value == 1
    labelled = prediction.Predict(predict_request("two_versions", label="canary", x=x), timeout=30)
    assert labelled.model_spec.version.value == 124
    request = predict_request(
        "three_inputs", a=np.array([1.5], np.float32), b=np.array([2], np.int64), c=np.array([True])
    )
    request.output_filter.append("sum")
    response = prediction.Predict(request, timeout=30)
    assert list(response.outputs) == ["sum"] and list(response.outputs["sum"].float_val) == [3.5]


def test_predict_strings_and_tf2_model(prediction):
    response = prediction.Predict(predict_request("strings", s=np.array([b"ab", b"\x00\xff"], object)), timeout=30)
    assert list(response.outputs["upper"].string_val) == [b"AB", b"\x00\xff"]
    assert tf.make_ndarray(response.outputs["echo_bytes"]).tolist() == [b"ab", b"\x00\xff"]
    tf2 = prediction.Predict(predict_request("half_plus_two_tf2", x=np.array([3.0], np.float32)), timeout=30)
    assert list(tf2.outputs["y"].float_val) == [3.5]


@pytest.mark.parametrize(
    "request_factory, code, message",
    [
        (lambda: predict_pb2.PredictRequest(), grpc.StatusCode.INVALID_ARGUMENT, "Missing ModelSpec"),
        (
            lambda: predict_request("", x=np.array([1.0], np.float32)),
            grpc.StatusCode.INVALID_ARGUMENT,
            "ModelSpec has no name specified.",
        ),
        (
            lambda: predict_request("nope", x=np.array([1.0], np.float32)),
            grpc.StatusCode.NOT_FOUND,
            "Servable not found for request: Latest(nope)",
        ),
        (
            lambda: predict_request("half_plus_two", version=999, x=np.array([1.0], np.float32)),
            grpc.StatusCode.NOT_FOUND,
            "Servable not found for request: Specific(half_plus_two, 999)",
        ),
        (
            lambda: predict_request("half_plus_two", signature="foo", x=np.array([1.0], np.float32)),
            grpc.StatusCode.FAILED_PRECONDITION,
            'Serving signature key "foo" not found.',
        ),
        (
            lambda: predict_request("half_plus_two", x=np.array([1.0], np.float32), z=np.array([1.0], np.float32)),
            grpc.StatusCode.INVALID_ARGUMENT,
            "input size does not match signature: 2!=1 len({x,z}) != len({x}). "
            "Sent extra: {z}. Missing but required: {}.",
        ),
        (
            lambda: predict_request("half_plus_two", z=np.array([1.0], np.float32)),
            grpc.StatusCode.INVALID_ARGUMENT,
            "Signature input alias: x(feed name: x:0) not found in request and no default value provided. "
            "Inputs expected to be in the request {z}, or default input alias set: ",
        ),
        (
            lambda: predict_request("half_plus_two", x=np.array([b"a"], object)),
            grpc.StatusCode.INVALID_ARGUMENT,
            "Expects arg[0] to be float but string is provided",
        ),
    ],
)
def test_predict_errors_carry_tfs_codes_and_texts(prediction, request_factory, code, message):
    assert rpc_error(prediction.Predict, request_factory()) == (code, message)


def test_predict_output_filter_errors(prediction):
    request = predict_request("half_plus_two", x=np.array([1.0], np.float32))
    request.output_filter.append("z")
    assert rpc_error(prediction.Predict, request) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "output tensor alias not found in signature: z Outputs expected to be in the set {y}.",
    )
    request.output_filter[:] = ["y", "y"]
    assert rpc_error(prediction.Predict, request) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "duplicate output tensor alias: y",
    )


def test_classify(prediction):
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = "half_plus_two"
    request.model_spec.signature_name = "classify_x_to_y"
    examples_input(request.input, {"x": 1.0}, {"x": 2.0})
    response = prediction.Classify(request, timeout=30)
    assert [[(c.label, c.score) for c in row.classes] for row in response.result.classifications] == [
        [("", 2.5)],
        [("", 3.0)],
    ]
    assert response.model_spec.signature_name == "classify_x_to_y" and response.model_spec.version.value == 123


def test_regress_with_context(prediction):
    request = regression_pb2.RegressionRequest()
    request.model_spec.name = "half_plus_two"
    request.model_spec.signature_name = "regress_x_to_y2"
    examples_input(request.input, {"x": 1.0}, {"y": 0.0}, context={"x": 9.0})
    response = prediction.Regress(request, timeout=30)
    assert [r.value for r in response.result.regressions] == [3.5, 7.5]


def test_classify_and_regress_errors(prediction):
    request = regression_pb2.RegressionRequest()
    request.model_spec.name = "half_plus_two"
    request.model_spec.signature_name = "regress_x_to_y"
    assert rpc_error(prediction.Regress, request) == (grpc.StatusCode.INVALID_ARGUMENT, "Input is empty.")
    examples_input(request.input, {"x": 1.0})
    request.model_spec.signature_name = "classify_x_to_y"
    code, message = rpc_error(prediction.Regress, request)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and message.startswith("No regression outputs found in ")
    classify = classification_pb2.ClassificationRequest(model_spec=request.model_spec)
    classify.model_spec.signature_name = ""
    examples_input(classify.input, {"x": 1.0})
    code, message = rpc_error(prediction.Classify, classify)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and message.startswith("No classification inputs found in ")


def test_multi_inference(prediction):
    request = inference_pb2.MultiInferenceRequest()
    for signature, method in (("classify_x_to_y", "classify"), ("regress_x_to_y2", "regress")):
        task = request.tasks.add(method_name=f"tensorflow/serving/{method}")
        task.model_spec.name = "half_plus_two"
        task.model_spec.signature_name = signature
    examples_input(request.input, {"x": 1.0})
    response = prediction.MultiInference(request, timeout=30)
    assert response.results[0].classification_result.classifications[0].classes[0].score == 2.5
    assert response.results[1].regression_result.regressions[0].value == 3.5


def test_get_model_metadata(prediction):
    request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
    request.model_spec.name = "half_plus_three"
    response = prediction.GetModelMetadata(request, timeout=30)
    assert (response.model_spec.name, response.model_spec.version.value) == ("half_plus_three", 123)
    signature_map = get_model_metadata_pb2.SignatureDefMap()
    response.metadata["signature_def"].Unpack(signature_map)
    assert sorted(signature_map.signature_def) == ["serving_default", "tensorflow/serving/regress"]
    assert signature_map.signature_def["serving_default"].inputs["x"].name == "x:0"
    del request.metadata_field[:]
    assert rpc_error(prediction.GetModelMetadata, request) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "GetModelMetadataRequest must specify at least one metadata_field",
    )
    request.metadata_field.append("graph")
    assert rpc_error(prediction.GetModelMetadata, request) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "Metadata field graph is not supported",
    )


def test_get_model_status(models):
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = "two_versions"
    response = models.GetModelStatus(request, timeout=30)
    assert [(s.version, s.state, s.status.error_code) for s in response.model_version_status] == [
        (124, get_model_status_pb2.ModelVersionStatus.AVAILABLE, 0),
        (123, get_model_status_pb2.ModelVersionStatus.AVAILABLE, 0),
    ]
    request.model_spec.version.value = 123
    assert [s.version for s in models.GetModelStatus(request, timeout=30).model_version_status] == [123]
    request.model_spec.version.value = 7
    assert rpc_error(models.GetModelStatus, request) == (
        grpc.StatusCode.NOT_FOUND,
        "Could not find version 7 of model two_versions",
    )
    assert rpc_error(models.GetModelStatus, get_model_status_pb2.GetModelStatusRequest()) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "Missing ModelSpec",
    )


def test_get_model_status_of_the_broken_model(models):
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = "broken"
    (status,) = models.GetModelStatus(request, timeout=30).model_version_status
    assert status.state == get_model_status_pb2.ModelVersionStatus.END
    assert status.status.error_code == grpc.StatusCode.NOT_FOUND.value[0]
    assert "Could not find SavedModel" in status.status.error_message
