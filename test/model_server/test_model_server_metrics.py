"""The model server's Prometheus page (--monitoring_config_file): TFS's metric names, types and labels, scraped
after real requests over REST and gRPC and parsed with prometheus_client's parser, and its text as TFS's exporter
prints it (no # HELP, integer counts, bounds and sums as absl prints doubles)."""

from __future__ import annotations

import subprocess

import grpc
import paths
import pytest
import requests
import tensorflow as tf
from model_server_support import SERVER, ModelServer, model_config
from prometheus_client.parser import text_string_to_metric_families
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

MONITORING = 'prometheus_config { enable: true path: "/monitoring/prometheus/metrics" }\n'


def scrape(server: ModelServer, path: str = "/monitoring/prometheus/metrics") -> dict:
    """{family name: (type, {(sample name, sorted labels): value})} of the page."""
    response = requests.get(server.url + path, timeout=30)
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "text/plain"
    return {
        family.name: (family.type, {(s.name, tuple(sorted(s.labels.items()))): s.value for s in family.samples})
        for family in text_string_to_metric_families(response.text)
    }


def sample(families: dict, family: str, name: str, **labels) -> float | None:
    return families[family][1].get((name, tuple(sorted(labels.items()))))


def grpc_predict(server: ModelServer, model: str, **inputs) -> grpc.StatusCode:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    for alias, value in inputs.items():
        request.inputs[alias].CopyFrom(tf.make_tensor_proto(value))
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        try:
            prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(request, timeout=30)
        except grpc.RpcError as exc:
            return exc.code()
    return grpc.StatusCode.OK


@pytest.fixture(scope="module")
def monitored(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("monitored")
    (workdir / "monitoring.txt").write_text(MONITORING)
    config = model_config({"half_plus_two": paths.HALF_PLUS_TWO, "broken": paths.BAD_HALF_PLUS_TWO})
    with ModelServer(config, workdir, f"--monitoring_config_file={workdir / 'monitoring.txt'}") as running:
        yield running


def test_requests_over_rest_and_grpc_are_counted_with_tfs_names_and_labels(monitored):
    for _ in range(2):
        assert monitored.post("/v1/models/half_plus_two:predict", {"instances": [1.0]}).status_code == 200
    assert (
        monitored.post(
            "/v1/models/half_plus_two:classify",
            {"signature_name": "classify_x_to_y", "examples": [{"x": 1.0}, {"x": 2.0}]},
        ).status_code
        == 200
    )
    assert monitored.post("/v1/models/missing:predict", {"instances": [1.0]}).status_code == 404
    assert monitored.post("/v1/models/half_plus_two:predict", b"{").status_code == 400
    assert monitored.get("/v1/models/half_plus_two").status_code == 200
    assert grpc_predict(monitored, "half_plus_two", x=[[1.0]]) == grpc.StatusCode.OK
    assert grpc_predict(monitored, "half_plus_two", z=[[1.0]]) == grpc.StatusCode.INVALID_ARGUMENT

    families = scrape(monitored)
    count = ":tensorflow:serving:request_count"
    assert families[count][0] == "counter"
    total = count + "_total"  # the parser's name for a counter sample; the page itself says `request_count{`
    assert (
        sample(families, count, total, model_name="half_plus_two", status="OK") == 5
    )  # REST: 2 predict, 1 classify, 1 status; 1 gRPC
    assert sample(families, count, total, model_name="half_plus_two", status="INVALID_ARGUMENT") == 2
    assert sample(families, count, total, model_name="missing", status="NOT_FOUND") == 1

    latency = ":tensorflow:serving:request_latency"
    assert families[latency][0] == "histogram"
    counts = {labels: value for (name, labels), value in families[latency][1].items() if name == latency + "_count"}
    assert counts == {  # successful requests only, as in TFS; the REST verb lower-case, the gRPC method capitalised
        (("API", "predict"), ("entrypoint", "REST"), ("model_name", "half_plus_two")): 2,
        (("API", "classify"), ("entrypoint", "REST"), ("model_name", "half_plus_two")): 1,
        (("API", ""), ("entrypoint", "REST"), ("model_name", "half_plus_two")): 1,
        (("API", "Predict"), ("entrypoint", "GRPC"), ("model_name", "half_plus_two")): 1,
    }
    runtime = ":tensorflow:serving:runtime_latency"
    runs = {labels: value for (name, labels), value in families[runtime][1].items() if name == runtime + "_count"}
    assert runs == {
        (("API", "Predict"), ("model_name", "half_plus_two"), ("runtime", "TF1")): 3,
        (("API", "Classify"), ("model_name", "half_plus_two"), ("runtime", "TF1")): 1,
    }
    assert (
        sample(
            families,
            latency,
            latency + "_bucket",
            API="predict",
            entrypoint="REST",
            model_name="half_plus_two",
            le="+Inf",
        )
        == 2
    )
    bounds = [dict(labels)["le"] for (name, labels), _ in families[latency][1].items() if name == latency + "_bucket"]
    assert bounds[:4] == ["10", "18", "32.4", "58.32"]  # TFS's buckets: 10 x 1.8^i, as absl prints a double
    assert bounds[9:11] == ["1983.59", "3570.47"] and bounds[-3:] == ["8.19309e+08", "1.47476e+09", "+Inf"]

    text = requests.get(monitored.url + "/monitoring/prometheus/metrics", timeout=30).text
    lines = text.splitlines()  # the page's exact text, as TFS's exporter prints it
    assert "# HELP" not in text and text.endswith("\n") and not text.endswith("\n\n")
    assert [line for line in lines if line.startswith(count + "{")] == [
        ':tensorflow:serving:request_count{model_name="half_plus_two",status="INVALID_ARGUMENT"} 2',
        ':tensorflow:serving:request_count{model_name="half_plus_two",status="OK"} 5',
        ':tensorflow:serving:request_count{model_name="missing",status="NOT_FOUND"} 1',
    ]
    point = 'model_name="half_plus_two",API="predict",entrypoint="REST"'
    assert f'{latency}_bucket{{{point},le="10"}} 0' in lines
    assert f'{latency}_bucket{{{point},le="+Inf"}} 2' in lines
    assert f"{latency}_count{{{point}}} 2" in lines
    total = next(line for line in lines if line.startswith(f"{latency}_sum{{{point}}} "))
    value = total.rpartition(" ")[2]
    assert value == f"{float(value):.6g}"  # a double with six significant digits
    types = [line for line in lines if line.startswith("#")]
    assert types == sorted(types, key=lambda line: line.replace(":", "/"))  # by TensorFlow's metric names
    assert f"# TYPE {count} counter" in types and f"# TYPE {latency} histogram" in types


def test_the_page_keeps_tfs_counter_names_and_reports_model_loads(monitored):
    text = requests.get(monitored.url + "/monitoring/prometheus/metrics", timeout=30).text
    assert "# TYPE :tensorflow:serving:request_count counter\n" in text
    assert "_created" not in text and "_total" not in text
    good = str(paths.HALF_PLUS_TWO / "00000123")
    assert f':tensorflow:cc:saved_model:load_attempt_count{{model_path="{good}",status="success"}} 1\n' in text
    families = scrape(monitored)
    attempts = ":tensorflow:cc:saved_model:load_attempt_count"
    good = str(paths.HALF_PLUS_TWO / "00000123")
    assert sample(families, attempts, attempts + "_total", model_path=good, status="success") == 1
    broken = [dict(labels) for (name, labels), _ in families[attempts][1].items() if dict(labels)["status"] == "fail"]
    assert [b["model_path"].startswith(str(paths.BAD_HALF_PLUS_TWO)) for b in broken] == [True]
    latency = ":tensorflow:cc:saved_model:load_latency"
    assert sample(families, latency, latency + "_total", model_path=good) > 0


def test_the_page_is_absent_without_the_monitoring_config(server):
    response = requests.get(server.url + "/monitoring/prometheus/metrics", timeout=30)
    assert response.status_code == 404
    assert response.headers["Content-Type"] == "text/html"


def test_batching_metrics(built_models, tmp_path):
    (tmp_path / "monitoring.txt").write_text('prometheus_config { enable: true path: "/metrics" }')
    (tmp_path / "batching.txt").write_text(
        "max_batch_size { value: 4 } batch_timeout_micros { value: 0 } "
        'allowed_batch_sizes: 4 thread_pool_name { value: "pool_a" }'
    )
    config = model_config({"batch_reveal": built_models / "batch_reveal"})
    with ModelServer(
        config,
        tmp_path,
        "--enable_batching",
        f"--batching_parameters_file={tmp_path / 'batching.txt'}",
        f"--monitoring_config_file={tmp_path / 'monitoring.txt'}",
    ) as server:
        assert server.post("/v1/models/batch_reveal:predict", {"instances": [1.0, 2.0, 3.0]}).status_code == 200
        families = scrape(server, "/metrics")
    prefix = ":tensorflow:serving:batching_session:"
    assert sample(families, prefix + "input_batch_size", prefix + "input_batch_size_sum") == 3
    assert sample(families, prefix + "processed_batch_size", prefix + "processed_batch_size_sum") == 4
    assert sample(families, prefix + "padding_size", prefix + "padding_size_sum", execution_batch_size="4") == 1
    assert sample(families, prefix + "wrapped_run_count", prefix + "wrapped_run_count_total") == 1
    assert (
        sample(families, prefix + "queuing_latency", prefix + "queuing_latency_count", thread_pool_name="pool_a") == 1
    )
    runtime = ":tensorflow:serving:runtime_latency"
    assert sample(families, runtime, runtime + "_count", API="Predict", model_name="batch_reveal", runtime="TF1") == 1


def test_a_disabled_or_broken_monitoring_config(tmp_path):
    (tmp_path / "off.txt").write_text("prometheus_config { enable: false }")
    config = model_config({"half_plus_two": paths.HALF_PLUS_TWO})
    with ModelServer(config, tmp_path, f"--monitoring_config_file={tmp_path / 'off.txt'}") as server:
        assert server.get("/monitoring/prometheus/metrics").status_code == 404
    (tmp_path / "bad.txt").write_text("prometheus_config { enable: maybe }")
    result = subprocess.run(
        [*SERVER, f"--model_base_path={paths.HALF_PLUS_TWO}", f"--monitoring_config_file={tmp_path / 'bad.txt'}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert (
        "Failed to start server. Error: Invalid protobuf file: "
        f"'{tmp_path / 'bad.txt'}': Error parsing text-format tensorflow.serving.MonitoringConfig"
    ) in result.stderr
