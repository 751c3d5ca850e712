"""TensorFlow Lite versions served by the model server (--prefer_tflite_model) over REST and gRPC: TFS's own TFLite
test models, a model converted here with stored signatures, a folder holding both a SavedModel and model.tflite
(it follows the flag), TFS's errors, a warm-up file, and the interpreter pool's flags."""

from __future__ import annotations

import shutil

import grpc
import model_dirs
import paths
import processes
import pytest
import tensorflow as tf
from model_server_support import ModelServer, model_config
from tensorflow_serving.apis import get_model_metadata_pb2, predict_pb2, prediction_service_pb2_grpc


@pytest.fixture(scope="module")
def both(built_models, tmp_path_factory):
    """A version folder with half_plus_two's SavedModel and the scale model's model.tflite."""
    base = tmp_path_factory.mktemp("both") / "both"
    shutil.copytree(paths.HALF_PLUS_TWO / "00000123", base / "1")
    shutil.copy(built_models / "tflite_scale_sigdefs" / "1" / "model.tflite", base / "1" / "model.tflite")
    return base


@pytest.fixture(scope="module")
def warmed(tmp_path_factory):
    """TFS's half_plus_two TFLite model with a warm-up file of two Predict records."""
    base = tmp_path_factory.mktemp("warmed") / "warmed"
    shutil.copytree(paths.HALF_PLUS_TWO_TFLITE / "00000123", base / "00000123")
    model_dirs.write_warmup_requests(base / "00000123", [model_dirs.predict_log(x=[[1.0]])] * 2)
    return base


@pytest.fixture(scope="module")
def lite(built_models, both, warmed, tmp_path_factory):
    models = {
        "half_plus_two": paths.HALF_PLUS_TWO_TFLITE,
        "with_sigdef": paths.HALF_PLUS_TWO_TFLITE_WITH_SIGDEF,
        "scale": built_models / "tflite_scale_sigdefs",
        "both": both,
        "saved_model_only": paths.HALF_PLUS_TWO,
        "warmed": warmed,
    }
    with ModelServer(
        model_config(models),
        tmp_path_factory.mktemp("lite"),
        "--prefer_tflite_model",
        "--num_tflite_pools=2",
        "--num_tflite_interpreters_per_pool=2",
    ) as server:
        yield server


@pytest.fixture(scope="module")
def prediction(lite):
    with grpc.insecure_channel(f"127.0.0.1:{lite.grpc_port}") as channel:
        yield prediction_service_pb2_grpc.PredictionServiceStub(channel)


def predict_request(model: str, signature: str = "", output_filter=(), **inputs) -> predict_pb2.PredictRequest:
    request = predict_pb2.PredictRequest(output_filter=list(output_filter))
    request.model_spec.name = model
    request.model_spec.signature_name = signature
    for alias, value in inputs.items():
        request.inputs[alias].CopyFrom(
            value if isinstance(value, type(request.inputs[alias])) else tf.make_tensor_proto(value)
        )
    return request


def metadata_signatures(server: ModelServer, model: str) -> dict:
    response = server.get(f"/v1/models/{model}/metadata")
    assert response.status_code == 200
    return response.json()["metadata"]["signature_def"]["signature_def"]


def tensor(name: str, dtype: str, *dims: int) -> dict:
    return {
        "name": name,
        "dtype": dtype,
        "tensor_shape": {"dim": [{"size": str(d), "name": ""} for d in dims], "unknown_rank": False},
    }


def test_tfs_half_plus_two_tflite_over_rest(lite):
    response = lite.post("/v1/models/half_plus_two:predict", {"instances": [1.0, 2.0, 5.0]})
    assert (response.status_code, response.json()) == (200, {"predictions": [2.5, 3.0, 4.5]})
    response = lite.post("/v1/models/half_plus_two/versions/123:predict", {"inputs": {"x": [[1.0], [3.0]]}})
    assert (response.status_code, response.json()) == (200, {"outputs": [[2.5], [3.5]]})
    assert lite.get("/v1/models/half_plus_two").json()["model_version_status"][0]["state"] == "AVAILABLE"


def test_metadata_is_the_signatures_tfs_makes(lite):
    assert metadata_signatures(lite, "half_plus_two") == {
        "serving_default": {
            "inputs": {"x": tensor("x", "DT_FLOAT", 1, 1)},
            "outputs": {"y": tensor("y", "DT_FLOAT", 1, 1)},
            "method_name": "tensorflow/serving/predict",
            "defaults": {},
        }
    }
    # stored in the model's metadata as tflite_input:0, matched to the tensor tflite_input
    assert metadata_signatures(lite, "with_sigdef")["serving_default"]["inputs"] == {
        "x": tensor("tflite_input", "DT_FLOAT", 1, 1)
    }


def test_tfs_half_plus_two_tflite_with_sigdef_over_grpc(prediction):
    response = prediction.Predict(predict_request("with_sigdef", x=[[2.0]]), timeout=30)
    assert tf.make_ndarray(response.outputs["y"]).tolist() == [[3.0]]
    assert (response.model_spec.version.value, response.model_spec.signature_name) == (123, "serving_default")
    request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
    request.model_spec.name = "with_sigdef"
    signature_map = get_model_metadata_pb2.SignatureDefMap()
    prediction.GetModelMetadata(request, timeout=30).metadata["signature_def"].Unpack(signature_map)
    assert signature_map.signature_def["serving_default"].inputs["x"].name == "tflite_input"


def test_the_default_and_a_named_signature_over_rest(lite):
    response = lite.post("/v1/models/scale:predict", {"instances": [{"x": [1.0, 2.0], "n": 3}]})
    assert (response.status_code, response.json()) == (200, {"predictions": [{"scaled": [4.0, 7.0], "doubled": 6}]})
    response = lite.post("/v1/models/scale:predict", {"signature_name": "doubled_only", "instances": [1, 2, 3]})
    assert (response.status_code, response.json()) == (200, {"predictions": [2, 4, 6]})


def test_the_default_and_a_named_signature_over_grpc(prediction):
    response = prediction.Predict(
        predict_request("scale", x=tf.constant([[0.0, 1.0]]), n=tf.constant([7], tf.int32)), timeout=30
    )
    assert {alias: tf.make_ndarray(t).tolist() for alias, t in response.outputs.items()} == {
        "scaled": [[1.0, 4.0]],
        "doubled": [14],
    }
    response = prediction.Predict(
        predict_request("scale", "doubled_only", ["doubled"], n=tf.constant([1, 2], tf.int32)), timeout=30
    )
    assert list(response.outputs) == ["doubled"]
    assert response.outputs["doubled"].int_val == [2, 4]
    assert response.model_spec.signature_name == "doubled_only"


def test_a_folder_with_both_models_follows_the_flag(lite):
    assert sorted(metadata_signatures(lite, "both")) == ["doubled_only", "serving_default"]
    response = lite.post("/v1/models/both:predict", {"signature_name": "doubled_only", "instances": [5]})
    assert response.json() == {"predictions": [10]}
    # no model.tflite: the SavedModel, with the flag too
    response = lite.post("/v1/models/saved_model_only:predict", {"instances": [1.0]})
    assert response.json() == {"predictions": [2.5]}


@pytest.mark.parametrize(
    "body, status, error",
    [
        ({"inputs": {"z": [1.0]}}, 400, "Missing named input: x in 'inputs' object."),
        (
            {"instances": ["a"]},
            400,
            "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: JSON "
            'Value: "a" Type: String is not of expected type: float',
        ),
        (
            {"signature_name": "nope", "instances": [1.0]},
            400,
            'Serving signature name: "nope" not found in signature def',
        ),
    ],
)
def test_wrong_inputs_get_tfs_errors_over_rest(lite, body, status, error):
    for model in ("half_plus_two", "saved_model_only"):  # the same answer as for the SavedModel
        response = lite.post(f"/v1/models/{model}:predict", body)
        assert (response.status_code, response.json()) == (status, {"error": error})


def test_wrong_inputs_get_tfs_errors_over_grpc(prediction):
    with pytest.raises(grpc.RpcError) as info:
        prediction.Predict(
            predict_request("scale", x=tf.constant([[0.0, 1.0]]), n=tf.constant([7], tf.int64)), timeout=30
        )
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.details() in (
        "Expects arg[0] to be int32 but int64 is provided",
        "Expects arg[1] to be int32 but int64 is provided",
    )  # the request map's order
    with pytest.raises(grpc.RpcError) as info:
        prediction.Predict(
            predict_request("scale", "doubled_only", ["scaled"], n=tf.constant([7], tf.int32)), timeout=30
        )
    assert (info.value.code(), info.value.details()) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "output tensor alias not found in signature: scaled Outputs expected to be in the set {doubled}.",
    )


def test_a_tflite_version_replays_its_warmup_file_too(lite, warmed):
    processes.wait_for_log(
        lite,
        "Finished reading warmup data for model at "
        f"{warmed / '00000123' / 'assets.extra' / 'tf_serving_warmup_requests'}. Number of warmup "
        "records read: 2.",
    )
    assert lite.post("/v1/models/warmed:predict", {"instances": [4.0]}).json() == {"predictions": [4.0]}


def test_the_interpreter_pool_is_sized_by_the_flags(lite):
    processes.wait_for_log(
        lite, f"TensorFlow Lite model {paths.HALF_PLUS_TWO_TFLITE / '00000123' / 'model.tflite'}: 4 interpreters"
    )


def test_without_the_flag_the_savedmodel_is_served_and_a_tflite_only_folder_fails(both, tmp_path):
    models = {"both": both, "tflite_only": paths.HALF_PLUS_TWO_TFLITE}
    with ModelServer(model_config(models), tmp_path) as server:
        assert server.post("/v1/models/both:predict", {"instances": [1.0]}).json() == {"predictions": [2.5]}
        status = server.get("/v1/models/tflite_only").json()["model_version_status"][0]
        assert status["state"] == "END"
        assert status["status"] == {
            "error_code": "NOT_FOUND",
            "error_message": "Could not find SavedModel .pb or .pbtxt at supplied export directory path: "
            f"{paths.HALF_PLUS_TWO_TFLITE / '00000123'}",
        }
