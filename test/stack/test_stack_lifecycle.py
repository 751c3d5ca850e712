"""The life of a stack: readiness (after the model's warm-up file too), a crashed child recovering, SIGTERM draining
in-flight requests, start-up failures that stop `serve` at once with one message, and two stacks side by side."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path

import clients
import model_dirs
import paths
import processes
import pytest
import serve_stack
from stack_support import call, invoke, model_dir, pretty_predictions

SLOW = """
    import os
    import time
    from pathlib import Path

    def handler(data, context):
        body = data.read()
        Path(os.environ["STARTED_DIR"], body.decode()).touch()  # the test sees the request in flight
        time.sleep(2)
        return b"done " + body, "text/plain"
"""


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return model_dir(tmp_path_factory.mktemp("half_plus_three"))


def test_nginx_opens_only_when_the_model_is_available(model):
    stack = serve_stack.Stack(model).start(wait=False)
    try:
        statuses = []
        processes.wait_for(
            lambda: statuses.append(clients.http_status(stack.url + "/ping")) or statuses[-1] == 200,
            timeout=180,
            what="ready",
        )
        assert set(statuses[:-1]) <= {None}  # the port was closed until then: never a 502 or a half-ready 200
        processes.wait_for_log(stack, "every model is AVAILABLE on 1 model server(s)")
        assert invoke(stack, "1.0").text == pretty_predictions("3.5")
    finally:
        stack.stop()


@pytest.mark.parametrize(
    "child, message",
    [
        ("tfs-0", "model server 0 (pid {pid}) exited with status -9; restarting it (restart #1)"),
        ("gunicorn-supervised", "gunicorn (pid {pid}) exited with status -9; restarting it (restart #1)"),
    ],
)
def test_a_killed_child_is_restarted_and_ping_is_503_until_it_serves_again(model, child, message):
    with serve_stack.Stack(model) as stack:
        pid = stack.pid_of(child)
        os.kill(pid, signal.SIGKILL)
        statuses = []
        processes.wait_for(
            lambda: statuses.append(call(stack.url + "/ping")) or statuses[-1].status == 503,
            timeout=30,
            what="/ping 503 after the kill",
        )
        assert statuses[-1].json()["error"]  # a JSON reason, from the app or nginx
        stack.wait_until(stack.ready, timeout=180, what="serving again")
        processes.wait_for_log(stack, message.format(pid=pid))
        assert stack.pid_of(child) != pid
        assert invoke(stack, '{"instances": [1.0, 2.0]}').text == pretty_predictions("3.5, 4.0")


def test_sigterm_lets_requests_in_flight_complete_then_exits_0(tmp_path):
    started = tmp_path / "started"
    started.mkdir()
    folder = model_dir(tmp_path, SLOW)
    env = {"SAGEMAKER_GUNICORN_THREADS": "4", "STARTED_DIR": str(started)}
    stack = serve_stack.Stack(folder, env=env).start()
    try:
        children = [stack.pid_of(name) for name in ("tfs-0", "gunicorn-supervised", "nginx-supervised")]
        answers = {}

        def send(name: str) -> None:
            answers[name] = invoke(stack, name, "text/plain")

        names = [f"request-{i}" for i in range(6)]
        threads = [threading.Thread(target=send, args=(name,)) for name in names]
        for thread in threads:
            thread.start()
        processes.wait_for(lambda: len(list(started.iterdir())) == len(names), what="all requests in the handler")
        stack.signal(signal.SIGTERM)
        for thread in threads:
            thread.join(60)
        assert {name: (a.status, a.text) for name, a in answers.items()} == {
            name: (200, f"done {name}") for name in names
        }
        assert stack.proc.wait(60) == 0
        assert not any(processes.pid_alive(pid) for pid in children)
        assert "received SIGTERM: draining and stopping" in stack.log()
    finally:
        stack.stop()


def serve_fails(model_dir, **env) -> str:
    """Run serve until it exits (it must, by itself, with status 1); its output."""
    stack = serve_stack.Stack(model_dir, env=env)
    result = subprocess.run([str(paths.VENV_BIN / "serve")], env=stack.env, capture_output=True, text=True, timeout=180)
    assert result.returncode == 1, result.stderr
    return result.stderr


def cannot_start(output: str) -> str:
    lines = [line for line in output.splitlines() if " ERROR serve: cannot start: " in line]
    assert len(lines) == 1, output
    return lines[0].split(" ERROR serve: cannot start: ", 1)[1]


def test_no_model_stops_serve_with_one_message(tmp_path):
    assert cannot_start(serve_fails(tmp_path)) == (
        f"no SavedModel found in {tmp_path}: expected <model_dir>/<version>/saved_model.pb or <model_dir>/<model "
        "name>/<version>/saved_model.pb, where <version> is a number such as 1"
    )


def test_a_version_folder_without_saved_model_stops_serve(tmp_path):
    (tmp_path / "1" / "variables").mkdir(parents=True)
    assert cannot_start(serve_fails(tmp_path)) == (
        f"version folder {tmp_path}/1 has no saved_model.pb (it holds variables); a version folder must contain a "
        "SavedModel as written by tf.saved_model.save"
    )


def write_warmup_requests(model: Path, corrupt: bool = False) -> None:
    """Three Predict records in the model's warm-up file; with `corrupt`, the first record's data CRC is wrong."""
    path = model_dirs.write_warmup_requests(model / "00000123", [model_dirs.predict_log(x=[[1.0]])] * 3)
    if corrupt:
        data = bytearray(path.read_bytes())
        data[12] ^= 0xFF  # the first byte of the first record's data
        path.write_bytes(bytes(data))


def test_ping_stays_503_until_the_model_server_has_replayed_the_warmup_file(tmp_path):
    model = model_dir(tmp_path)
    write_warmup_requests(model)
    stack = serve_stack.Stack(model).start()
    try:
        warmed = (
            "Finished reading warmup data for model at "
            f"{model / '00000123' / 'assets.extra' / 'tf_serving_warmup_requests'}. Number of warmup records "
            "read: 3."
        )
        available = "Successfully loaded servable version {name: model version: 123}"
        # the model server's own lines, forwarded in its order: warm-up ended before the version was AVAILABLE,
        # which serve's readiness (and /ping) waits for
        log = processes.wait_for_log(stack, warmed, available, "every model is AVAILABLE on 1 model server(s)")
        assert log.index(warmed) < log.index(available)
        assert invoke(stack, "1.0").text == pretty_predictions("3.5")
    finally:
        stack.stop()


def test_a_corrupt_warmup_file_stops_serve_with_tensorflow_serving_s_error(tmp_path):
    model = model_dir(tmp_path)
    write_warmup_requests(model, corrupt=True)
    assert cannot_start(serve_fails(model)) == (
        f"model server 0 could not load model model version 123 from {model}: corrupted record at 12. Please verify "
        "your warmup data is in TFRecord format."
    )


def test_an_invalid_variable_stops_serve_naming_it(model):
    assert cannot_start(serve_fails(model, SAGEMAKER_TFS_ENABLE_BATCHING="yes")) == (
        "SAGEMAKER_TFS_ENABLE_BATCHING='yes' is not valid: must be 'true' or 'false'"
    )


def test_requirements_that_cannot_install_stop_serve_with_pip_s_error(tmp_path):
    folder = model_dir(
        tmp_path,
        "def handler(data, context):\n    return data.read()\n",
        {"requirements.txt": "--no-index\nno-such-package-anywhere==1.0\n"},
    )
    output = serve_fails(folder)
    assert cannot_start(output) == f"pip could not install {folder}/code/requirements.txt (exit 1):"
    assert "    ERROR: No matching distribution found for no-such-package-anywhere==1.0" in output


@pytest.mark.parametrize(
    "script, message",
    [
        (
            'raise ImportError("this script needs the foo package")\n',
            "{path} failed to import: ImportError: this script needs the foo package",
        ),
        (
            "def input_handler(data, context):\n    return data.read()\n",
            "Handlers are not implemented correctly in user script. {path} defines only input_handler: define "
            "handler(data, context), or both input_handler(data, context) and output_handler(response, context)",
        ),
    ],
)
def test_a_script_that_cannot_serve_stops_serve_with_its_reason(tmp_path, script, message):
    folder = model_dir(tmp_path, script)
    assert cannot_start(serve_fails(folder)) == message.format(path=folder / "code" / "inference.py")


def test_two_stacks_side_by_side(model):
    with serve_stack.Stack(model) as first, serve_stack.Stack(model) as second:
        assert first.port != second.port and first.runtime_dir != second.runtime_dir
        for stack in (first, second):
            assert invoke(stack, "5.0").text == pretty_predictions("5.5")
