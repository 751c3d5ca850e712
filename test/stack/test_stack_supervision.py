"""Supervision under load and faults, with real signals and sockets: readiness that does not queue behind client
requests, a child dying while a later one starts, a killed nginx master whose workers finish their requests, Ctrl-C
draining like SIGTERM, nothing of the stack left after exit, and no file outside the runtime folder."""

from __future__ import annotations

import os
import signal
import tempfile
import threading
from pathlib import Path

import ports
import processes
import serve_stack
from stack_support import invoke, model_dir

SLOW = """
    import os
    import time
    from pathlib import Path

    def handler(data, context):
        body = data.read()
        if os.environ.get("STARTED_DIR"):
            Path(os.environ["STARTED_DIR"], body.decode()).touch()  # the test sees the request in flight
        time.sleep(2)
        return b"done " + body, "text/plain"
"""

# The script's import (in each gunicorn worker) holds until the test creates the file IMPORT_GO.
HELD_IMPORT = """
    import os
    import time
    from pathlib import Path

    Path(os.environ["IMPORT_STARTED"]).touch()
    _deadline = time.monotonic() + 120
    while not Path(os.environ["IMPORT_GO"]).exists() and time.monotonic() < _deadline:
        time.sleep(0.05)

    def handler(data, context):
        return b"echo " + data.read(), "text/plain"
"""

READY_LINE = " INFO serve: ready: "


class SlowRequests:
    """`count` requests to the SLOW handler, each on its own thread; start() returns once all are in the handler."""

    def __init__(self, stack: serve_stack.Stack, started: Path, count: int):
        self.stack, self.started = stack, started
        self.names = [f"request-{i}" for i in range(count)]
        self.answers: dict[str, tuple[int, str] | str] = {}
        self.threads = [threading.Thread(target=self._send, args=(name,)) for name in self.names]

    def _send(self, name: str) -> None:
        try:
            answer = invoke(self.stack, name, "text/plain")
            self.answers[name] = (answer.status, answer.text)
        except OSError as exc:
            self.answers[name] = repr(exc)

    def start(self) -> None:
        for thread in self.threads:
            thread.start()
        processes.wait_for(
            lambda: len(list(self.started.iterdir())) == len(self.names), what="all requests in the handler"
        )

    def finish(self) -> dict[str, tuple[int, str] | str]:
        for thread in self.threads:
            thread.join(60)
        return self.answers

    def all_done(self) -> dict[str, tuple[int, str]]:
        return {name: (200, f"done {name}") for name in self.names}


def assert_nothing_left(stack: serve_stack.Stack, pids: set[int]) -> None:
    assert pids & set(processes.live_processes()) == set()
    for port in [stack.port, *stack.model_server_ports]:
        assert ports.listening_pids(port) is None, f"port {port} still listened on"


def held_import_stack(tmp_path: Path, **env: str) -> tuple[serve_stack.Stack, Path, Path]:
    started, go = tmp_path / "import-started", tmp_path / "import-go"
    folder = model_dir(tmp_path, HELD_IMPORT)
    stack = serve_stack.Stack(
        folder, env={"IMPORT_STARTED": str(started), "IMPORT_GO": str(go), "SAGEMAKER_GUNICORN_WORKERS": "1", **env}
    )
    return stack, started, go


def test_serve_becomes_ready_while_clients_keep_every_worker_busy(tmp_path):
    folder = model_dir(tmp_path, SLOW)
    stack = serve_stack.Stack(folder, env={"SAGEMAKER_TFS_WAIT_TIME_SECONDS": "30", "SAGEMAKER_GUNICORN_WORKERS": "1"})
    stop = threading.Event()
    answers: list[tuple[int, str] | str] = []

    def client(name: str) -> None:
        while True:  # at least one request each
            try:
                answer = invoke(stack, name, "text/plain")
                answers.append((answer.status, answer.text))
            except OSError as exc:
                answers.append(repr(exc))
            if stop.is_set():
                return

    clients = [threading.Thread(target=client, args=(f"client-{i}",)) for i in range(4)]
    try:
        stack.start()  # returns as soon as /ping answers 200
        for thread in clients:
            thread.start()
        processes.wait_for_log(stack, READY_LINE, timeout=90)
        stop.set()
        for thread in clients:
            thread.join(60)
        assert set(answers) == {(200, f"done client-{i}") for i in range(4)}
        stack.signal(signal.SIGTERM)
        assert stack.proc.wait(60) == 0
        assert "cannot start" not in stack.log()
    finally:
        stop.set()
        stack.stop()


def test_a_model_server_dying_while_the_app_starts_is_restarted_and_start_up_completes(tmp_path):
    stack, started, go = held_import_stack(tmp_path)
    try:
        stack.start(wait=False)
        stack.wait_until(started.exists, timeout=180, what="importing the script")
        pid = stack.pid_of("tfs-0")
        os.kill(pid, signal.SIGKILL)
        message = f"model server 0 (pid {pid}) exited with status -9; restarting it (restart #1)"
        processes.wait_for_log(stack, message, timeout=30)
        go.touch()
        stack.wait_until(stack.ready, timeout=180, what="ready")
        assert stack.pid_of("tfs-0") != pid
        answer = invoke(stack, "hello", "text/plain")
        assert (answer.status, answer.text) == (200, "echo hello")
    finally:
        stack.stop()


def test_sigterm_during_start_up_stops_every_child_and_exits_0(tmp_path):
    # the worker never finishes importing the script: gunicorn kills it after its graceful timeout
    stack, started, _ = held_import_stack(tmp_path, SAGEMAKER_GUNICORN_TIMEOUT_SECONDS="5")
    try:
        stack.start(wait=False)
        stack.wait_until(started.exists, timeout=180, what="importing the script")
        pids = stack.processes()
        stack.signal(signal.SIGTERM)
        assert stack.proc.wait(60) == 0
        assert "received SIGTERM: draining and stopping" in stack.log()
        assert "cannot start" not in stack.log()
        assert_nothing_left(stack, pids)
    finally:
        stack.stop()


def test_a_killed_nginx_master_s_workers_finish_their_requests_then_quit_and_nothing_is_left_after_exit(tmp_path):
    started = tmp_path / "started"
    started.mkdir()
    env = {"SAGEMAKER_GUNICORN_WORKERS": "1", "SAGEMAKER_GUNICORN_THREADS": "8", "STARTED_DIR": str(started)}
    with serve_stack.Stack(model_dir(tmp_path, SLOW), env=env) as stack:
        processes.wait_for_log(stack, READY_LINE, timeout=30)
        master = stack.pid_of("nginx-supervised")
        old_nginx = processes.descendants(master) | {master}
        assert ports.listening_pids(stack.port) == old_nginx
        requests = SlowRequests(stack, started, 4)
        requests.start()
        os.kill(master, signal.SIGKILL)
        message = f"nginx (pid {master}) exited with status -9; restarting it (restart #1)"
        processes.wait_for_log(stack, message, timeout=30)
        assert requests.finish() == requests.all_done()  # the old workers finished them

        def new_nginx_listens() -> bool:
            new_master = stack.pid_of("nginx-supervised")
            return new_master != master and ports.listening_pids(stack.port) == processes.descendants(new_master) | {
                new_master
            }

        stack.wait_until(new_nginx_listens, timeout=60, what="the new nginx alone listening on the port")
        processes.wait_for(lambda: not old_nginx & set(processes.live_processes()), what="the old workers gone")
        assert invoke(stack, "now", "text/plain").text == "done now"

        pids = stack.processes()
        assert len(pids) >= 4  # model server, gunicorn master and worker, nginx master and workers
        stack.signal(signal.SIGTERM)
        assert stack.proc.wait(60) == 0
        assert "Address already in use" not in stack.log()  # the log is whole once serve has exited
        assert_nothing_left(stack, pids)


def test_sigint_to_serve_s_process_group_drains_like_sigterm(tmp_path):
    started = tmp_path / "started"
    started.mkdir()
    env = {"SAGEMAKER_GUNICORN_WORKERS": "1", "SAGEMAKER_GUNICORN_THREADS": "8", "STARTED_DIR": str(started)}
    stack = serve_stack.Stack(model_dir(tmp_path, SLOW), env=env).start()
    try:
        pids = stack.processes()
        requests = SlowRequests(stack, started, 8)
        requests.start()
        os.killpg(stack.proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole foreground process group
        assert requests.finish() == requests.all_done()
        assert stack.proc.wait(60) == 0
        assert "received SIGINT: draining and stopping" in stack.log()
        assert_nothing_left(stack, pids)
    finally:
        stack.stop()


def test_no_gunicorn_control_socket_in_home_and_a_private_runtime_folder_by_default(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    # XDG_RUNTIME_DIR as short as /run/user/0: the sockets' paths in it must fit AF_UNIX's 108 bytes
    with tempfile.TemporaryDirectory(prefix="xdg-") as folder:  # mode 0700
        xdg = Path(folder)
        stack = serve_stack.Stack(
            model_dir(tmp_path), env={"HOME": str(home), "XDG_RUNTIME_DIR": str(xdg), "SAGEMAKER_RUNTIME_DIR": ""}
        )
        stack.runtime_dir = xdg / f"sagemaker-tfs-{stack.port}"
        with stack:
            assert invoke(stack, "[1.0]").status == 200
            assert (stack.runtime_dir / "nginx.conf").is_file()
            assert stack.runtime_dir.stat().st_mode & 0o777 == 0o700
        assert not (home / ".gunicorn").exists()  # (TensorFlow, in the model server, writes $HOME/.keras)
        assert [path.name for path in xdg.iterdir()] == [stack.runtime_dir.name]  # no gunicorn.ctl either


def test_a_sigkilled_serve_leaves_no_process_and_no_listening_port_after_5_s(tmp_path):
    stack = serve_stack.Stack(model_dir(tmp_path), env={"SAGEMAKER_GUNICORN_WORKERS": "2"}).start()
    try:
        pids = stack.processes()
        assert len(pids) >= 6  # the model server, gunicorn and 2 workers, nginx and its workers, the reaper
        stack.signal(signal.SIGKILL)
        stack_ports = [stack.port, *stack.model_server_ports]

        def nothing_left() -> bool:
            return not pids & set(processes.live_processes()) and all(
                ports.listening_pids(port) is None for port in stack_ports
            )

        processes.wait_for(nothing_left, timeout=5, what="no process of the stack and no listening port")
    finally:
        stack.stop()
