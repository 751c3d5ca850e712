"""One stack of the container for one setting: `serve` on free loopback ports, as `transform` starts its own.

transform.containers.start_containers gives each stack room for one model server (its jobs do not change the
instance count), so a setting with SAGEMAKER_TFS_INSTANCE_COUNT > 1 would not start there. This starts `serve` the
same way (transform's launch_stack) with a port range for every instance, and waits for /ping with transform's
Container; the ports come from below the kernel's ephemeral range, where the load generator's own connections never
take them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from pathlib import Path

from ..shared.free_ports import free_port, free_port_range
from ..transform.containers import Container, ContainerError, launch_stack, serve_command


def start_stack(
    model_dir: Path, env: Mapping[str, str], instances: int, workdir: Path, startup_timeout: float
) -> Container:
    """A ready stack serving model_dir with `env`; ContainerError (with its log's last lines) when it is not."""
    workdir.mkdir(parents=True, exist_ok=True)
    ports = (free_port(), *free_port_range(2 * instances))  # each model server: its gRPC and REST ports
    try:
        container = launch_stack(
            serve_command(), model_dir, env, 0, ports, workdir / "stack.log", "sagemaker-tfs-tune-stack-"
        )
    except OSError as exc:
        raise ContainerError(f"Unable to start serve: {exc}") from None
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
