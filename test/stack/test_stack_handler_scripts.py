"""code/inference.py through the whole stack, in each style: the input_handler/output_handler pair; handler;
handler with code/requirements.txt; handler with code/lib; code/lib and requirements.txt together."""

from __future__ import annotations

import re
import subprocess
import sys

import processes
import pytest
import serve_stack
from model_dirs import write_wheel
from stack_support import invoke, model_dir

PAIR = """
    import json

    def input_handler(data, context):
        if context.request_content_type == "text/plain":  # numbers separated by spaces
            return json.dumps({"instances": [float(value) for value in data.read().split()]})
        return data.read()

    def output_handler(response, context):
        if response.status_code != 200:
            raise ValueError(response.content.decode())  # as the original's examples do
        return " ".join(map(str, response.json()["predictions"])), "text/plain"
"""

HANDLER = """
    import json

    import requests

    from sagemaker_tfs import HandlerError

    def handler(data, context):
        body = data.read()
        if body == b"boom":
            raise RuntimeError("boom: the script failed")
        if body == b"teapot":
            raise HandlerError(418, "I am a teapot")
        response = requests.post(context.rest_uri, data=json.dumps({"instances": json.loads(body)}),
                                 timeout=context.timeout)
        if response.status_code != 200:
            return response.content, "application/json", response.status_code
        fields = {name: value for name, value in context._asdict().items() if name != "channel"}
        return {"predictions": response.json()["predictions"], "context": fields,
                "channel": type(context.channel).__name__}
"""

WHEEL_HANDLER = """
    from stackdemo import VALUE

    def handler(data, context):
        return VALUE, "text/plain"
"""

LIB_HANDLER = """
    import json

    import requests

    from twice import twice

    def handler(data, context):
        instances = [twice(value) for value in json.loads(data.read())]
        response = requests.post(context.rest_uri, json={"instances": instances})
        return response.content, "application/json"
"""
LIB = {"lib/twice.py": "def twice(x):\n    return 2 * x\n"}


def stack_of(tmp_path_factory, name: str, script: str, files: dict[str, str] | None = None) -> serve_stack.Stack:
    """A stack (not started: `with` starts and stops it) serving half_plus_three with this script."""
    return serve_stack.Stack(model_dir(tmp_path_factory.mktemp(name), script, files))


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    with stack_of(tmp_path_factory, "pair", PAIR) as stack:
        yield stack


@pytest.fixture(scope="module")
def handler(tmp_path_factory):
    with stack_of(tmp_path_factory, "handler", HANDLER) as stack:
        yield stack


def test_pair_shapes_the_request_and_the_answer(pair):
    answer = invoke(pair, "1 2 5", "text/plain")
    assert (answer.status, answer.headers["content-type"], answer.text) == (200, "text/plain", "3.5 4.0 5.5")


def test_pair_whose_output_handler_raises_on_a_model_server_error_passes_that_error_on(pair):
    answer = invoke(pair, '{"instances": ["a"]}')
    assert answer.status == 400
    assert answer.json() == {
        "error": "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: "
        'JSON Value: "a" Type: String is not of expected type: float'
    }


def test_handler_answers_a_bare_dict_with_the_context_of_the_request(handler):
    answer = invoke(
        handler,
        "[1.0, 2.0]",
        "application/json; charset=utf-8",
        "tfs-model-name=model,tfs-model-version=123,tfs-method=predict",
        Accept="*/*",
    )
    assert (answer.status, answer.headers["content-type"]) == (200, "application/json"), answer.text
    body = answer.json()
    assert body["predictions"] == [3.5, 4.0]
    context = body["context"]
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1/models/model/versions/123:predict", context.pop("rest_uri"))
    assert re.fullmatch(r"\d+", context.pop("grpc_port"))
    assert context == {
        "model_name": "model",
        "model_version": "123",
        "method": "predict",
        "custom_attributes": "tfs-model-name=model,tfs-model-version=123,tfs-method=predict",
        "request_content_type": "application/json; charset=utf-8",
        "accept_header": "*/*",
        "content_length": 10,
        "timeout": 30.0,
    }
    assert body["channel"] == "Channel"


def test_handler_context_defaults_without_headers(handler):
    context = invoke(handler, "[1.0]", content_type=None).json()["context"]
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1/models/model:predict", context["rest_uri"])
    assert (
        context["model_name"],
        context["model_version"],
        context["method"],
        context["custom_attributes"],
        context["request_content_type"],
        context["accept_header"],
    ) == (None, None, None, None, "application/json", "application/json")


def test_a_user_exception_is_a_500_with_its_message_and_a_logged_traceback(handler):
    answer = invoke(handler, "boom", X_Amzn_RequestId="req-boom-1")
    assert (answer.status, answer.json()) == (500, {"error": "boom: the script failed"})
    assert answer.headers["x-amzn-requestid"] == "req-boom-1"
    line = "request req-boom-1: 500 RuntimeError: boom: the script failed"
    log = processes.wait_for_log(handler, line)
    processes.wait_for_log(handler, "Traceback (most recent call last)", since=log.index(line) + len(line))


def test_a_handler_error_chooses_the_status(handler):
    answer = invoke(handler, "teapot")
    assert (answer.status, answer.json()) == (418, {"error": "I am a teapot"})


@pytest.fixture(scope="module")
def wheel_requirements(tmp_path_factory):
    """A model whose requirements.txt installs `stackdemo` from a wheel built here (no index); uninstalled after."""
    folder = model_dir(
        tmp_path_factory.mktemp("requirements"),
        WHEEL_HANDLER,
        {"requirements.txt": "--no-index\n--find-links wheels\nstackdemo==0.1\n"},
    )
    write_wheel(folder / "code" / "wheels", "stackdemo", "stackdemo 0.1, installed from code/requirements.txt")
    try:
        with serve_stack.Stack(folder) as stack:
            yield stack
    finally:
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "-y", "-q", "stackdemo"], capture_output=True)


def test_handler_with_requirements_installed_at_startup(wheel_requirements):
    answer = invoke(wheel_requirements, "x")
    assert (answer.status, answer.text) == (200, "stackdemo 0.1, installed from code/requirements.txt")
    processes.wait_for_log(wheel_requirements, "Successfully installed stackdemo-0.1")


def test_handler_with_code_lib(tmp_path_factory):
    with stack_of(tmp_path_factory, "lib", LIB_HANDLER, LIB) as stack:
        answer = invoke(stack, "[1.0, 2.0]")
        assert (answer.status, answer.json()) == (200, {"predictions": [4.0, 5.0]})


def test_code_lib_wins_over_requirements_which_are_not_installed(tmp_path_factory):
    files = {**LIB, "requirements.txt": "no-such-package-anywhere==1.0\n"}  # would fail to install
    with stack_of(tmp_path_factory, "lib-and-requirements", LIB_HANDLER, files) as stack:
        assert invoke(stack, "[2.0]").json() == {"predictions": [5.0]}
        processes.wait_for_log(
            stack, "/code/lib exists: its modules are used and ", "requirements.txt is not installed"
        )
