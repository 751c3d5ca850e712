"""The full container stack (`serve`) on free loopback ports, as a background process."""

from __future__ import annotations

import os
import signal
import tempfile
from pathlib import Path

from clients import http_status
from paths import VENV_BIN
from ports import free_port, free_port_range
from processes import Background, descendants, remove_at_exit, session_members
from sagemaker_tfs.config import Settings


class Stack(Background):
    """The full container stack (`serve`: model servers, gunicorn + Falcon app, nginx) on free loopback ports.

    `env` adds SAGEMAKER_* settings. `url` is nginx's base URL; `runtime_dir` holds the stack's files. `serve` is
    the command (another environment's, for the serving image's and the wheel's tests), run in `cwd`.
    """

    def __init__(
        self,
        model_dir: str | Path,
        env: dict[str, str] | None = None,
        instances: int = 1,
        serve: Path = VENV_BIN / "serve",
        cwd: Path | None = None,
    ):
        self.port = free_port()
        low, high = free_port_range(2 * instances)
        self.model_server_ports = list(range(low, high + 1))
        self.runtime_dir = remove_at_exit(Path(tempfile.mkdtemp(prefix="stack-")))
        self.url = f"http://127.0.0.1:{self.port}"
        settings = Settings.env_of(
            model_dir=str(model_dir),
            bind_port=self.port,
            safe_port_range=(low, high),
            tfs_instance_count=instances,
            runtime_dir=str(self.runtime_dir),
        )
        super().__init__([serve], env={**settings, **(env or {})}, cwd=cwd, stop_timeout=60)

    def start(self, wait: bool = True) -> Stack:
        super().start()
        if wait:
            self.wait_until(self.ready, timeout=180, what="answering /ping with 200")
        return self

    def ready(self) -> bool:
        return http_status(self.url + "/ping") == 200

    def pid_of(self, child: str) -> int:
        """The pid of a supervised child: 'tfs-0', 'gunicorn-supervised', 'nginx-supervised'."""
        return int((self.runtime_dir / f"{child}.pid").read_text())

    def processes(self) -> set[int]:
        """serve's children and theirs, found by parent and by the children's sessions (an orphan of a dead
        child keeps its session)."""
        return descendants(self.proc.pid) | session_members(self.child_sessions())

    def child_sessions(self) -> set[int]:
        """The sessions of the supervised children (each runs in its own) named by their pid files now."""
        return {
            int(path.read_text())
            for path in self.runtime_dir.glob("*.pid")
            if (path.stem.startswith("tfs-") or path.stem.endswith("-supervised")) and path.read_text().strip()
        }

    def stop(self) -> int | None:
        """Stop serve; then kill whatever of its children's sessions is left (after a failed test)."""
        sessions = self.child_sessions() if self.runtime_dir.is_dir() else set()
        code = super().stop()
        for pid in session_members(sessions):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return code

    def gunicorn_workers(self) -> set[int]:
        return descendants(self.pid_of("gunicorn-supervised"))

    def __enter__(self) -> Stack:
        return self if self.proc is not None else self.start()  # `with Stack(...).start(wait=False)` starts once
