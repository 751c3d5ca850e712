"""A code/inference.py with `input_handler` + `output_handler` under gthread workers: its log, and concurrent
requests on the worker's threads, each keeping its own connection to the model server (the rest runs
in-process in test/app)."""

from __future__ import annotations

import http.client
import json
from concurrent.futures import ThreadPoolExecutor

import processes
import pytest
from app_scripts import PAIR_SCRIPT
from app_support import write_model_dir
from gunicorn_harness import App


@pytest.fixture(scope="module")
def app(model_server, tmp_path_factory) -> App:
    """Under gthread workers: each thread keeps its own connection to the model server."""
    model_dir = write_model_dir(tmp_path_factory.mktemp("pair"), PAIR_SCRIPT)
    with App(model_dir, model_server, workers=1, threads=4, worker_class="gthread") as app:
        yield app


def invoke(app: App, body: str, case: str | None = None, **options):
    if case is not None:
        options["X_Amzn_SageMaker_Custom_Attributes"] = f"case={case}"
    return app.invoke(body, **options)


def test_the_contract_is_logged(app):
    processes.wait_for_log(
        app, "inference.py: input_handler(data, context) -> model server -> output_handler(response, context)"
    )


def test_concurrent_requests_on_threads(app):
    def one(i: int) -> list:
        return invoke(app, json.dumps({"instances": [float(i)]})).json()["json"]["predictions"]

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, range(40)))
    assert results == [[0.5 * i + 3] for i in range(40)]


def test_a_chunked_body_without_content_length_reaches_the_script(app):
    """nginx always sends Content-Length; gunicorn reached directly may get a chunked body instead."""
    connection = http.client.HTTPConnection("127.0.0.1", app.port, timeout=60)
    try:  # an iterable body without Content-Length is sent chunked
        connection.request(
            "POST", "/invocations", iter([b'{"instances": ', b"[1.0, 2.0]}"]), {"Content-Type": "application/json"}
        )
        answer = connection.getresponse()
        assert (answer.status, json.loads(answer.read())["json"]) == (200, {"predictions": [3.5, 4.0]})
    finally:
        connection.close()
