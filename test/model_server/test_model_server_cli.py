"""The model server as a command: flags, start-up failures, single-model mode, version polling, SIGTERM."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import threading

import paths
import ports
import processes
import pytest
import requests
from model_server_support import SERVER


def run_server(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*SERVER, *args], capture_output=True, text=True, timeout=timeout)


def test_unknown_flag_is_a_clear_error():
    result = run_server("--port=1", "--model_base_path=/m", "--bogus_flag=1")
    assert result.returncode == 2
    assert "unknown flag: --bogus_flag" in result.stderr
    assert "--rest_api_port" in result.stderr  # followed by the usage


def test_flag_values_are_checked():
    assert "invalid value for --port: 'x'" in run_server("--port=x", "--model_base_path=/m").stderr
    assert "flag --port needs a value" in run_server("--port", "--model_base_path=/m").stderr
    assert "either --model_config_file or --model_base_path" in run_server("--port=1").stderr
    result = run_server("--model_base_path=/m", "--batching_parameters_file=/b")
    assert "--enable_batching is false" in result.stderr and result.returncode == 2


def test_help_lists_every_flag():
    result = run_server("--help")
    assert result.returncode == 0
    for flag in (
        "--port",
        "--rest_api_port",
        "--model_config_file",
        "--model_name",
        "--model_base_path",
        "--enable_batching",
        "--batching_parameters_file",
        "--tensorflow_intra_op_parallelism",
        "--tensorflow_inter_op_parallelism",
        "--per_process_gpu_memory_fraction",
        "--rest_api_timeout_in_ms",
        "--file_system_poll_wait_seconds",
        "--max_num_load_retries",
        "--rest_api_num_threads",
    ):
        assert flag in result.stdout


def test_unparseable_model_config_fails_at_start(tmp_path):
    config = tmp_path / "models.config"
    config.write_text('model_config_list { config { name: "m" base_path: "/m" model_platform: "tensorflow" bad: 1 }')
    result = run_server("--rest_api_port=0", f"--port={ports.free_port()}", f"--model_config_file={config}")
    assert result.returncode == 1
    assert "Failed to start server. Error: Invalid protobuf file" in result.stderr
    assert "Error parsing text-format tensorflow.serving.ModelServerConfig" in result.stderr


def test_taken_port_fails_at_start(tmp_path):
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_server(
            f"--port={ports.free_port()}",
            f"--rest_api_port={port}",
            "--model_name=m",
            f"--model_base_path={paths.HALF_PLUS_TWO}",
            "--file_system_poll_wait_seconds=0",
        )
    assert result.returncode == 1
    assert f"cannot listen for HTTP/REST on port {port}" in result.stderr


def test_taken_grpc_port_fails_at_start():
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_server(
            f"--port={port}",
            "--model_name=m",
            f"--model_base_path={paths.HALF_PLUS_TWO}",
            "--file_system_poll_wait_seconds=0",
        )
    assert result.returncode == 1
    assert f"Failed to start server. Error: cannot listen for gRPC on port {port}" in result.stderr


def test_grpc_on_a_unix_socket_answers_calls_without_a_deadline(tmp_path):
    import grpc
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    path = tmp_path / "grpc.sock"
    server = processes.Background(
        [
            *SERVER,
            "--port=0",
            f"--grpc_socket_path={path}",
            "--model_name=m",
            f"--model_base_path={paths.HALF_PLUS_TWO}",
            "--file_system_poll_wait_seconds=0",
        ]
    )
    with server, grpc.insecure_channel(f"unix:{path}") as channel:
        server.wait_until(path.exists, what="listening")
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "m"
        request.inputs["x"].CopyFrom(tf.make_tensor_proto([[1.0], [3.0]]))
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        response = stub.Predict(request, wait_for_ready=True)  # no timeout: a call without a deadline
        assert list(response.outputs["y"].float_val) == [2.5, 3.5]
        server.signal(signal.SIGTERM)
        assert server.proc.wait(30) == 0
    assert "stopping: signal received" in server.log()


def versions(url: str) -> list[tuple[str, str]]:
    response = requests.get(url + "/v1/models/m", timeout=30)
    return [(s["version"], s["state"]) for s in response.json()["model_version_status"]]


def test_single_model_with_version_polling_and_clean_sigterm(tmp_path):
    base = tmp_path / "m"
    shutil.copytree(paths.HALF_PLUS_TWO / "00000123", base / "1")
    rest_port = ports.free_port()
    url = f"http://127.0.0.1:{rest_port}"
    server = processes.Background(
        [
            *SERVER,
            f"--port={ports.free_port()}",
            f"--rest_api_port={rest_port}",
            "--model_name=m",
            f"--model_base_path={base}",
            "--file_system_poll_wait_seconds=1",
            "--tensorflow_intra_op_parallelism=1",
            "--tensorflow_inter_op_parallelism=1",
        ]
    )
    with server:
        server.wait_until(lambda: ports.port_is_open(rest_port), what="listening")
        assert versions(url) == [("1", "AVAILABLE")]

        shutil.copytree(paths.HALF_PLUS_THREE / "00000123", base / "2")  # a new version: served, 1 unloaded
        server.wait_until(lambda: versions(url) == [("2", "AVAILABLE"), ("1", "END")], what="serving version 2")
        response = requests.post(url + "/v1/models/m:predict", json={"instances": [1.0]}, timeout=30)
        assert response.json() == {"predictions": [3.5]}

        shutil.rmtree(base / "2")  # removed: version 1 is the latest again
        server.wait_until(lambda: versions(url) == [("2", "END"), ("1", "AVAILABLE")], what="back to version 1")
        response = requests.post(url + "/v1/models/m:predict", json={"instances": [1.0]}, timeout=30)
        assert response.json() == {"predictions": [2.5]}

        server.signal(signal.SIGTERM)
        assert server.proc.wait(30) == 0
    log = server.log()
    assert "Successfully loaded servable version {name: m version: 2}" in log
    assert "Unloading servable version {name: m version: 1}" in log
    assert "stopping: signal received" in log


# Every flag of TensorFlow Serving's tensorflow_model_server (model_servers/main.cc), with its default.
TFS_FLAGS = {
    "port": "8500",
    "grpc_socket_path": "",
    "rest_api_port": "0",
    "rest_api_num_threads": "4",
    "rest_api_timeout_in_ms": "30000",
    "rest_api_enable_cors_support": "false",
    "enable_batching": "false",
    "allow_version_labels_for_unavailable_models": "false",
    "batching_parameters_file": "",
    "enable_per_model_batching_parameters": "false",
    "model_config_file": "",
    "model_config_file_poll_wait_seconds": "0",
    "model_name": "default",
    "model_base_path": "/m",
    "num_load_threads": "0",
    "num_unload_threads": "0",
    "max_num_load_retries": "5",
    "load_retry_interval_micros": "60000000",
    "file_system_poll_wait_seconds": "1",
    "flush_filesystem_caches": "true",
    "tensorflow_session_parallelism": "0",
    "tensorflow_session_config_file": "",
    "tensorflow_intra_op_parallelism": "0",
    "tensorflow_inter_op_parallelism": "0",
    "use_alts_credentials": "false",
    "ssl_config_file": "",
    "platform_config_file": "",
    "per_process_gpu_memory_fraction": "0",
    "saved_model_tags": "serve",
    "grpc_channel_arguments": "",
    "grpc_max_threads": "0",
    "enable_model_warmup": "true",
    "num_request_iterations_for_warmup": "0",
    "monitoring_config_file": "",
    "remove_unused_fields_from_bundle_metagraph": "true",
    "prefer_tflite_model": "false",
    "num_tflite_pools": "4",
    "num_tflite_interpreters_per_pool": "1",
    "enable_signature_method_name_check": "false",
    "xla_cpu_compilation_enabled": "false",
    "xla_gpu_compilation_enabled": "false",
    "enable_profiler": "true",
    "thread_pool_factory_config_file": "",
    "mixed_precision": "",
    "skip_initialize_tpu": "false",
    "enable_grpc_healthcheck_service": "false",
    "enable_serialization_as_tensor_content": "false",
}


def test_every_tfs_flag_is_accepted_and_version_prints_and_exits():
    result = run_server(*(f"--{name}={value}" for name, value in TFS_FLAGS.items()), "--version")
    assert result.returncode == 0, result.stderr
    first, second = result.stdout.splitlines()
    assert first.startswith("TensorFlow ModelServer: ")
    assert second == f"TensorFlow Library: {tf_version()}"


def tf_version() -> str:
    from importlib import metadata

    return metadata.version("tensorflow")


def test_help_says_which_flags_have_no_effect():
    lines = {
        line.split("=")[0].strip(): line for line in run_server("--help").stdout.splitlines() if line.startswith("  --")
    }
    assert {f"--{name}" for name in [*TFS_FLAGS, "version"]} <= set(lines)
    for name in (
        "use_alts_credentials",
        "enable_serialization_as_tensor_content",
        "flush_filesystem_caches",
        "enable_profiler",
    ):
        assert lines[f"--{name}"].endswith("(accepted, no effect)")
    for name in (
        "grpc_channel_arguments",
        "monitoring_config_file",
        "model_config_file_poll_wait_seconds",
        "version",
        "enable_model_warmup",
        "num_request_iterations_for_warmup",
        "prefer_tflite_model",
        "num_tflite_pools",
        "num_tflite_interpreters_per_pool",
    ):
        assert not lines[f"--{name}"].endswith("(accepted, no effect)")


def test_grpc_channel_arguments_are_server_options(tmp_path):
    import grpc
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    grpc_port = ports.free_port()
    server = processes.Background(
        [
            *SERVER,
            f"--port={grpc_port}",
            "--model_name=m",
            f"--model_base_path={paths.HALF_PLUS_TWO}",
            "--file_system_poll_wait_seconds=0",
            "--grpc_channel_arguments=grpc.max_receive_message_length=200,grpc.primary_user_agent=x",
        ]
    )
    with server, grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
        server.wait_until(lambda: ports.port_is_open(grpc_port), what="listening")
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)

        def predict(rows: int):
            request = predict_pb2.PredictRequest()
            request.model_spec.name = "m"
            request.inputs["x"].CopyFrom(tf.make_tensor_proto([[1.0]] * rows))
            return stub.Predict(request, timeout=30)

        assert list(predict(1).outputs["y"].float_val) == [2.5]
        with pytest.raises(grpc.RpcError) as raised:
            predict(100)  # 400+ bytes: over the 200 the flag allows
        assert raised.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def served(url: str, model: str) -> int:
    return requests.post(f"{url}/v1/models/{model}:predict", json={"instances": [1.0]}, timeout=30).status_code


def test_model_config_file_poll_applies_changes_while_unchanged_models_keep_serving(tmp_path):
    from model_server_support import model_config

    config = tmp_path / "models.config"
    config.write_text(model_config({"two": paths.HALF_PLUS_TWO}))
    rest_port = ports.free_port()
    url = f"http://127.0.0.1:{rest_port}"
    server = processes.Background(
        [
            *SERVER,
            f"--port={ports.free_port()}",
            f"--rest_api_port={rest_port}",
            f"--model_config_file={config}",
            "--model_config_file_poll_wait_seconds=1",
            "--file_system_poll_wait_seconds=0",
        ]
    )
    statuses: list[int] = []
    stop = threading.Event()

    def load() -> None:  # requests to the unchanged model during the reloads
        with requests.Session() as session:
            while not stop.is_set():
                statuses.append(
                    session.post(f"{url}/v1/models/two:predict", json={"instances": [1.0]}, timeout=30).status_code
                )

    with server:
        server.wait_until(lambda: ports.port_is_open(rest_port), what="listening")
        client = threading.Thread(target=load)
        client.start()
        try:
            config.write_text(model_config({"two": paths.HALF_PLUS_TWO, "three": paths.HALF_PLUS_THREE}))
            server.wait_until(lambda: served(url, "three") == 200, what="serving the added model")
            assert requests.post(f"{url}/v1/models/three:predict", json={"instances": [1.0]}, timeout=30).json() == {
                "predictions": [3.5]
            }

            config.write_text("model_config_list { bad")  # unreadable: logged, what is served stays
            processes.wait_for_log(server, "Failed to read ModelServerConfig file")
            assert served(url, "three") == 200
        finally:
            stop.set()
            client.join()
        assert statuses and set(statuses) == {200}

        config.write_text(model_config({"three": paths.HALF_PLUS_THREE}))  # removed: TFS's not-found
        server.wait_until(lambda: served(url, "two") == 404, what="unloading the removed model")
        assert requests.get(f"{url}/v1/models/two", timeout=30).json() == {
            "model_version_status": [  # TFS's END
                {"version": "123", "state": "END", "status": {"error_code": "OK", "error_message": ""}}
            ]
        }
        config.write_text(model_config({"three": paths.HALF_PLUS_TWO}))  # changed base path: reloaded from it
        server.wait_until(
            lambda: (
                requests.post(f"{url}/v1/models/three:predict", json={"instances": [1.0]}, timeout=30).json()
                == {"predictions": [2.5]}
            ),
            what="the new path",
        )


def listening_server(*flags: str) -> tuple[processes.Background, int, int]:
    grpc_port, rest_port = ports.free_port(), ports.free_port()
    server = processes.Background(
        [
            *SERVER,
            f"--port={grpc_port}",
            f"--rest_api_port={rest_port}",
            "--model_name=m",
            f"--model_base_path={paths.HALF_PLUS_TWO}",
            "--file_system_poll_wait_seconds=0",
            *flags,
        ]
    )
    return server, grpc_port, rest_port


def test_listens_on_every_interface_by_default_as_tfs():
    server, grpc_port, rest_port = listening_server()
    with server:
        server.wait_until(lambda: ports.port_is_open(rest_port), what="listening")
        assert ports.listening_addresses(rest_port) == {"0.0.0.0"}
        assert ports.listening_addresses(grpc_port) <= {"0.0.0.0", "::"}
        assert ports.listening_addresses(grpc_port)


def test_listen_address_keeps_both_ports_on_loopback():
    server, grpc_port, rest_port = listening_server("--listen_address=127.0.0.1")
    with server:
        server.wait_until(lambda: ports.port_is_open(rest_port), what="listening")
        assert ports.listening_addresses(rest_port) == {"127.0.0.1"}
        assert ports.listening_addresses(grpc_port) == {"127.0.0.1"}
        response = requests.post(
            f"http://127.0.0.1:{rest_port}/v1/models/m:predict", json={"instances": [1.0]}, timeout=30
        )
        assert response.json() == {"predictions": [2.5]}
    assert "Running gRPC ModelServer at 127.0.0.1:" in server.log()
    assert f"Exporting HTTP/REST API at:127.0.0.1:{rest_port}" in server.log()


def test_prefer_tflite_model_with_a_broken_model_tflite_fails_its_load_with_the_reason(tmp_path):
    version = tmp_path / "m" / "1"
    version.mkdir(parents=True)
    (version / "model.tflite").write_bytes(b"\x1c\x00\x00\x00TFL3")
    server = processes.Background(
        [
            *SERVER,
            f"--port={ports.free_port()}",
            "--model_name=m",
            f"--model_base_path={tmp_path / 'm'}",
            "--prefer_tflite_model",
            "--max_num_load_retries=0",
            "--file_system_poll_wait_seconds=0",
        ]
    )
    with server:
        log = processes.wait_for_log(server, "Running gRPC ModelServer at")
    failure = next(line for line in log.splitlines() if "Loading servable {name: m version: 1} failed" in line)
    assert "failed: INVALID_ARGUMENT: Cannot build FlatBufferModel from buffer. (" in failure
