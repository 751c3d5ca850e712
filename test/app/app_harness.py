"""The app built in this process (create_app with an env mapping) and called with falcon.testing, against
the real model server (app_support): no gunicorn, no socket between the test and the app."""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import falcon.testing
from app_support import Answer, Calls, ModelServer, app_env
from sagemaker_tfs.app.routes import App, create_app
from sagemaker_tfs.config import Settings
from sagemaker_tfs.registry.publication import Publisher


class InProcessApp(Calls):
    """create_app(env) as `serve` would configure it; `log()` is what the app logged meanwhile. Use as a
    context manager: on exit the app is closed (its connections, its script's modules and sys.path entries)."""

    def __init__(
        self,
        model_dir: Path,
        model_server: ModelServer | None,
        env: dict[str, str] | None = None,
        workers: int = 1,
        threads: int = 1,
    ):
        self.env = {**app_env(model_dir, model_server, workers, threads), **(env or {})}
        self._log = io.StringIO()
        self._handler = logging.StreamHandler(self._log)
        self._handler.setFormatter(logging.Formatter("[%(levelname)s] %(name)s: %(message)s"))
        logging.getLogger("sagemaker_tfs").addHandler(self._handler)
        try:
            self.app = create_app(self.env)
        except BaseException:
            self._detach_log()
            raise
        self.client = falcon.testing.TestClient(self.app)

    def call(
        self, method: str, path: str, body: bytes | str | None = None, headers: dict[str, str] | None = None
    ) -> Answer:
        result = self.client.simulate_request(method, path, body=body, headers=headers)
        return Answer(
            result.status_code, {name.lower(): value for name, value in result.headers.items()}, result.content
        )

    def log(self) -> str:
        return self._log.getvalue()

    def _detach_log(self) -> None:
        logging.getLogger("sagemaker_tfs").removeHandler(self._handler)

    def close(self) -> None:
        self.app.close()
        self._detach_log()

    def __enter__(self) -> InProcessApp:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@contextlib.contextmanager
def multi_model_app(model_server: ModelServer, folder: Path, **settings: Any) -> Iterator[tuple[App, Publisher]]:
    """create_app of a multi-model endpoint in `folder` (with more `settings`, Settings' fields), following a
    registry publisher that the test drives: (app, publisher), both closed on exit."""
    runtime = folder / "runtime"
    runtime.mkdir(mode=0o700)
    publisher = Publisher(runtime / "registry.sock")
    publisher.start()
    try:
        app = create_app(
            Settings.env_of(
                multi_model=True,
                model_dir=str(folder),
                multi_model_code_dir=str(folder / "code"),
                runtime_dir=str(runtime),
                model_server_rest_ports=(model_server.rest_port,),
                model_server_grpc_ports=(model_server.grpc_port,),
                **settings,
            )
        )
        try:
            yield app, publisher
        finally:
            app.close()
    finally:
        publisher.close()
