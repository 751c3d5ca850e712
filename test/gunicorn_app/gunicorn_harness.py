"""Running the app under gunicorn for tests, against the real model server (app_support)."""

from __future__ import annotations

from pathlib import Path

import clients
import paths
import ports
import processes
from app_support import Answer, Calls, ModelServer, app_env
from sagemaker_tfs.stack.commands import WORKER_CLASSES


class App(processes.Background, Calls):
    """gunicorn running `sagemaker_tfs.app.routes:create_app()` on a free loopback port, as `serve` would set
    it up (app_env), with the default worker class unless told otherwise."""

    def __init__(
        self,
        model_dir: Path,
        model_server: ModelServer | None,
        env: dict[str, str] | None = None,
        workers: int = 1,
        threads: int = 1,
        worker_class: str = "loop",
    ):
        self.port = ports.free_port()
        self.worker_class = worker_class
        self.url = f"http://127.0.0.1:{self.port}"
        super().__init__(
            [
                paths.VENV_BIN / "gunicorn",
                "sagemaker_tfs.app.routes:create_app()",
                "--bind",
                f"127.0.0.1:{self.port}",
                "--workers",
                str(workers),
                "--threads",
                str(threads),
                "--worker-class",
                WORKER_CLASSES.get(worker_class, worker_class),
                "--graceful-timeout",
                "5",
                "--no-control-socket",
            ],
            env={**app_env(model_dir, model_server, workers, threads), **(env or {})},
        )

    def start(self, wait_for: int | None = 200) -> App:
        """Start; wait until /ping answers `wait_for` (None: do not wait)."""
        super().start()
        if wait_for is not None:
            self.wait_until(
                lambda: clients.http_status(self.url + "/ping") == wait_for,
                timeout=60,
                what=f"answering /ping with {wait_for}",
            )
        return self

    def call(
        self, method: str, path: str, body: bytes | str | None = None, headers: dict[str, str] | None = None
    ) -> Answer:
        return clients.http_call(self.port, method, path, body, headers, timeout=60)
