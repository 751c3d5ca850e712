"""A code/inference.py with `handler(data, context)` in a gunicorn worker: its log, and the gRPC channel the
worker makes after the fork (the rest runs in-process in test/app)."""

from __future__ import annotations

import json

import processes
import pytest
from app_scripts import HANDLER_FILES, HANDLER_SCRIPT
from app_support import write_model_dir
from gunicorn_harness import App


@pytest.fixture(scope="module")
def app(model_server, tmp_path_factory) -> App:
    model_dir = write_model_dir(tmp_path_factory.mktemp("handler"), HANDLER_SCRIPT, HANDLER_FILES)
    with App(model_dir, model_server, env={"SAGEMAKER_GUNICORN_TIMEOUT_SECONDS": "12"}) as app:
        yield app


def call(app: App, case: str, **options) -> tuple[int, str | None, bytes]:
    answer = app.invoke(json.dumps({"case": case, **options.pop("body", {})}), **options)
    return answer.status, answer.content_type, answer.body


def test_the_script_and_its_contract_are_logged(app):
    processes.wait_for_log(app, "handler script ", "inference.py: handler(data, context) answers each request")


def test_the_grpc_channel_reaches_the_model_server(app):
    status, content_type, body = call(app, "grpc")
    assert (status, content_type) == (200, "application/octet-stream")
    assert b"\x08\x7b" in body and b"\x10\x1e" in body  # version 123, state AVAILABLE (30)
