"""/ping, unknown paths and methods, the log without a script: the app in-process."""

from __future__ import annotations

import pytest
from app_harness import InProcessApp
from app_support import write_model_dir


@pytest.fixture(scope="module")
def app(model_server, tmp_path_factory) -> InProcessApp:
    with InProcessApp(write_model_dir(tmp_path_factory.mktemp("routes")), model_server) as app:
        yield app


def test_ping_is_200_with_an_empty_body_when_the_default_model_is_available(app):
    answer = app.call("GET", "/ping")
    assert (answer.status, answer.body) == (200, b"")


def test_ping_is_503_when_the_default_model_is_not_served(make_app, tmp_path):
    app = make_app(write_model_dir(tmp_path), env={"TFS_DEFAULT_MODEL_NAME": "missing"})
    answer = app.call("GET", "/ping")
    assert (answer.status, answer.content_type) == (503, "application/json")
    assert answer.json() == {
        "error": f"not ready: the model server at 127.0.0.1:{app.env['TFS_REST_PORTS']} "
        "answered 404 for model missing: Could not find any versions of model missing"
    }


@pytest.mark.parametrize("method, path", [("GET", "/"), ("POST", "/predict"), ("GET", "/invocations/x")])
def test_unknown_paths_are_404(app, method, path):
    answer = app.call(method, path)
    assert (answer.status, answer.content_type, answer.body) == (404, "application/json", b'{"error": "Not Found"}')


def test_another_method_on_a_known_path_is_405(app):
    answer = app.call("GET", "/invocations")
    assert (answer.status, answer.body) == (405, b'{"error": "Method Not Allowed"}')
    assert "POST" in answer.headers["allow"]


def test_no_script_is_logged_with_where_it_was_looked_for(app):
    assert f"no handler script at {app.env['SAGEMAKER_MODEL_DIR']}/code/inference.py: the default handler" in app.log()
