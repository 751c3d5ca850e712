"""A code/inference.py with `input_handler` + `output_handler`, in-process: the model server call between
them, its answer as a requests.Response, its errors; also the default codecs imported by a script (real model
server)."""

from __future__ import annotations

import ports
import pytest
from app_harness import InProcessApp
from app_scripts import DEFAULTS_SCRIPT, PAIR_SCRIPT
from app_support import Calls, write_model_dir


@pytest.fixture(scope="module")
def app(model_server, tmp_path_factory) -> InProcessApp:
    with InProcessApp(write_model_dir(tmp_path_factory.mktemp("pair"), PAIR_SCRIPT), model_server) as app:
        yield app


def invoke(app: Calls, body: str, case: str | None = None, **options):
    if case is not None:
        options["X_Amzn_SageMaker_Custom_Attributes"] = f"case={case}"
    return app.invoke(body, **options)


def test_output_handler_gets_a_requests_response(app, model_server):
    answer = invoke(app, '{"instances": [1.0, 2.0]}')
    assert answer.status == 200
    assert answer.json() == {
        "class": "sagemaker_tfs.model_client.http_client.ModelServerResponse",  # a requests.Response (below)
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
    assert answer.json() == {
        "error": "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: "
        'JSON Value: "a" Type: String is not of expected type: float'
    }
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


def test_the_default_codecs_behave_the_same_from_a_script(model_server, make_app, tmp_path):
    app = make_app(write_model_dir(tmp_path, DEFAULTS_SCRIPT))
    answer = app.invoke("1,2\n3,4\n", content_type="text/csv", accept="application/jsonlines")
    assert (answer.status, answer.content_type, answer.body) == (200, "application/jsonlines", b"[3.5,4.0]\n[4.5,5.0]")
    assert app.invoke("x", content_type="image/png").status == 415
    error = app.invoke('["a"]', accept="text/csv")
    assert (error.status, error.json()["error"].startswith("Failed to process element")) == (400, True)


def test_an_unreachable_model_server_is_a_502(make_app, tmp_path):
    rest, grpc = ports.free_port(), ports.free_port()
    app = make_app(
        write_model_dir(tmp_path, PAIR_SCRIPT), env={"TFS_REST_PORTS": str(rest), "TFS_GRPC_PORTS": str(grpc)}
    )
    answer = app.invoke('{"instances": [1.0]}')
    assert (answer.status, answer.content_type) == (502, "application/json")
    assert answer.json()["error"] == (
        f"the model server at 127.0.0.1:{rest} is not reachable (Connection refused); it may be starting or restarting"
    )
