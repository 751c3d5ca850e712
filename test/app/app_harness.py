"""The app built in this process (create_app with an env mapping) and called with falcon.testing, against
the real model server (app_support): no gunicorn, no socket between the test and the app."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import falcon.testing

from app_support import Answer, Calls, ModelServer, app_env
from sagemaker_tfs.app.routes import create_app


class InProcessApp(Calls):
    """create_app(env) as `serve` would configure it; `log()` is what the app logged meanwhile. Use as a
    context manager: on exit the app is closed (its connections, its script's modules and sys.path entries)."""

    def __init__(self, model_dir: Path, model_server: ModelServer | None, env: dict[str, str] | None = None,
                 workers: int = 1, threads: int = 1):
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

    def call(self, method: str, path: str, body: bytes | str | None = None,
             headers: dict[str, str] | None = None) -> Answer:
        result = self.client.simulate_request(method, path, body=body, headers=headers)
        return Answer(result.status_code, {name.lower(): value for name, value in result.headers.items()},
                      result.content)

    def log(self) -> str:
        return self._log.getvalue()

    def _detach_log(self) -> None:
        logging.getLogger("sagemaker_tfs").removeHandler(self._handler)

    def close(self) -> None:
        self.app.close()
        self._detach_log()

    def __enter__(self) -> "InProcessApp":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
