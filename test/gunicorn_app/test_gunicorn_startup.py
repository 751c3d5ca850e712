"""The app under gunicorn: /execution-parameters from the Batch Transform settings, and start-up failures
that stop gunicorn."""

from __future__ import annotations

import processes
import pytest
from app_support import write_model_dir
from gunicorn_harness import App


@pytest.fixture(scope="module")
def app(model_server, tmp_path_factory) -> App:
    with App(write_model_dir(tmp_path_factory.mktemp("routes")), model_server) as app:
        yield app


def test_execution_parameters_report_nothing_when_nothing_is_set(app):
    """SageMaker then uses the job's values, else its defaults (1, MULTI_RECORD, 6 MB)."""
    answer = app.call("GET", "/execution-parameters")
    assert (answer.status, answer.content_type, answer.body) == (200, "application/json", b"{}")


def test_execution_parameters_report_the_batch_transform_settings_that_are_set(start_app, tmp_path):
    app = start_app(
        write_model_dir(tmp_path),
        workers=2,
        threads=3,
        worker_class="gthread",
        env={"SAGEMAKER_BATCH_STRATEGY": "SINGLE_RECORD", "SAGEMAKER_MAX_PAYLOAD_IN_MB": "20"},
    )
    assert app.call("GET", "/execution-parameters").json() == {"BatchStrategy": "SINGLE_RECORD", "MaxPayloadInMB": 20}


@pytest.mark.parametrize(
    "concurrency, payload, expected",
    [
        ("8", "20", {"MaxConcurrentTransforms": 5, "MaxPayloadInMB": 20}),
        ("50", None, {"MaxConcurrentTransforms": 16}),  # SageMaker's default payload, 6 MB
    ],
)
def test_execution_parameters_never_exceed_100_mb_in_flight(start_app, tmp_path, concurrency, payload, expected):
    env = {"SAGEMAKER_MAX_CONCURRENT_TRANSFORMS": concurrency}
    if payload is not None:
        env["SAGEMAKER_MAX_PAYLOAD_IN_MB"] = payload
    app = start_app(write_model_dir(tmp_path), env=env)
    assert app.call("GET", "/execution-parameters").json() == expected
    processes.wait_for_log(
        app,
        f"/execution-parameters reports MaxConcurrentTransforms="
        f"{expected['MaxConcurrentTransforms']}, not SAGEMAKER_MAX_CONCURRENT_TRANSFORMS="
        f"{concurrency}: SageMaker refuses more than 100 MB in flight",
    )


def failed_start(start_app, model_dir, env=None) -> str:
    """The log of an app that must not start: gunicorn exits (status 3, a worker failed to boot)."""
    app = start_app(model_dir, wait_for=None, env=env)
    assert app.proc.wait(timeout=60) != 0
    return app.log()


@pytest.mark.parametrize(
    "script, message",
    [
        (
            "def input_handler(data, context):\n    return data.read()\n",
            "Handlers are not implemented correctly in user script. {path} defines only input_handler: define "
            "handler(data, context), or both input_handler(data, context) and output_handler(response, context)",
        ),
        (
            "def output_handler(response, context):\n    return response.content, None\n",
            "Handlers are not implemented correctly in user script. {path} defines only output_handler",
        ),
        ("import json\n", "Handlers are not implemented correctly in user script. {path} defines none of them"),
        ("handler = 5\n", "Handlers are not implemented correctly in user script. {path}: handler is not a function"),
        ("raise RuntimeError('no GPU here')\n", "{path} failed to import: RuntimeError: no GPU here"),
        (
            "import not_installed_anywhere\n",
            "{path} failed to import: ModuleNotFoundError: No module named 'not_installed_anywhere'",
        ),
    ],
)
def test_a_script_that_cannot_serve_stops_the_app_with_one_message(start_app, tmp_path, script, message):
    model_dir = write_model_dir(tmp_path, script)
    log = failed_start(start_app, model_dir)
    assert message.format(path=model_dir / "code" / "inference.py") in log


def test_settings_problems_stop_the_app(start_app, tmp_path):
    log = failed_start(start_app, write_model_dir(tmp_path), env={"SAGEMAKER_BATCH_STRATEGY": "Sometimes"})
    assert "SAGEMAKER_BATCH_STRATEGY='Sometimes' is not valid: must be MULTI_RECORD or SINGLE_RECORD" in log


def test_without_serve_s_variables_the_app_says_which_are_missing(start_app, tmp_path):
    app = App(write_model_dir(tmp_path), None)
    app.env.pop("TFS_DEFAULT_MODEL_NAME")
    app.start(wait_for=None)
    try:
        assert app.proc.wait(timeout=60) != 0
        assert (
            "TFS_REST_PORTS, TFS_GRPC_PORTS, TFS_DEFAULT_MODEL_NAME not set: the app is started by `serve`" in app.log()
        )
    finally:
        app.stop()
