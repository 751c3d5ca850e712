"""Units of observability: the settings, JSON log lines, TensorFlow's noise filter, the workers' totals and the
page that adds them up, --grpc_channel_arguments."""

from __future__ import annotations

import json
import logging
import os

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from sagemaker_tfs.config import ConfigError, Settings
from sagemaker_tfs.shared import logs
from sagemaker_tfs.shared.logs import format_from_env
from sagemaker_tfs.stack import metrics_page
from sagemaker_tfs.web.metrics import AppMetrics, Timings


def test_settings_of_observability():
    settings = Settings.from_env({})
    assert (settings.metrics, settings.metrics_port, settings.server_timing, settings.log_format) == (
        False,
        9101,
        False,
        "text",
    )
    settings = Settings.from_env(
        {
            "SAGEMAKER_METRICS": "true",
            "SAGEMAKER_METRICS_PORT": "9200",
            "SAGEMAKER_SERVER_TIMING": "true",
            "SAGEMAKER_LOG_FORMAT": "JSON",
        }
    )
    assert (settings.metrics, settings.metrics_port, settings.server_timing, settings.log_format) == (
        True,
        9200,
        True,
        "json",
    )
    with pytest.raises(ConfigError, match="SAGEMAKER_METRICS_PORT=8501 is taken by nginx or a model server"):
        Settings.from_env({"SAGEMAKER_METRICS": "true", "SAGEMAKER_METRICS_PORT": "8501"})
    with pytest.raises(ConfigError, match="SAGEMAKER_LOG_FORMAT='xml' is not valid: must be one of text, json"):
        Settings.from_env({"SAGEMAKER_LOG_FORMAT": "xml"})
    assert format_from_env({"SAGEMAKER_LOG_FORMAT": "xml"}) == "text"  # the full read reports it
    assert format_from_env({"SAGEMAKER_LOG_FORMAT": " JSON "}) == "json"
    assert format_from_env({}) == "text"


def test_json_lines_carry_the_request_id_of_the_request_being_handled():
    formatter = logs.JsonFormatter()
    record = logging.LogRecord("inference", logging.WARNING, __file__, 1, "got %d rows", (3,), None)
    assert "request_id" not in json.loads(formatter.format(record))
    token = logs.request_id.set("rid-1")
    try:
        line = json.loads(formatter.format(record))
    finally:
        logs.request_id.reset(token)
    assert {k: line[k] for k in ("level", "logger", "message", "request_id")} == {
        "level": "WARNING",
        "logger": "inference",
        "message": "got 3 rows",
        "request_id": "rid-1",
    }
    assert line["time"].endswith("Z") and line["process"] == os.getpid()


def test_tensorflow_native_info_lines_are_noise_unless_asked_for(monkeypatch):
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    noise = logs.tensorflow_noise_filter()
    assert noise(b"I0000 00:00:1795446755.174249   20070 port.cc:153] oneDNN custom operations are on.\n")
    assert noise(b"I1123 15:12:17.310000   20070 cudart_stub.cc:31] Could not find cuda drivers\n")
    assert noise(b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n")
    assert not noise(b"E0000 00:00:1795446755.174249   20070 loader.cc:1] could not load\n")
    assert not noise(b"W1123 15:12:17.310000   20070 x.cc:2] a warning\n")
    assert not noise(b"2026-11-23 15:12:17 INFO serve: ready\n")
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")
    assert logs.tensorflow_noise_filter() is None


def test_server_timing_header():
    timings = Timings()
    timings.stages = [("input_handler", 0.0001), ("model_server", 0.0012)]
    assert timings.server_timing(0.0015) == "input_handler;dur=0.100, model_server;dur=1.200, total;dur=1.500"


def test_the_page_adds_up_the_workers_totals(tmp_path):
    worker = AppMetrics(tmp_path)
    for seconds in (0.0004, 0.003):
        timings = Timings()
        timings.stages = [("model_server", seconds)]
        worker.started()
        worker.finished("/invocations", 200, timings, seconds * 2)
    worker.started()
    worker.finished(None, 404, Timings(), 0.0001)
    worker.started()  # one still in flight
    worker.flush()
    # another worker, gone (its pid is not alive): its requests count, its in-flight ones do not
    (tmp_path / "app-999999999.json").write_text(
        json.dumps({"in_flight": 5, "requests": [["/invocations", "200", [1] + [0] * 16 + [0.0002]]], "stages": []})
    )
    (tmp_path / "gunicorn-1.json").write_text('{"worker_restarts": 2}')
    registry = CollectorRegistry()
    registry.register(metrics_page.StackCollector(tmp_path, lambda: [("nginx", 1)], lambda: "ready"))
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for s in family.samples
    }
    requests = "sagemaker_tfs_request_duration_seconds"
    invocations = (("route", "/invocations"), ("status", "200"))
    assert samples[(requests + "_count", invocations)] == 3
    assert samples[(requests + "_bucket", (("le", "0.0005"), *invocations))] == 1
    assert samples[(requests + "_bucket", (("le", "0.001"), *invocations))] == 2
    assert samples[(requests + "_bucket", (("le", "0.01"), *invocations))] == 3
    assert samples[(requests + "_sum", invocations)] == pytest.approx(0.0002 + 0.0008 + 0.006)
    assert samples[(requests + "_count", (("route", "other"), ("status", "404")))] == 1
    assert (
        samples[("sagemaker_tfs_stage_duration_seconds_count", (("route", "/invocations"), ("stage", "model_server")))]
        == 2
    )
    assert samples[("sagemaker_tfs_requests_in_flight", ())] == 1
    assert samples[("sagemaker_tfs_worker_restarts_total", ())] == 2
    assert samples[("sagemaker_tfs_process_restarts_total", (("process", "nginx"),))] == 1
    assert samples[("sagemaker_tfs_serve_state", (("state", "ready"),))] == 1


def test_grpc_channel_arguments():
    from sagemaker_tfs.model_server.grpc_service import channel_arguments

    assert channel_arguments("") == []
    assert channel_arguments("grpc.max_connection_age_ms=2000,grpc.lb_policy_name=grpclb,a=99999999999") == [
        ("grpc.max_connection_age_ms", 2000),
        ("grpc.lb_policy_name", "grpclb"),
        ("a", "99999999999"),
    ]


def test_a_text_log_message_cannot_start_a_line_of_its_own():
    """Client text in a message is escaped; an indented continuation line (a failed child's output) stays."""
    assert logs.escape_controls("a\nFORGED\r\x1b[2J\u2028") == "a\\nFORGED\\r\\x1b[2J\\u2028"
    assert logs.escape_controls("pip failed:\n    ERROR: x") == "pip failed:\n    ERROR: x"
