"""The routes of a multi-model endpoint through the whole stack: list, describe, invoke, unload, the 400 of
/invocations, 404s and 405s, pagination, versions and methods, TargetModel in the log."""

from __future__ import annotations

import clients
import paths
import processes
import pytest
from mme_support import error, model, predictions

TARGET = "X_Amzn_SageMaker_Target_Model"


@pytest.fixture
def loaded(stack, root):
    """load(name, source=...) -> name, unloaded after the test."""
    names = []

    def load(name, source=paths.HALF_PLUS_TWO, **options):
        url = root / f"{name}-{len(names)}-{id(names)}"
        if not url.exists():
            model(root, url.name, source, **options)
        answer = stack.load(name, str(url))
        assert answer.status == 200, answer.text
        names.append(name)
        return name

    yield load
    for name in names:
        stack.unload(name)


def test_at_start_up_nothing_is_loaded_and_ping_is_200(stack, root):
    model(root, "preexisting")  # folders under the root are not models until loaded
    assert clients.http_status(stack.url + "/ping") == 200
    assert stack.listed().json() == {"models": []}
    assert stack.invoke("preexisting").json() == error("Model preexisting is not loaded yet.")


def test_invocations_without_a_model_is_400(stack):
    answer = stack.call(
        "POST",
        "/invocations",
        '{"instances": [1.0]}',
        Content_Type="application/json",
        X_Amzn_RequestId="rid-no-model",
        **{TARGET: "a/model-1.tar.gz"},
    )
    assert (answer.status, answer.json()) == (400, error("Invocation request does not contain model name."))
    assert answer.headers["x-amzn-requestid"] == "rid-no-model"
    processes.wait_for_log(stack, "request rid-no-model: POST /invocations, target model a/model-1.tar.gz")


@pytest.mark.parametrize(
    "method, path, message",
    [
        ("GET", "/models/ghost", "Model ghost is not loaded yet."),
        ("DELETE", "/models/ghost", "Model ghost is not loaded yet."),
        ("POST", "/models/ghost/invoke", "Model ghost is not loaded yet."),
        ("DELETE", "/models/bad%20name", "Model bad name is not loaded yet."),
        ("GET", "/models/..%2Fetc", "Not Found"),  # a name is never a path: /models/../etc is no route
    ],
)
def test_a_model_that_is_not_loaded_is_404(stack, method, path, message):
    answer = stack.call(method, path, "{}" if method == "POST" else None, Content_Type="application/json")
    assert (answer.status, answer.json()) == (404, error(message))


@pytest.mark.parametrize(
    "method, path, status",
    [
        ("PUT", "/models", 405),
        ("POST", "/models/m", 405),
        ("GET", "/models/m/invoke", 405),
        ("GET", "/models/m/x", 404),
        ("GET", "/nothing", 404),
    ],
)
def test_other_methods_and_paths(stack, method, path, status):
    answer = stack.call(method, path)
    assert answer.status == status
    assert answer.json() == error("Not Found" if status == 404 else "Method Not Allowed")


def test_load_invoke_describe_list_unload_and_load_again(stack, root):
    url = str(model(root, "lifecycle", paths.HALF_PLUS_TWO_2_VERSIONS))
    answer = stack.load("hp2", url, X_Amzn_RequestId="rid-load")
    first_grpc = stack.model_server_ports[0]
    assert (answer.status, answer.headers["x-amzn-requestid"]) == (200, "rid-load")
    assert answer.json()["success"].startswith("Successfully loaded model hp2, listening on rest port ")
    assert answer.json()["success"].endswith(f" and grpc port {first_grpc}.")
    try:
        assert stack.listed().json() == {"models": [{"modelName": "hp2", "modelUrl": url}]}
        described = stack.call("GET", "/models/hp2").json()
        assert described == {
            "modelName": "hp2",
            "modelUrl": url,
            "model_version_status": [
                {"version": str(v), "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}
                for v in (124, 123)
            ],
        }
        invoked = stack.invoke("hp2", X_Amzn_RequestId="rid-invoke", **{TARGET: "customer/model-7.tar.gz"})
        assert (invoked.status, invoked.text) == (200, predictions(2.5, 3.0))
        assert invoked.headers["x-amzn-requestid"] == "rid-invoke"
        processes.wait_for_log(
            stack, "request rid-invoke: POST /models/hp2/invoke, target model customer/model-7.tar.gz"
        )
    finally:
        unloaded = stack.unload("hp2")
    assert (unloaded.status, unloaded.json()) == (200, {"success": "Successfully unloaded model hp2."})
    assert stack.invoke("hp2").json() == error("Model hp2 is not loaded yet.")
    assert stack.unload("hp2").json() == error("Model hp2 is not loaded yet.")
    assert stack.listed().json() == {"models": []}
    assert stack.load("hp2", url).status == 200  # loading the same name again works
    assert stack.unload("hp2").status == 200


def test_the_path_names_the_model_and_version_and_method_attributes_are_honoured(stack, loaded):
    loaded("versions", paths.HALF_PLUS_TWO_2_VERSIONS)
    loaded("three", paths.HALF_PLUS_THREE)
    attributes = "X_Amzn_SageMaker_Custom_Attributes"
    assert stack.invoke("three", **{attributes: "tfs-model-name=versions"}).text == predictions(3.5, 4.0)
    assert stack.invoke("versions", **{attributes: "tfs-model-version=123"}).text == predictions(2.5, 3.0)
    missing = stack.invoke("versions", **{attributes: "tfs-model-version=999"})
    assert (missing.status, missing.json()) == (404, error("Servable not found for request: Specific(versions, 999)"))
    regress = stack.invoke(
        "three",
        {"signature_name": "tensorflow/serving/regress", "examples": [{"x": 1.0}]},
        **{attributes: "tfs-method=regress"},
    )
    assert (regress.status, regress.json()) == (200, {"results": [3.5]})


def test_the_list_is_sorted_and_paginated(stack, loaded):
    names = ["b", "a", "B", "a.2", "c_1"]
    for name in names:
        loaded(name)
    assert [m["modelName"] for m in stack.listed().json()["models"]] == sorted(names)  # code-point order
    seen, token, pages = [], None, 0
    while True:
        answer = stack.listed("?limit=2" + (f"&next_page_token={token}" if token else "")).json()
        pages += 1
        seen += [m["modelName"] for m in answer["models"]]
        token = answer.get("nextPageToken")
        if token is None:
            break
    assert (seen, pages) == (sorted(names), 3)
    # a page starts after the last name of the previous one: a model added meanwhile is neither repeated nor skips one
    first = stack.listed("?limit=2").json()
    loaded("A")
    rest = stack.listed(f"?limit=100&next_page_token={first['nextPageToken']}").json()
    assert [m["modelName"] for m in first["models"] + rest["models"]] == sorted(names)


@pytest.mark.parametrize(
    "query, message",
    [
        ("?limit=0", "invalid limit '0': must be an integer from 1 to 1000"),
        ("?limit=1001", "invalid limit '1001': must be an integer from 1 to 1000"),
        ("?limit=x", "invalid limit 'x': must be an integer from 1 to 1000"),
        ("?next_page_token=%2F%2F%2F", "invalid next_page_token '///'"),
    ],
)
def test_a_bad_limit_or_token_is_400(stack, query, message):
    answer = stack.listed(query)
    assert (answer.status, answer.json()) == (400, error(message))
