"""The model server as a command: flags, start-up failures, single-model mode, version polling, SIGTERM."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess

import requests
from model_server_support import SERVER

import support


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
    for flag in ("--port", "--rest_api_port", "--model_config_file", "--model_name", "--model_base_path",
                 "--enable_batching", "--batching_parameters_file", "--tensorflow_intra_op_parallelism",
                 "--tensorflow_inter_op_parallelism", "--per_process_gpu_memory_fraction", "--rest_api_timeout_in_ms",
                 "--file_system_poll_wait_seconds", "--max_num_load_retries", "--rest_api_num_threads"):
        assert flag in result.stdout


def test_unparseable_model_config_fails_at_start(tmp_path):
    config = tmp_path / "models.config"
    config.write_text('model_config_list { config { name: "m" base_path: "/m" model_platform: "tensorflow" bad: 1 }')
    result = run_server("--rest_api_port=0", f"--port={support.free_port()}", f"--model_config_file={config}")
    assert result.returncode == 1
    assert "Failed to start server. Error: Invalid protobuf file" in result.stderr
    assert "Error parsing text-format tensorflow.serving.ModelServerConfig" in result.stderr


def test_taken_port_fails_at_start(tmp_path):
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_server(f"--port={support.free_port()}", f"--rest_api_port={port}", "--model_name=m",
                            f"--model_base_path={support.HALF_PLUS_TWO}", "--file_system_poll_wait_seconds=0")
    assert result.returncode == 1
    assert f"cannot listen for HTTP/REST on port {port}" in result.stderr


def versions(url: str) -> list[tuple[str, str]]:
    response = requests.get(url + "/v1/models/m", timeout=30)
    return [(s["version"], s["state"]) for s in response.json()["model_version_status"]]


def test_single_model_with_version_polling_and_clean_sigterm(tmp_path):
    base = tmp_path / "m"
    shutil.copytree(support.HALF_PLUS_TWO / "00000123", base / "1")
    rest_port = support.free_port()
    url = f"http://127.0.0.1:{rest_port}"
    server = support.Background([*SERVER, f"--port={support.free_port()}", f"--rest_api_port={rest_port}",
                                 "--model_name=m", f"--model_base_path={base}", "--file_system_poll_wait_seconds=1",
                                 "--tensorflow_intra_op_parallelism=1", "--tensorflow_inter_op_parallelism=1"])
    with server:
        server.wait_until(lambda: support.port_is_open(rest_port), what="listening")
        assert versions(url) == [("1", "AVAILABLE")]

        shutil.copytree(support.HALF_PLUS_THREE / "00000123", base / "2")  # a new version: served, 1 unloaded
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


def listening_server(*flags: str) -> tuple[support.Background, int, int]:
    grpc_port, rest_port = support.free_port(), support.free_port()
    server = support.Background([*SERVER, f"--port={grpc_port}", f"--rest_api_port={rest_port}", "--model_name=m",
                                 f"--model_base_path={support.HALF_PLUS_TWO}", "--file_system_poll_wait_seconds=0",
                                 *flags])
    return server, grpc_port, rest_port


def test_listens_on_every_interface_by_default_as_tfs():
    server, grpc_port, rest_port = listening_server()
    with server:
        server.wait_until(lambda: support.port_is_open(rest_port), what="listening")
        assert support.listening_addresses(rest_port) == {"0.0.0.0"}
        assert support.listening_addresses(grpc_port) <= {"0.0.0.0", "::"}
        assert support.listening_addresses(grpc_port)


def test_listen_address_keeps_both_ports_on_loopback():
    server, grpc_port, rest_port = listening_server("--listen_address=127.0.0.1")
    with server:
        server.wait_until(lambda: support.port_is_open(rest_port), what="listening")
        assert support.listening_addresses(rest_port) == {"127.0.0.1"}
        assert support.listening_addresses(grpc_port) == {"127.0.0.1"}
        response = requests.post(f"http://127.0.0.1:{rest_port}/v1/models/m:predict", json={"instances": [1.0]},
                                 timeout=30)
        assert response.json() == {"predictions": [2.5]}
    assert "Running gRPC ModelServer at 127.0.0.1:" in server.log()
    assert f"Exporting HTTP/REST API at:127.0.0.1:{rest_port}" in server.log()
