"""What the tests of the app share, in-process (test/app) and under gunicorn (test/gunicorn_app): the real
model server they run against, model folders with a code/ folder, the app's environment as `serve` sets it,
and the calls a test makes."""

from __future__ import annotations

from pathlib import Path

import clients
import model_dirs
import model_server_support
import paths
import pytest
from sagemaker_tfs.config import Settings

DEFAULT_MODEL = "half_plus_three"  # y = 0.5 x + 3
OTHER_MODEL = "half_plus_two"  # versions 123 and 124, both y = 0.5 x + 2
Answer = clients.Answer


class ModelServer(model_server_support.ModelServer):
    """The embedded model server serving half_plus_three and half_plus_two (2 versions); started once both serve."""

    def __init__(self, folder: Path):
        config = model_server_support.model_config(
            {DEFAULT_MODEL: paths.HALF_PLUS_THREE, OTHER_MODEL: paths.HALF_PLUS_TWO_2_VERSIONS},
            {OTHER_MODEL: "model_version_policy { all {} }"},
        )
        super().__init__(config, folder, env={"TF_CPP_MIN_LOG_LEVEL": "2"})

    def start(self) -> ModelServer:
        super().start()
        for model in (DEFAULT_MODEL, OTHER_MODEL):
            url = f"{self.url}/v1/models/{model}"
            self.wait_until(lambda url=url: clients.http_status(url) == 200, timeout=180, what=f"serving {model}")
        return self


@pytest.fixture(scope="session")
def model_server(tmp_path_factory) -> ModelServer:
    """One real model server for the session (a conftest imports this fixture)."""
    with ModelServer(tmp_path_factory.mktemp("model-server")) as server:  # started and serving
        yield server


def write_model_dir(folder: Path, script: str | None = None, files: dict[str, str] | None = None) -> Path:
    """A model directory whose code/ holds `script` as inference.py (dedented) and `files` (relative paths)."""
    (folder / "code").mkdir(parents=True, exist_ok=True)
    return model_dirs.write_code(folder, script, files)


def app_env(model_dir: Path, model_server: ModelServer | None, workers: int = 1, threads: int = 1) -> dict[str, str]:
    """The app's environment as `serve` hands it over (Settings.env_of): the model server instances (the one
    given; none without one) and the default model."""
    env = Settings.env_of(
        model_dir=str(model_dir), default_model=DEFAULT_MODEL, gunicorn_workers=workers, gunicorn_threads=threads
    )
    if model_server is not None:
        env.update(
            Settings.env_of(
                model_server_rest_ports=(model_server.rest_port,), model_server_grpc_ports=(model_server.grpc_port,)
            )
        )
    return env


class Calls:
    """invoke() on top of a call(method, path, body, headers) -> Answer."""

    def call(
        self, method: str, path: str, body: bytes | str | None = None, headers: dict[str, str] | None = None
    ) -> Answer:
        raise NotImplementedError

    def invoke(
        self,
        body: bytes | str,
        content_type: str | None = "application/json",
        accept: str | None = None,
        **headers: str,
    ) -> Answer:
        """POST /invocations; keyword headers use underscores (X_Amzn_RequestId=...)."""
        all_headers = {name.replace("_", "-"): value for name, value in headers.items()}
        if content_type is not None:
            all_headers["Content-Type"] = content_type
        if accept is not None:
            all_headers["Accept"] = accept
        return self.call("POST", "/invocations", body, all_headers)
