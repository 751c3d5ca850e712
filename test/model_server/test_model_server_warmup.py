"""Model warm-up (`<version>/assets.extra/tf_serving_warmup_requests`, --enable_model_warmup,
--num_request_iterations_for_warmup): TFS's replay of the file's PredictionLogs as a version loads, its errors
failing the load with TFS's messages, its log lines and its two metrics. Warm-up files are written here with
TensorFlow's TFRecordWriter into copies of the reference half_plus_two; one model server holds a model per case,
another runs with warm-up off; the record limit and the rules that need no server are checked on warmup.replay
with a SavedModel loaded in-process."""

from __future__ import annotations

import shutil
from pathlib import Path

import grpc
import metrics_pages
import model_dirs
import paths
import processes
import pytest
import requests
import tensorflow as tf
from google.protobuf import text_format
from model_server_support import ModelServer, model_config
from sagemaker_tfs.model_server import servable, warmup
from sagemaker_tfs.model_server.metrics import ModelServerMetrics
from sagemaker_tfs.shared.error_codes import Code, ServingError
from tensorflow_serving.apis import (
    model_management_pb2,
    model_service_pb2_grpc,
    prediction_log_pb2,
    prediction_service_pb2_grpc,
)

MONITORING = 'prometheus_config { enable: true path: "/monitoring/prometheus/metrics" }\n'
LATENCY = ":tensorflow:serving:model_warmup_latency"
RECORDS = ":tensorflow:serving:model_warmup_records_read"
RUNTIME = ":tensorflow:serving:runtime_latency"


# ------------------------------------------------------------------------------------------------ warm-up files


def example(x: float) -> tf.train.Example:
    return tf.train.Example(
        features=tf.train.Features(feature={"x": tf.train.Feature(float_list=tf.train.FloatList(value=[x]))})
    )


def predict_log(name: str = "warm", **inputs) -> bytes:
    return model_dirs.predict_log(name, **inputs)


def examples_log(kind: str, signature: str, name: str = "warm") -> bytes:
    """A classify_log or regress_log of two examples."""
    entry = prediction_log_pb2.PredictionLog()
    request = getattr(entry, kind).request
    request.model_spec.name = name
    request.model_spec.signature_name = signature
    request.input.example_list.examples.extend([example(1.0), example(2.0)])
    return entry.SerializeToString()


def multi_inference_log(name: str = "warm") -> bytes:
    entry = prediction_log_pb2.PredictionLog()
    request = entry.multi_inference_log.request
    for signature, method in (("classify_x_to_y", "classify"), ("regress_x_to_y", "regress")):
        task = request.tasks.add(method_name=f"tensorflow/serving/{method}")
        task.model_spec.name = name
        task.model_spec.signature_name = signature
    request.input.example_list.examples.extend([example(1.0)])
    return entry.SerializeToString()


def session_run_log() -> bytes:
    entry = prediction_log_pb2.PredictionLog()
    entry.session_run_log.request.feed.add(name="x:0")
    return entry.SerializeToString()


GOOD = [
    predict_log("good_warmup", x=[[1.0], [2.0]]),
    examples_log("regress_log", "regress_x_to_y", "good_warmup"),
    examples_log("classify_log", "classify_x_to_y", "good_warmup"),
    multi_inference_log("good_warmup"),
    prediction_log_pb2.PredictionLog().SerializeToString(),
]  # no log_type: nothing runs, still a record
WRONG_ALIAS = predict_log("failing", z=[[1.0]])


def model_with_warmup(parent: Path, name: str, records: list[bytes]) -> Path:
    """A copy of half_plus_two (version 123) whose version folder has these warm-up records."""
    base = parent / name
    shutil.copytree(paths.HALF_PLUS_TWO / "00000123", base / "00000123")
    model_dirs.write_warmup_requests(base / "00000123", records)
    return base


def corrupt(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def version_status(server: ModelServer, model: str) -> dict:
    response = server.get(f"/v1/models/{model}")
    assert response.status_code == 200, response.text
    (status,) = response.json()["model_version_status"]
    return status


def page_lines(server: ModelServer) -> list[str]:
    response = requests.get(server.url + "/monitoring/prometheus/metrics", timeout=30)
    assert response.status_code == 200
    return response.text.splitlines()


# ------------------------------------------------------------------------------------------------ a model server


@pytest.fixture(scope="module")
def warmed(tmp_path_factory):
    """One server, --num_request_iterations_for_warmup=3, a model per case."""
    workdir = tmp_path_factory.mktemp("warmed")
    (workdir / "monitoring.txt").write_text(MONITORING)
    models = {
        "good": model_with_warmup(workdir, "good", GOOD),
        "plain": paths.HALF_PLUS_TWO,  # no warm-up file
        "corrupt": model_with_warmup(workdir, "corrupt", [predict_log(x=[[1.0]])]),
        "failing": model_with_warmup(workdir, "failing", [predict_log(x=[[1.0]]), WRONG_ALIAS]),
        "unsupported": model_with_warmup(workdir, "unsupported", [session_run_log()]),
    }
    # the first record's data CRC: TensorFlow's reader reports the record's data, after its 12-byte header
    corrupt(models["corrupt"] / "00000123" / warmup.REQUESTS_FILE, 12 + len(predict_log(x=[[1.0]])))
    with ModelServer(
        model_config(models),
        workdir,
        f"--monitoring_config_file={workdir / 'monitoring.txt'}",
        "--num_request_iterations_for_warmup=3",
    ) as running:
        running.models = models
        yield running


def test_a_good_warmup_file_is_replayed_and_the_version_serves(warmed):
    version_dir = warmed.models["good"] / "00000123"
    requests_file = version_dir / warmup.REQUESTS_FILE
    assert version_status(warmed, "good") == {
        "version": "123",
        "state": "AVAILABLE",
        "status": {"error_code": "OK", "error_message": ""},
    }
    answer = warmed.post("/v1/models/good:predict", {"instances": [1.0, 2.0]})
    assert answer.status_code == 200 and answer.json() == {"predictions": [2.5, 3.0]}
    processes.wait_for_log(
        warmed,
        f"Starting to read warmup data for model at {requests_file} with model-warmup-options "
        "num_request_iterations { value: 3 }",
        f"Finished reading warmup data for model at {requests_file}. Number of warmup records read: 5. Elapsed time "
        "(microseconds): ",
    )
    lines = page_lines(warmed)
    assert f'{LATENCY}_count{{model_path="{version_dir}",status="OK"}} 1' in lines
    assert f'{RECORDS}{{model_path="{version_dir}",status="OK"}} 5' in lines
    assert f"# TYPE {LATENCY} histogram" in lines and f"# TYPE {RECORDS} counter" in lines


def test_each_record_runs_num_request_iterations_times(warmed):
    """TFS records the runtime of a warm-up's Predict, Classify and Regress under the request's model name (not
    MultiInference's): 3 each, for one record each."""
    page = metrics_pages.scrape(warmed.rest_port, "/monitoring/prometheus/metrics")
    counts = {
        labels: value
        for (name, labels), value in page.items()
        if name == RUNTIME + "_count" and dict(labels)["model_name"] == "good_warmup"
    }
    assert counts == {
        (("API", api), ("model_name", "good_warmup"), ("runtime", "TF1")): 3
        for api in ("Predict", "Regress", "Classify")
    }


def test_without_a_warmup_file_the_version_loads_and_no_metric_is_recorded(warmed):
    requests_file = paths.HALF_PLUS_TWO / "00000123" / warmup.REQUESTS_FILE
    processes.wait_for_log(warmed, f"No warmup data file found at {requests_file}")
    assert version_status(warmed, "plain")["state"] == "AVAILABLE"
    assert not [line for line in page_lines(warmed) if str(paths.HALF_PLUS_TWO) in line and "warmup" in line]


def test_a_corrupt_warmup_file_fails_the_load_with_data_loss(warmed):
    version_dir = warmed.models["corrupt"] / "00000123"
    assert version_status(warmed, "corrupt") == {
        "version": "123",
        "state": "END",
        "status": {
            "error_code": "DATA_LOSS",
            "error_message": "corrupted record at 12. Please verify your warmup data is in TFRecord format.",
        },
    }
    assert warmed.post("/v1/models/corrupt:predict", {"instances": [1.0]}).status_code == 404
    lines = page_lines(warmed)
    assert f'{LATENCY}_count{{model_path="{version_dir}",status="DATA_LOSS: corrupted record at 12"}} 1' in lines
    assert f'{RECORDS}{{model_path="{version_dir}",status="DATA_LOSS: corrupted record at 12"}} 0' in lines
    processes.wait_for_log(
        warmed,
        "Loading servable {name: corrupt version: 123} failed: DATA_LOSS: corrupted record "
        "at 12. Please verify your warmup data is in TFRecord format.",
    )


def test_a_failing_record_fails_the_load_with_the_error_a_client_gets(warmed):
    request = prediction_log_pb2.PredictionLog.FromString(WRONG_ALIAS).predict_log.request
    request.model_spec.name = "good"
    with grpc.insecure_channel(f"127.0.0.1:{warmed.grpc_port}") as channel, pytest.raises(grpc.RpcError) as info:
        prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(request, timeout=30)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    message = (
        "Signature input alias: x(feed name: x:0) not found in request and no default value provided. Inputs "
        "expected to be in the request {z}, or default input alias set: "
    )
    assert info.value.details() == message
    assert version_status(warmed, "failing") == {
        "version": "123",
        "state": "END",
        "status": {"error_code": "INVALID_ARGUMENT", "error_message": message},
    }
    # the SavedModel itself loaded (TensorFlow's load metric); the failed warm-up recorded nothing
    version_dir = warmed.models["failing"] / "00000123"
    lines = page_lines(warmed)
    assert f':tensorflow:cc:saved_model:load_attempt_count{{model_path="{version_dir}",status="success"}} 1' in lines
    assert not [line for line in lines if str(version_dir) in line and "warmup" in line]


def test_a_session_run_log_is_unimplemented(warmed):
    assert version_status(warmed, "unsupported")["status"] == {
        "error_code": "UNIMPLEMENTED",
        "error_message": "Unsupported log_type for warmup: 5",
    }


def test_a_model_added_by_a_config_reload_is_warmed_up_too(warmed, tmp_path):
    """HandleReloadConfigRequest loads on a gRPC thread while the server's event loop runs; the models it keeps
    are untouched (the last of this server's tests: it changes the model list)."""
    models = {**warmed.models, "late": model_with_warmup(tmp_path, "late", GOOD)}
    request = model_management_pb2.ReloadConfigRequest()
    text_format.Parse(model_config(models), request.config)
    with grpc.insecure_channel(f"127.0.0.1:{warmed.grpc_port}") as channel:
        response = model_service_pb2_grpc.ModelServiceStub(channel).HandleReloadConfigRequest(request, timeout=120)
    assert response.status.error_code == 0
    assert version_status(warmed, "late")["state"] == "AVAILABLE"
    assert f'{RECORDS}{{model_path="{models["late"] / "00000123"}",status="OK"}} 5' in page_lines(warmed)


def test_with_warmup_disabled_a_failing_file_is_not_read(tmp_path):
    model = model_with_warmup(tmp_path, "skipped", [WRONG_ALIAS])
    with ModelServer(model_config({"skipped": model}), tmp_path, "--enable_model_warmup=false") as running:
        assert version_status(running, "skipped")["state"] == "AVAILABLE"
        answer = running.post("/v1/models/skipped:predict", {"instances": [1.0]})
        assert answer.status_code == 200 and answer.json() == {"predictions": [2.5]}
        log = processes.wait_for_log(running, "Successfully loaded servable version {name: skipped version: 123}")
    assert "warmup data" not in log and "has no effect" not in log


# ------------------------------------------------------------------------------------------------ warmup.replay


@pytest.fixture(scope="module")
def loaded():
    """half_plus_two loaded in-process; replay reads the file of the export directory it is given."""
    loaded = servable.load("half_plus_two", 123, paths.HALF_PLUS_TWO / "00000123")
    yield loaded
    loaded.close()


def replay_error(loaded, export_dir: Path, iterations: int = 0, metrics=None) -> ServingError:
    with pytest.raises(ServingError) as info:
        warmup.replay(loaded, export_dir, iterations, metrics)
    return info.value


def warmup_lines(metrics: ModelServerMetrics) -> list[str]:
    return [line for line in metrics.page().decode().splitlines() if "warmup" in line and not line.startswith("#")]


def test_up_to_1000_records_are_replayed_and_the_1001st_fails(loaded, tmp_path):
    model_dirs.write_warmup_requests(tmp_path / "1000", [predict_log(x=[[1.0]])] * 1000)
    metrics = ModelServerMetrics()
    warmup.replay(loaded, tmp_path / "1000", 0, metrics)
    assert f'{RECORDS}{{model_path="{tmp_path / "1000"}",status="OK"}} 1000' in warmup_lines(metrics)
    path = model_dirs.write_warmup_requests(tmp_path / "1001", [predict_log(x=[[1.0]])] * 1001)
    metrics = ModelServerMetrics()
    error = replay_error(loaded, tmp_path / "1001", metrics=metrics)
    assert (error.code, error.message) == (
        Code.INVALID_ARGUMENT,
        f"Number of warmup records exceeds the maximum (1000) at {path}",
    )
    assert warmup_lines(metrics) == []  # TFS returns before recording


def test_without_iterations_each_record_runs_once(loaded, tmp_path):
    model_dirs.write_warmup_requests(
        tmp_path, [predict_log("once", x=[[1.0]]), examples_log("regress_log", "regress_x_to_y", "once")]
    )
    metrics = ModelServerMetrics()
    warmup.replay(loaded, tmp_path, 0, metrics)
    lines = metrics.page().decode().splitlines()
    assert f'{RUNTIME}_count{{model_name="once",API="Predict",runtime="TF1"}} 1' in lines
    assert f'{RUNTIME}_count{{model_name="once",API="Regress",runtime="TF1"}} 1' in lines


def test_an_unparsable_record_fails_without_metrics(loaded, tmp_path):
    path = model_dirs.write_warmup_requests(tmp_path, [b"malformed_record"])
    metrics = ModelServerMetrics()
    error = replay_error(loaded, tmp_path, metrics=metrics)
    assert (error.code, error.message) == (
        Code.INVALID_ARGUMENT,
        f"Failed to parse warmup record: malformed_record from {path}",
    )
    assert warmup_lines(metrics) == []


def test_a_predict_streamed_log_is_unimplemented(loaded, tmp_path):
    entry = prediction_log_pb2.PredictionLog()
    entry.predict_streamed_log.request.add()
    model_dirs.write_warmup_requests(tmp_path, [entry.SerializeToString()])
    error = replay_error(loaded, tmp_path)
    assert (error.code, error.message) == (Code.UNIMPLEMENTED, "Unsupported log_type for warmup: 7")


def test_a_truncated_file_is_data_loss_and_counts_the_records_read(loaded, tmp_path):
    path = model_dirs.write_warmup_requests(tmp_path, [predict_log(x=[[1.0]])] * 2)
    path.write_bytes(path.read_bytes()[:-2])  # the second record's data CRC cut short
    metrics = ModelServerMetrics()
    error = replay_error(loaded, tmp_path, metrics=metrics)
    second = 12 + len(predict_log(x=[[1.0]])) + 4  # header, data, data CRC
    reader = f"truncated record at {second}' failed with Read less bytes than requested"
    assert (error.code, error.message) == (
        Code.DATA_LOSS,
        f"{reader}. Please verify your warmup data is in TFRecord format.",
    )
    assert f'{RECORDS}{{model_path="{tmp_path}",status="DATA_LOSS: {reader}"}} 1' in warmup_lines(metrics)


def test_an_empty_file_is_ok_with_no_records(loaded, tmp_path):
    model_dirs.write_warmup_requests(tmp_path, [])
    metrics = ModelServerMetrics()
    warmup.replay(loaded, tmp_path, 0, metrics)
    assert f'{RECORDS}{{model_path="{tmp_path}",status="OK"}} 0' in warmup_lines(metrics)


def test_a_warmup_request_uses_its_signature_not_its_model_spec_version(loaded, tmp_path):
    """The version being loaded runs the request, whatever its model_spec names; its signature_name counts."""
    entry = prediction_log_pb2.PredictionLog()
    request = entry.regress_log.request
    request.model_spec.name = "another_model"
    request.model_spec.version.value = 7
    request.model_spec.signature_name = "no_such_signature"
    request.input.example_list.examples.extend([example(1.0)])
    model_dirs.write_warmup_requests(tmp_path, [entry.SerializeToString()])
    error = replay_error(loaded, tmp_path)
    assert (error.code, error.message) == (
        Code.INVALID_ARGUMENT,
        "No signature was found with the name: no_such_signature",
    )
    request.model_spec.signature_name = "regress_x_to_y"
    model_dirs.write_warmup_requests(tmp_path, [entry.SerializeToString()])
    warmup.replay(loaded, tmp_path, 1, None)


def test_a_failed_warmup_closes_the_loaded_servable(tmp_path):
    from sagemaker_tfs.model_server.server import warmed_loader

    class Loaded:
        closed = False

        def close(self):
            self.closed = True

    loaded = Loaded()
    model_dirs.write_warmup_requests(tmp_path, [session_run_log()])  # fails before the servable is used
    with pytest.raises(ServingError) as info:
        warmed_loader(lambda name, version, path: loaded, 0, None)("m", 1, tmp_path)
    assert info.value.code == Code.UNIMPLEMENTED and loaded.closed
