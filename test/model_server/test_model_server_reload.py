"""ModelService/HandleReloadConfigRequest on the embedded model server, through tensorflow-serving-api's stubs:
the new model list replaces the old one, models left unchanged keep serving without a gap, added models are
loaded before the call returns (their load error is its error), and TFS's error texts."""

from __future__ import annotations

import threading

import grpc
import paths
import pytest
from google.protobuf import text_format
from model_server_support import ModelServer, model_config
from tensorflow_serving.apis import model_management_pb2, model_service_pb2_grpc


def reload_request(models: dict, extra: dict | None = None) -> model_management_pb2.ReloadConfigRequest:
    request = model_management_pb2.ReloadConfigRequest()
    text_format.Parse(model_config(models, extra), request.config)
    return request


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with ModelServer(
        model_config({"half_plus_two": paths.HALF_PLUS_TWO}), tmp_path_factory.mktemp("reload")
    ) as running:
        yield running


@pytest.fixture(scope="module")
def models(server):
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        yield model_service_pb2_grpc.ModelServiceStub(channel)


def predictions(server: ModelServer, name: str) -> tuple[int, object]:
    answer = server.post(f"/v1/models/{name}:predict", {"instances": [1.0]})
    return answer.status_code, answer.json()


def test_a_reload_adds_and_removes_models_while_an_unchanged_one_serves_throughout(server, models):
    answers, stop = [], threading.Event()

    def invoke_unchanged_model():
        while not stop.is_set():
            answers.append(predictions(server, "half_plus_two"))

    invoker = threading.Thread(target=invoke_unchanged_model)
    invoker.start()
    try:
        response = models.HandleReloadConfigRequest(
            reload_request({"half_plus_two": paths.HALF_PLUS_TWO, "half_plus_three": paths.HALF_PLUS_THREE}),
            timeout=120,
        )
        assert response.status.error_code == 0
        assert predictions(server, "half_plus_three") == (200, {"predictions": [3.5]})  # loaded when it returns
        models.HandleReloadConfigRequest(reload_request({"half_plus_two": paths.HALF_PLUS_TWO}), timeout=120)
        assert predictions(server, "half_plus_three") == (
            404,
            {"error": "Servable not found for request: Latest(half_plus_three)"},
        )
        status = server.get("/v1/models/half_plus_three")  # TFS's servable state monitor keeps its last state
        assert (status.status_code, status.json()) == (
            200,
            {
                "model_version_status": [
                    {"version": "123", "state": "END", "status": {"error_code": "OK", "error_message": ""}}
                ]
            },
        )
        assert server.get("/v1/models/half_plus_three/versions/7").json() == {
            "error": "Could not find version 7 of model half_plus_three"
        }
    finally:
        stop.set()
        invoker.join()
    assert answers and set(map(repr, answers)) == {repr((200, {"predictions": [2.5]}))}  # no gap, no error


def test_a_model_that_fails_to_load_is_the_reloads_error(server, models):
    with pytest.raises(grpc.RpcError) as info:
        models.HandleReloadConfigRequest(
            reload_request({"half_plus_two": paths.HALF_PLUS_TWO, "broken": paths.BAD_HALF_PLUS_TWO}), timeout=120
        )
    assert info.value.code() == grpc.StatusCode.NOT_FOUND
    assert info.value.details().startswith("Could not find SavedModel .pb or .pbtxt at supplied export directory path")
    models.HandleReloadConfigRequest(reload_request({"half_plus_two": paths.HALF_PLUS_TWO}), timeout=120)
    status = server.get("/v1/models/broken").json()["model_version_status"]  # removed: its failed load's END
    assert [(v["state"], v["status"]["error_code"]) for v in status] == [("END", "NOT_FOUND")]
    assert predictions(server, "half_plus_two") == (200, {"predictions": [2.5]})


def test_only_a_model_config_list_is_accepted(models):
    request = model_management_pb2.ReloadConfigRequest()
    request.config.custom_model_config.type_url = "x"
    with pytest.raises(grpc.RpcError) as info:
        models.HandleReloadConfigRequest(request, timeout=30)
    assert (info.value.code(), info.value.details()) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "ServerModelConfig type not supported by HandleReloadConfigRequest. Only "
        "ModelConfigList is currently supported",
    )


def test_a_platform_other_than_tensorflow_is_refused_and_nothing_changes(server, models):
    request = reload_request({"half_plus_two": paths.HALF_PLUS_TWO})
    request.config.model_config_list.config[0].model_platform = "tensorflow2"
    with pytest.raises(grpc.RpcError) as info:
        models.HandleReloadConfigRequest(request, timeout=30)
    assert (info.value.code(), info.value.details()) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "PlatformConfigMap has no entry for platform tensorflow2",
    )
    assert predictions(server, "half_plus_two") == (200, {"predictions": [2.5]})
