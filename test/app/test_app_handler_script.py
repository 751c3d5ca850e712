"""A code/inference.py with `handler(data, context)`, in-process: the Context, return values, errors (real
model server)."""

from __future__ import annotations

import json

import ports
import pytest
from app_harness import InProcessApp
from app_scripts import HANDLER_FILES, HANDLER_SCRIPT
from app_support import DEFAULT_MODEL, Calls, write_model_dir


@pytest.fixture(scope="module")
def app(model_server, tmp_path_factory) -> InProcessApp:
    model_dir = write_model_dir(tmp_path_factory.mktemp("handler"), HANDLER_SCRIPT, HANDLER_FILES)
    with InProcessApp(model_dir, model_server, env={"SAGEMAKER_GUNICORN_TIMEOUT_SECONDS": "12"}) as app:
        yield app


def call(app: Calls, case: str, **options) -> tuple[int, str | None, bytes]:
    answer = app.invoke(json.dumps({"case": case, **options.pop("body", {})}), **options)
    return answer.status, answer.content_type, answer.body


def test_context_from_the_headers(app, model_server):
    body = json.dumps({"case": "context"})
    attributes = "tfs-model-name=half_plus_two,tfs-model-version=123,tfs-method=regress,tfs-other=a=b,foo=bar"
    answer = app.invoke(
        body,
        content_type="application/json; charset=utf-8",
        accept="text/csv",
        X_Amzn_SageMaker_Custom_Attributes=attributes,
    )
    assert (answer.status, answer.content_type) == (200, "application/json")
    assert answer.json() == {
        "class": "Context",
        "names": [
            "model_name",
            "model_version",
            "method",
            "rest_uri",
            "grpc_port",
            "channel",
            "custom_attributes",
            "request_content_type",
            "accept_header",
            "content_length",
            "timeout",
        ],
        "model_name": "half_plus_two",
        "model_version": "123",
        "method": "regress",
        "rest_uri": f"http://127.0.0.1:{model_server.rest_port}/v1/models/half_plus_two/versions/123:regress",
        "grpc_port": str(model_server.grpc_port),
        "channel": "Channel",
        "custom_attributes": attributes,
        "request_content_type": "application/json; charset=utf-8",
        "accept_header": "text/csv",
        "content_length": len(body),
        "timeout": 12.0,
    }


def test_context_defaults(app, model_server):
    context = app.invoke(json.dumps({"case": "context"}), content_type=None).json()
    assert (context["model_name"], context["model_version"], context["method"]) == (None, None, None)
    assert context["rest_uri"] == f"http://127.0.0.1:{model_server.rest_port}/v1/models/{DEFAULT_MODEL}:predict"
    assert (context["custom_attributes"], context["request_content_type"], context["accept_header"]) == (
        None,
        "application/json",
        "application/json",
    )


def test_the_handler_can_call_the_model_server_itself(app):
    status, _, body = call(app, "model", body={"instances": [1.0, 2.0]})
    assert (status, json.loads(body)) == (200, {"predictions": [3.5, 4.0]})


def test_code_and_code_lib_are_importable(app):
    assert call(app, "imports") == (200, "application/json", b'{"helper": "HI", "lib": 42}')


@pytest.mark.parametrize(
    "case, accept, expected",
    [
        ("tuple", None, (200, "application/json", b'{"ok": true}')),
        ("no-content-type", None, (200, "application/json", b"raw")),
        ("with-status", None, (201, "text/plain", b"created")),
        ("two-chars", None, (200, "application/json", b"ok")),  # never split into body "o", content type "k"
        ("two-chars", "text/plain", (200, "text/plain", b"ok")),
        ("bare-bytes", "text/csv;q=0.5, application/octet-stream", (200, "application/octet-stream", b"\x00\x01")),
        ("bare-bytes", "*/*", (200, "application/json", b"\x00\x01")),
        ("bare-dict", "text/csv", (200, "application/json", b'{"a": [1, 2]}')),
        ("bare-list", None, (200, "application/json", b'[1, "x"]')),
    ],
)
def test_return_values(app, case, accept, expected):
    assert call(app, case, accept=accept) == expected


@pytest.mark.parametrize(
    "case, error",
    [
        (
            "none",
            "handler returned None, which cannot be sent: return (body, content_type), (body, content_type, "
            "status) or a body (str, bytes, dict or list)",
        ),
        (
            "four-tuple",
            "handler returned a tuple of 4 items ('a', 'text/plain', 200, 'extra'): return (body, "
            "content_type) or (body, content_type, status)",
        ),
        ("float-body", "handler returned (1.5, 'text/csv'): the body must be str, bytes, dict or list, not float"),
        (
            "string-status",
            "handler returned ('x', 'text/plain', '400'): the status must be an integer from 200 to 599, not '400'",
        ),
        (
            "interim-status",
            "handler returned ('x', 'text/plain', 100): the status must be an integer from 200 to 599, not 100",
        ),
        (
            "int-content-type",
            "handler returned ('x', 5): the content type must be a string such as 'application/json' or None, not 5",
        ),
        (
            "unserialisable",
            "handler returned {'when': {1, 2}}, which cannot be sent as JSON: Object of type set is "
            "not JSON serializable",
        ),
    ],
)
def test_a_return_value_that_cannot_be_sent_is_a_500_saying_what_was_returned(app, case, error):
    status, content_type, body = call(app, case)
    assert (status, content_type, json.loads(body)) == (500, "application/json", {"error": error})


def test_an_exception_is_a_500_with_its_message_and_a_logged_traceback(app):
    answer = app.invoke(json.dumps({"case": "raise"}), X_Amzn_RequestId="req-raise")
    assert (answer.status, answer.body) == (500, b'{"error": "something broke"}')
    log = app.log()
    assert "request req-raise: 500 ValueError: something broke" in log
    assert 'raise ValueError("something broke")' in log  # the traceback names the script's line


def test_handler_error_chooses_the_status(app):
    status, content_type, body = call(app, "handler-error", body={"status": 422, "message": "x must be positive"})
    assert (status, content_type, body) == (422, "application/json", b'{"error": "x must be positive"}')


def test_falcon_http_error_keeps_its_status_and_headers(app):
    answer = app.invoke(json.dumps({"case": "falcon-error"}), accept="text/csv")
    assert (answer.status, answer.content_type, answer.headers["retry-after"]) == (409, "application/json", "5")
    assert answer.json() == {"error": "already there", "title": "Conflict", "description": "already there"}


def test_two_instances_rest_and_grpc_of_one_request_are_the_same_instance(model_server, make_app, tmp_path):
    """The second instance is not running: /ping says so, and requests alternate between the instances."""
    dead_rest, dead_grpc = ports.free_port(), ports.free_port()
    app = make_app(
        write_model_dir(tmp_path, HANDLER_SCRIPT, HANDLER_FILES),
        env={
            "TFS_REST_PORTS": f"{model_server.rest_port},{dead_rest}",
            "TFS_GRPC_PORTS": f"{model_server.grpc_port},{dead_grpc}",
        },
    )
    ping = app.call("GET", "/ping")
    assert ping.status == 503
    assert ping.json()["error"].startswith(f"not ready: the model server at 127.0.0.1:{dead_rest} is not reachable")
    pairs = set()
    for _ in range(4):
        context = app.invoke(json.dumps({"case": "context"})).json()
        pairs.add((context["rest_uri"].split("/")[2], context["grpc_port"]))
    assert pairs == {
        (f"127.0.0.1:{model_server.rest_port}", str(model_server.grpc_port)),
        (f"127.0.0.1:{dead_rest}", str(dead_grpc)),
    }
