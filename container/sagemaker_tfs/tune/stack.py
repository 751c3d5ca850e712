"""One stack of the container for one setting: `serve` on free loopback ports, as `transform` starts its own.

transform.containers.start_containers gives each stack room for one model server (its jobs do not change the
instance count), so a setting with SAGEMAKER_TFS_INSTANCE_COUNT > 1 would not start there. This starts `serve` the
same way (its command, a session of its own, a reachable runtime folder, the log in the work folder) with a port
range for every instance, and waits for /ping with transform's Container; the ports come from below the kernel's
ephemeral range, where the load generator's own connections never take them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from ..config import Settings
from ..shared.free_ports import free_port, free_port_range
from ..transform.containers import Container, ContainerError, serve_command


def start_stack(
    model_dir: Path, env: Mapping[str, str], instances: int, workdir: Path, startup_timeout: float
) -> Container:
    """A ready stack serving model_dir with `env`; ContainerError (with its log's last lines) when it is not."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    low, high = free_port_range(2 * instances)  # each model server: its gRPC and REST ports
    # nginx's workers (not root) reach sockets in the runtime folder: not under a private temporary folder
    runtime_dir = Path(tempfile.mkdtemp(prefix="sagemaker-tfs-tune-stack-"))
    runtime_dir.chmod(0o755)
    settings = Settings.env_of(
        model_dir=str(model_dir), bind_port=port, safe_port_range=(low, high), runtime_dir=str(runtime_dir)
    )
    log_path = workdir / "stack.log"
    try:
        with open(log_path, "wb") as log_file:
            process = subprocess.Popen(
                [serve_command()],
                env={**os.environ, **env, **settings},
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its processes are the session's: usage.py reads them, killpg stops them
            )
    except OSError as exc:
        shutil.rmtree(runtime_dir, ignore_errors=True)
        raise ContainerError(f"Unable to start serve: {exc}") from None
    container = Container(0, f"http://127.0.0.1:{port}", process, log_path, runtime_dir, (port, low, high))
    try:
        container.wait_ready(time.monotonic() + startup_timeout, threading.Event())
    except BaseException:
        stop_stack(container)
        raise
    return container


def stop_stack(container: Container) -> None:
    """SIGTERM (serve drains), then SIGKILL for what is left of its session; its runtime folder removed."""
    container.terminate()
    container.wait_stopped()
