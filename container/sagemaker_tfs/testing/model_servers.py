"""The model servers of in-process endpoints: started as `serve` starts them (stack/commands.py), once per model
folder and model server settings in a process, shared by every Endpoint of that folder, stopped by stop_all() (the
pytest plugin calls it at the end of the session; atexit otherwise)."""

from __future__ import annotations

import atexit
import dataclasses
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from ..config import Settings
from ..errors import StartupError
from ..shared import model_tree
from ..shared.free_ports import free_port_range
from ..shared.model_tree import ModelTree
from ..stack import commands
from ..stack.supervisor import model_ready

POLL_SECONDS = 0.1  # how often a start waits for the models to be AVAILABLE


class ModelServers:
    """The model server instances of one model folder, on free loopback ports, their output in `log_file`."""

    def __init__(self, settings: Settings, tree: ModelTree):
        count = settings.tfs_instance_count
        self.port_range = free_port_range(2 * count)
        self.settings = dataclasses.replace(settings, safe_port_range=self.port_range)
        self.folder = Path(tempfile.mkdtemp(prefix="sagemaker-tfs-model-servers-"))
        self.log_file = self.folder / "model-servers.log"
        config_file = self.folder / "models.config"
        config_file.write_text(model_tree.model_config_text(tree))
        batching_file = None
        if settings.tfs_enable_batching:
            batching_file = self.folder / "batching_parameters.pbtxt"
            batching_file.write_text(commands.batching_parameters_text(settings))
        self._log = self.log_file.open("ab")
        self.processes: list[subprocess.Popen[bytes]] = []
        env = self.settings.to_env(os.environ)
        for args, extra_env in commands.model_server_commands(self.settings, config_file, batching_file):
            self.processes.append(
                subprocess.Popen(
                    args,
                    env={**env, **extra_env},
                    stdin=subprocess.DEVNULL,
                    stdout=self._log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # a Ctrl-C of the test run reaches pytest, which stops them
                )
            )
        try:
            self._wait(tree)
        except BaseException:
            self.stop()
            raise

    def ports(self) -> list[tuple[int, int]]:
        """(gRPC port, REST port) of each instance."""
        return self.settings.ports()

    def _wait(self, tree: ModelTree) -> None:
        deadline = time.monotonic() + self.settings.tfs_wait_time_seconds
        for i, (process, (_, rest_port)) in enumerate(zip(self.processes, self.ports(), strict=True)):
            for model in tree.models:
                while not model_ready(f"model server {i}", rest_port, model):
                    if process.poll() is not None:
                        raise StartupError(
                            f"model server {i} exited with status {process.returncode} while loading model "
                            f"{model.name}:\n{self.last_lines()}"
                        )
                    if time.monotonic() > deadline:
                        raise StartupError(
                            f"timed out after {self.settings.tfs_wait_time_seconds} s "
                            f"(SAGEMAKER_TFS_WAIT_TIME_SECONDS) waiting for model {model.name}:\n{self.last_lines()}"
                        )
                    time.sleep(POLL_SECONDS)

    def last_lines(self, count: int = 15) -> str:
        self._log.flush()
        lines = [line for line in self.log_file.read_text(errors="replace").splitlines() if line.strip()]
        return "\n".join(f"    {line}" for line in lines[-count:]) or "    (no output)"

    def running(self) -> bool:
        return all(process.poll() is None for process in self.processes)

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._log.close()
        shutil.rmtree(self.folder, ignore_errors=True)


_shared: dict[tuple, ModelServers] = {}
_lock = threading.Lock()  # endpoints may be opened from several threads of a test


def _key(settings: Settings) -> tuple:
    """What makes two endpoints' model servers interchangeable: the model folder and the settings that go into the
    model servers' command lines (the ports aside)."""
    sample = dataclasses.replace(settings, safe_port_range=None)
    args = commands.model_server_commands(
        sample, Path("models.config"), Path("batching") if sample.tfs_enable_batching else None
    )
    return (settings.model_dir, settings.default_model, tuple(tuple(a) + tuple(sorted(e.items())) for a, e in args))


def shared(settings: Settings, tree: ModelTree) -> ModelServers:
    """The running model servers for this folder and these settings, started on first use (or again, if one died)."""
    key = _key(settings)
    with _lock:
        servers = _shared.get(key)
        if servers is None or not servers.running():
            if servers is not None:
                servers.stop()
            servers = _shared[key] = ModelServers(settings, tree)
        return servers


def stop_all() -> None:
    """Stop every shared model server of this process."""
    with _lock:
        for servers in _shared.values():
            servers.stop()
        _shared.clear()


atexit.register(stop_all)
