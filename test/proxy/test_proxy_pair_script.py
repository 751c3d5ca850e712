"""A code/inference.py with `input_handler` + `output_handler`: the model server call between them, its answer
as a requests.Response, its errors; also the default codecs imported by a script (real model server)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

import support
from proxy_harness import App, write_model_dir

# The custom attribute case=<name> tells the script what to do.
SCRIPT = '''
import io
import json

import requests

from sagemaker_tfs import HandlerError


def _case(context):
    for part in (context.custom_attributes or "").split(","):
        key, _, value = part.strip().partition("=")
        if key == "case":
            return value
    return "describe"


def input_handler(data, context):
    body = data.read()
    case = _case(context)
    if case == "form":
        return {"instances": "1.0"}  # form-encoded, as requests.post(data=dict) would
    if case == "str":
        return body.decode()
    if case == "file":
        return io.BytesIO(body)
    if case == "raise-in-input":
        raise ValueError("cannot read that")
    return body


def output_handler(response, context):
    case = _case(context)
    if case == "raise":  # what the original container's examples do
        raise ValueError(f"model server answered {response.status_code}")
    if case == "handler-error":
        raise HandlerError(422, "the model refused it")
    described = {
        "class": f"{type(response).__module__}.{type(response).__name__}",
        "is_requests_response": isinstance(response, requests.Response),
        "status_code": response.status_code,
        "ok": response.ok,
        "json": response.json(),
        "text": response.text,
        "content_type": response.headers["content-type"],
        "url": response.url,
    }
    return json.dumps(described), "application/json"
'''

DEFAULTS_SCRIPT = '''
from sagemaker_tfs.codecs import default_input_handler as input_handler
from sagemaker_tfs.codecs import default_output_handler as output_handler
'''


@pytest.fixture(scope="module")
def app(model_server, tmp_path_factory) -> App:
    """Under gthread workers: each thread keeps its own connection to the model server."""
    model_dir = write_model_dir(tmp_path_factory.mktemp("pair"), SCRIPT)
    with App(model_dir, model_server, workers=1, threads=4, worker_class="gthread") as app:
        yield app


def invoke(app: App, body: str, case: str | None = None, **options):
    if case is not None:
        options["X_Amzn_SageMaker_Custom_Attributes"] = f"case={case}"
    return app.invoke(body, **options)


def test_the_contract_is_logged(app):
    assert "inference.py: input_handler(data, context) -> model server -> output_handler(response, context)" in app.log()


def test_output_handler_gets_a_requests_response(app, model_server):
    answer = invoke(app, '{"instances": [1.0, 2.0]}')
    assert answer.status == 200
    assert answer.json() == {
        "class": "requests.models.Response",
        "is_requests_response": True,
        "status_code": 200,
        "ok": True,
        "json": {"predictions": [3.5, 4.0]},
        "text": '{\n    "predictions": [3.5, 4.0\n    ]\n}',
        "content_type": "application/json",
        "url": f"http://127.0.0.1:{model_server.rest_port}/v1/models/half_plus_three:predict",
    }


def test_output_handler_gets_model_server_errors_too(app):
    described = invoke(app, '{"instances": ["a"]}').json()
    assert (described["status_code"], described["ok"]) == (400, False)
    assert described["json"]["error"].startswith("Failed to process element: 0 of 'instances' list.")


@pytest.mark.parametrize("case", ["str", "file"])
def test_input_handler_may_return_str_or_a_file(app, case):
    assert invoke(app, '{"instances": [5.0]}', case).json()["json"] == {"predictions": [5.5]}


def test_a_dict_is_form_encoded_as_requests_does(app):
    described = invoke(app, "", "form").json()
    assert described["status_code"] == 400
    assert described["json"]["error"].startswith("JSON Parse error")  # the model server got instances=1.0


def test_when_output_handler_raises_on_a_model_server_error_the_client_gets_that_error(app):
    answer = invoke(app, '{"instances": ["a"]}', "raise", X_Amzn_RequestId="req-pass")
    assert (answer.status, answer.content_type) == (400, "application/json")
    assert answer.json() == {"error": "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: "
                                      "JSON Value: \"a\" Type: String is not of expected type: float"}
    assert "request req-pass: output_handler raised ValueError: model server answered 400" in app.log()


def test_when_output_handler_raises_on_success_it_is_a_500(app):
    answer = invoke(app, '{"instances": [1.0]}', "raise")
    assert (answer.status, answer.json()) == (500, {"error": "model server answered 200"})


def test_a_handler_error_from_output_handler_keeps_its_status(app):
    answer = invoke(app, '{"instances": ["a"]}', "handler-error")
    assert (answer.status, answer.json()) == (422, {"error": "the model refused it"})


def test_an_exception_in_input_handler_is_a_500(app):
    answer = invoke(app, "[]", "raise-in-input")
    assert (answer.status, answer.json()) == (500, {"error": "cannot read that"})


def test_concurrent_requests_on_threads(app):
    def one(i: int) -> list:
        return invoke(app, json.dumps({"instances": [float(i)]})).json()["json"]["predictions"]

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, range(40)))
    assert results == [[0.5 * i + 3] for i in range(40)]


def test_the_default_codecs_behave_the_same_from_a_script(model_server, start_app, tmp_path):
    app = start_app(write_model_dir(tmp_path, DEFAULTS_SCRIPT))
    answer = app.invoke("1,2\n3,4\n", content_type="text/csv", accept="application/jsonlines")
    assert (answer.status, answer.content_type, answer.body) == (200, "application/jsonlines", b"[3.5,4.0]\n[4.5,5.0]")
    assert app.invoke("x", content_type="image/png").status == 415
    error = app.invoke('["a"]', accept="text/csv")
    assert (error.status, error.json()["error"].startswith("Failed to process element")) == (400, True)


def test_an_unreachable_model_server_is_a_502(start_app, tmp_path):
    rest, grpc = support.free_port(), support.free_port()
    app = start_app(write_model_dir(tmp_path, SCRIPT), wait_for=503,
                    env={"TFS_REST_PORTS": str(rest), "TFS_GRPC_PORTS": str(grpc)})
    answer = app.invoke('{"instances": [1.0]}')
    assert (answer.status, answer.content_type) == (502, "application/json")
    assert answer.json()["error"] == (f"the model server at 127.0.0.1:{rest} is not reachable (Connection refused); "
                                      "it may be starting or restarting")
