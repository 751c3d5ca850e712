"""The model side of a local job: InstanceCount stacks of our container started from a model, or running endpoints.

A model is a folder (`<dir>/<version>/saved_model.pb` or `<dir>/<name>/<version>/...`, optional `code/`), a
`model.tar.gz` (local or s3://), unpacked into the job's work folder, or the http(s):// URL of a running container.
Each stack is the `serve` command on free loopback ports, with its own runtime folder and log file, and the
environment SageMaker gives a transform container: the job's Environment, SAGEMAKER_BATCH=true, and
SAGEMAKER_BATCH_STRATEGY / SAGEMAKER_MAX_PAYLOAD_IN_MB / SAGEMAKER_MAX_CONCURRENT_TRANSFORMS only for the fields
the job sets. A stack is ready when GET /ping answers 200 (2 s per ping, as SageMaker). A stack that exits because
another process took one of its ports between their choice and its bind is started again on other ports (up to
PORT_ATTEMPTS times); one that exits for another reason, or is not ready within the startup timeout, fails the job
with its last log lines. All stacks are stopped (SIGTERM, which drains, then SIGKILL) when the job ends, whatever
happens.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import PING_TIMEOUT_SECONDS, Settings
from ..shared.model_archives import UNPACK_ERRORS, member_filter
from ..shared.sockets import HOST
from .job import STRATEGY_ENV_NAMES
from .outcomes import FailureKind

STOP_TIMEOUT_SECONDS = 60.0
PORT_ATTEMPTS = 5  # starts of one stack whose ports other processes keep taking before it binds them

log = logging.getLogger("sagemaker_tfs.transform")


class ContainerError(RuntimeError):
    """The model could not be found, unpacked or started; the message says why.

    `kind` prefixes the job's FailureReason: ClientError for a model that cannot be read, AlgorithmError for a
    container that does not start."""

    def __init__(self, message: str, kind: FailureKind = FailureKind.ALGORITHM):
        super().__init__(message)
        self.kind = kind


def is_endpoint(model: str) -> bool:
    return model.startswith(("http://", "https://"))


def http_get(url: str, timeout: float) -> tuple[int, bytes] | None:
    """(status, body) of GET url, or None when nothing answers in time."""
    parts = urllib.parse.urlsplit(url)
    if not parts.hostname:  # (http.client would fail on None, or go to localhost with a port)
        return None
    connection_class = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = connection_class(parts.hostname, parts.port, timeout=timeout)
    try:
        connection.request("GET", parts.path or "/")
        response = connection.getresponse()
        return response.status, response.read()
    except (OSError, http.client.HTTPException):
        return None
    finally:
        connection.close()


def execution_parameters(url: str) -> dict[str, Any] | None:
    """The container's answer to GET /execution-parameters, or None (the route is optional)."""
    answer = http_get(url.rstrip("/") + "/execution-parameters", timeout=5.0)
    if answer is None or answer[0] != 200:
        return None
    try:
        value = json.loads(answer[1])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def prepare_model(model: str, workdir: Path, read_bytes: Callable[[str], bytes]) -> Path:
    """An unpacked model folder for `model` (a folder, or a tar.gz read with `read_bytes` when on S3)."""
    if model.startswith("s3://"):
        archive = workdir / "model.tar.gz"
        try:
            archive.write_bytes(read_bytes(model))
        except OSError as exc:
            raise ContainerError(f"Unable to download the model {model}: {exc}", FailureKind.CLIENT) from None
        return _unpack(archive, workdir / "model", model)
    path = Path(model)
    if path.is_dir():
        return path.resolve()
    if path.is_file():
        return _unpack(path, workdir / "model", model)
    raise ContainerError(
        f"Model {model} does not exist: give a model folder, a model.tar.gz or an endpoint URL", FailureKind.CLIENT
    )


def _unpack(archive: Path, target: Path, name: str) -> Path:
    try:
        with tarfile.open(archive, "r:*") as tar:
            tar.extractall(target, filter=member_filter)  # no absolute path, no link leading out
    except UNPACK_ERRORS as exc:
        raise ContainerError(f"Unable to unpack the model {name}: {exc}", FailureKind.CLIENT) from None
    return target


def serve_command() -> str:
    beside = Path(sys.executable).parent / "serve"
    found = str(beside) if beside.exists() else shutil.which("serve")
    if not found:
        raise ContainerError("The `serve` command was not found: install the sagemaker-tfs package")
    return found


def container_environment(
    job_env: Mapping[str, str], strategy: str | None, max_payload: int | None, max_concurrent: int | None
) -> dict[str, str]:
    """What SageMaker adds to a transform container's environment (before the stack's own settings)."""
    batch_strategy = None if strategy is None else STRATEGY_ENV_NAMES[strategy]
    return {
        **job_env,
        **Settings.env_of(
            batch=True,
            batch_strategy=batch_strategy,
            max_payload_in_mb=max_payload,
            max_concurrent_transforms=max_concurrent,
        ),
    }


def _free_ports(count: int, taken: set[int]) -> list[int]:
    """`count` consecutive loopback ports free now and not in `taken` (which gets them)."""
    for _ in range(200):
        with socket.socket() as probe:
            probe.bind((HOST, 0))
            low = probe.getsockname()[1]
        ports = list(range(low, low + count))
        if ports[-1] > 65535 or taken.intersection(ports):
            continue
        sockets = []
        try:
            for port in ports:
                sock = socket.socket()
                sockets.append(sock)
                sock.bind((HOST, port))
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
        taken.update(ports)
        return ports
    raise ContainerError(f"No {count} consecutive free ports found on 127.0.0.1")


def _port_taken(port: int) -> bool:
    """Whether some socket holds the port on 127.0.0.1 (TIME_WAIT leftovers do not count)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((HOST, port))
        except OSError:
            return True
    return False


@dataclass
class Container:
    """One running stack of our container."""

    index: int
    url: str
    process: subprocess.Popen
    log_path: Path
    runtime_dir: Path
    ports: tuple[int, ...]  # nginx's, then the model servers'

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 15) -> str:
        kept = [line for line in self.log_text().splitlines() if line.strip()][-lines:]
        return "\n".join(f"    {line}" for line in kept)

    def lost_a_port(self) -> bool:
        """Whether the stack exited because another process took one of its ports before it could bind it."""
        if self.process.poll() is None:
            return False
        return "address already in use" in self.log_text().lower() or any(map(_port_taken, self.ports))

    def wait_ready(self, deadline: float, abort: threading.Event) -> None:
        while time.monotonic() < deadline and not abort.is_set():
            answer = http_get(self.url + "/ping", PING_TIMEOUT_SECONDS)
            if answer is not None and answer[0] == 200:
                return
            status = self.process.poll()
            if status is not None:
                raise ContainerError(
                    f"Model container {self.index} exited with status {status} before answering "
                    f"/ping (log: {self.log_path}):\n{self.log_tail()}"
                )
            time.sleep(0.2)
        if abort.is_set():
            return
        raise ContainerError(
            f"Model container {self.index} failed to respond to ping within the startup timeout "
            f"(log: {self.log_path}):\n{self.log_tail()}"
        )

    def terminate(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def wait_stopped(self) -> None:
        try:
            self.process.wait(STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)  # anything left in its process group
        except (ProcessLookupError, PermissionError):
            pass
        self.process.wait()
        shutil.rmtree(self.runtime_dir, ignore_errors=True)


def launch_stack(
    command: str,
    model_dir: Path,
    env: Mapping[str, str],
    index: int,
    ports: tuple[int, int, int],
    log_path: Path,
    prefix: str,
) -> Container:
    """`serve` (`command`) started, not yet ready, on `ports` (nginx's, then the model servers' range, low and high),
    in a session of its own, its output in log_path and its runtime folder new (named with `prefix`); OSError when
    it cannot be started."""
    port, low, high = ports
    # nginx workers (not root) connect to sockets in the runtime folder: it must be reachable by them,
    # which a work folder under a private temporary folder is not
    runtime_dir = Path(tempfile.mkdtemp(prefix=prefix))
    runtime_dir.chmod(0o755)
    settings = Settings.env_of(
        model_dir=str(model_dir), bind_port=port, safe_port_range=(low, high), runtime_dir=str(runtime_dir)
    )
    try:
        with open(log_path, "wb") as log_file:
            process = subprocess.Popen(
                [command],
                env={**os.environ, **env, **settings},
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its processes are the session's: killpg stops them all
            )
    except OSError:
        shutil.rmtree(runtime_dir, ignore_errors=True)
        raise
    return Container(index, f"http://127.0.0.1:{port}", process, log_path, runtime_dir, ports)


def start_containers(
    model_dir: Path, count: int, env: Mapping[str, str], workdir: Path, startup_timeout: float
) -> list[Container]:
    """`count` ready stacks serving model_dir; on any failure they are all stopped and ContainerError raised."""
    command = serve_command()
    workdir.mkdir(parents=True, exist_ok=True)
    containers: list[Container] = []
    taken: set[int] = set()

    def launch(index: int) -> Container:
        port = _free_ports(1, taken)[0]
        low, high = _free_ports(2, taken)  # one model server: its gRPC and REST ports
        log_path = workdir / f"container-{index}.log"
        return launch_stack(command, model_dir, env, index, (port, low, high), log_path, f"transform-stack-{index}-")

    try:
        for index in range(count):
            containers.append(launch(index))
        starts = 1
        while failed := _wait_ready(containers, time.monotonic() + startup_timeout):
            if starts == PORT_ATTEMPTS or not all(container.lost_a_port() for container, _ in failed):
                raise failed[0][1]
            starts += 1
            for container, _ in failed:
                log.warning(
                    "model container %d lost one of its ports %s to another process before binding it; "
                    "starting it again on other ports",
                    container.index,
                    container.ports,
                )
                container.wait_stopped()
                containers[container.index] = launch(container.index)
        return containers
    except BaseException:
        stop_containers(containers)
        raise


def _wait_ready(containers: list[Container], deadline: float) -> list[tuple[Container, ContainerError]]:
    """Wait for every stack to be ready; the ones that failed (waiting stops at the first failure)."""
    failed: list[tuple[Container, ContainerError]] = []
    abort = threading.Event()  # one failed: stop waiting for the others

    def wait(container: Container) -> None:
        try:
            container.wait_ready(deadline, abort)
        except ContainerError as exc:
            failed.append((container, exc))
            abort.set()

    waiters = [threading.Thread(target=wait, args=(c,), daemon=True) for c in containers]
    for waiter in waiters:
        waiter.start()
    for waiter in waiters:
        waiter.join()
    return failed


def stop_containers(containers: list[Container]) -> None:
    for container in containers:
        container.terminate()
    for container in containers:
        container.wait_stopped()
