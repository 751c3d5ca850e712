"""Observability through the whole stack: the Prometheus pages (the app's and serve's, added up over gunicorn's
workers; the model servers' TFS page), the Server-Timing header, JSON logs with the request id, and TensorFlow's
start-up noise kept out of the logs. Pages are scraped after real requests and parsed with prometheus_client."""

from __future__ import annotations

import json
import os
import signal
from urllib.parse import urlsplit

import metrics_pages
import ports
import processes
import pytest
import serve_stack
from stack_support import call, invoke, model_dir

PASS_THROUGH = """
    import logging

    def input_handler(data, context):
        logging.getLogger("inference").info("input_handler called")
        return data.read()

    def output_handler(response, context):
        return response.content, "application/json", response.status_code
"""
INSTANCES = '{"instances": [1.0, 2.0]}'


def scrape(url: str) -> dict:
    parts = urlsplit(url)
    return metrics_pages.scrape(parts.port, parts.path)


value = metrics_pages.sample
metric = metrics_pages.metric
REQUESTS = "sagemaker_tfs_request_duration_seconds_count"
TFS_PAGE = "/monitoring/prometheus/metrics"


def invocations(page: dict) -> float:
    return sum(
        v
        for (name, labels), v in page.items()
        if name == "sagemaker_tfs_request_duration_seconds_count" and ("route", "/invocations") in labels
    )


def gunicorn_workers(stack: serve_stack.Stack) -> set[int]:
    master = int((stack.runtime_dir / "gunicorn.pid").read_text())
    return processes.descendants(master)


@pytest.fixture(scope="module")
def metered(tmp_path_factory):
    root = tmp_path_factory.mktemp("metered")
    port = ports.free_port()
    env = {
        "SAGEMAKER_METRICS": "true",
        "SAGEMAKER_METRICS_PORT": str(port),
        "SAGEMAKER_SERVER_TIMING": "true",
        "SAGEMAKER_GUNICORN_WORKERS": "2",
    }
    with serve_stack.Stack(model_dir(root, PASS_THROUGH), env) as stack:
        stack.metrics_url = f"http://127.0.0.1:{port}/metrics"
        stack.metrics_port = port
        processes.wait_for_log(stack, " INFO serve: ready: ")  # nginx listens first
        # the harness's readiness check is on the page: what the tests count from here on starts settled
        metrics_pages.counted_page(port, {metric(REQUESTS, route="/ping", status="200"): 1})
        yield stack


def test_requests_are_counted_by_route_status_and_stage_over_every_worker(metered):
    """Counted as growth from the page before: the other tests of the module may run first (each waits for its
    requests to be counted, so that the page is settled when the next one starts)."""
    tfs_port = metered.model_server_ports[1]  # model server 0's REST port
    before, tfs_before = scrape(metered.metrics_url), metrics_pages.scrape(tfs_port, TFS_PAGE)
    for _ in range(3):
        answer = invoke(metered, INSTANCES)
        assert answer.status == 200
        stages = [part.split(";")[0] for part in answer.headers["server-timing"].split(", ")]
        assert stages == ["input_handler", "model_server", "output_handler", "total"]
        assert all(float(part.split("dur=")[1]) >= 0 for part in answer.headers["server-timing"].split(", "))
    assert invoke(metered, '{"instances": ["a"]}').status == 400  # the model server's error, passed on
    assert call(metered.url + "/ping").status == 200
    assert call(metered.url + "/nothing-here").status == 404
    assert call(metered.url + "/metrics").status == 404  # the page is never served through nginx

    # Workers write their totals twice a second, each its own: the page once it has every count checked here.
    stage_counts = "sagemaker_tfs_stage_duration_seconds_count"
    page = metrics_pages.counted_page(
        metered.metrics_port,
        {
            metric(REQUESTS, route="/invocations", status="200"): 3,
            metric(REQUESTS, route="/invocations", status="400"): 1,
            metric(REQUESTS, route="/ping", status="200"): 1,
            **{
                metric(stage_counts, route="/invocations", stage=stage): 4
                for stage in ("input_handler", "model_server", "output_handler")
            },
            metric("sagemaker_tfs_request_duration_seconds_bucket", route="/invocations", status="200", le="+Inf"): 3,
        },
        before,
    )
    assert invocations(page) - invocations(before) == 4
    assert value(page, REQUESTS, route="other", status="404") is None  # nginx answers other paths itself
    assert value(page, "sagemaker_tfs_requests_in_flight") == 0
    assert value(page, "sagemaker_tfs_serve_state", state="ready") == 1
    assert value(page, "sagemaker_tfs_serve_state", state="starting") == 0
    assert value(page, "sagemaker_tfs_process_restarts_total", process="gunicorn") == 0
    assert value(page, "sagemaker_tfs_process_restarts_total", process="model server 0") == 0
    assert ports.listening_addresses(metered.metrics_port) == {"127.0.0.1"}

    # The model server's own page (TFS's names) on its loopback REST port.
    metrics_pages.counted_page(
        tfs_port,
        {
            metric(":tensorflow:serving:request_count_total", model_name="model", status="INVALID_ARGUMENT"): 1,
            metric(
                ":tensorflow:serving:request_latency_count", API="predict", entrypoint="REST", model_name="model"
            ): 3,
        },
        tfs_before,
        TFS_PAGE,
    )


def test_a_killed_worker_is_a_restart_and_its_counts_stay(metered):
    served = invocations(scrape(metered.metrics_url))
    workers = gunicorn_workers(metered)
    assert len(workers) == 2
    os.kill(min(workers), signal.SIGKILL)
    processes.wait_for(
        lambda: len(gunicorn_workers(metered) - workers) == 1 and len(gunicorn_workers(metered)) == 2,
        what="gunicorn to replace the worker",
    )
    assert invoke(metered, INSTANCES).status == 200
    processes.wait_for(lambda: invocations(scrape(metered.metrics_url)) == served + 1, what="the page to count it")
    page = scrape(metered.metrics_url)
    assert value(page, "sagemaker_tfs_worker_restarts_total") == 1
    assert value(page, "sagemaker_tfs_requests_in_flight") == 0


def test_json_logs_name_the_request_and_tensorflow_is_quiet(tmp_path):
    env = {"SAGEMAKER_LOG_FORMAT": "json"}
    with serve_stack.Stack(model_dir(tmp_path, PASS_THROUGH), env) as stack:
        answer = invoke(stack, INSTANCES, X_Amzn_RequestId="rid-json-1")
        assert answer.status == 200
        assert "server-timing" not in answer.headers  # off by default
        assert invoke(stack, "{", X_Amzn_RequestId="rid-json-2").status == 400
        processes.wait_for_log(stack, '"request_id": "rid-json-1"', '"request_id": "rid-json-2"')
    log_text = stack.log()  # whole once serve has exited: no line of either request can come later
    lines = [json.loads(line) for line in log_text.splitlines() if line.startswith("{")]
    by_request = [line for line in lines if line.get("request_id") == "rid-json-1"]
    assert [line["message"] for line in by_request] == ["input_handler called"]
    assert by_request[0]["logger"] == "inference" and by_request[0]["level"] == "INFO"
    failed = [line for line in lines if line.get("request_id") == "rid-json-2"]
    assert [line["message"] for line in failed] == ["input_handler called"]
    loggers = {line["logger"] for line in lines}
    assert {"serve", "gunicorn.error", "sagemaker_tfs.app", "sagemaker_tfs.model_server"} <= loggers
    assert "oneDNN" not in log_text and "cuda drivers" not in log_text and "cpu_feature_guard" not in log_text


def test_nginx_writes_an_access_line_per_request_with_its_id_and_times(metered):
    """nginx writes its access log to serve's stdout itself (not through serve), one line per request."""
    served = invocations(scrape(metered.metrics_url))
    assert invoke(metered, INSTANCES, X_Amzn_RequestId="rid-access-1").status == 200
    assert invoke(metered, "{", X_Amzn_RequestId="rid-access-2").status == 400

    log = processes.wait_for_log(metered, " id=rid-access-1\n", " id=rid-access-2\n")
    processes.wait_for(
        lambda: invocations(scrape(metered.metrics_url)) == served + 2, what="the page to count both"
    )  # the page settled, for the others
    first, second = [line for line in log.splitlines() if " id=rid-access-" in line]
    assert first.startswith('127.0.0.1 "POST /invocations HTTP/1.1" 200 ') and first.endswith(" id=rid-access-1")
    assert second.startswith('127.0.0.1 "POST /invocations HTTP/1.1" 400 ') and second.endswith(" id=rid-access-2")
    assert " upstream=" in first
    nginx_pid = int((metered.runtime_dir / "nginx.pid").read_text())
    assert os.readlink(f"/proc/{nginx_pid}/fd/1") == os.readlink(f"/proc/{metered.proc.pid}/fd/1")
