"""Running the proxy app for tests: the real model server, gunicorn with the app, HTTP calls to it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import support
from sagemaker_tfs.config import Settings

DEFAULT_MODEL = "half_plus_three"  # y = 0.5 x + 3
OTHER_MODEL = "half_plus_two"  # versions 123 and 124, both y = 0.5 x + 2


class ModelServer(support.Background):
    """The embedded model server (`tfs-model-server`) serving half_plus_three and half_plus_two (2 versions)."""

    def __init__(self, folder: Path):
        self.rest_port, self.grpc_port = support.free_port(), support.free_port()
        config = folder / "models.config"
        config.write_text(textwrap.dedent(f"""\
            model_config_list {{
              config {{ name: "{DEFAULT_MODEL}" base_path: "{support.HALF_PLUS_THREE}" model_platform: "tensorflow" }}
              config {{
                name: "{OTHER_MODEL}" base_path: "{support.HALF_PLUS_TWO_2_VERSIONS}" model_platform: "tensorflow"
                model_version_policy {{ all {{}} }}
              }}
            }}
            """))
        super().__init__([support.VENV_BIN / "tfs-model-server", f"--port={self.grpc_port}",
                          f"--rest_api_port={self.rest_port}", f"--model_config_file={config}",
                          "--file_system_poll_wait_seconds=0"], env={"TF_CPP_MIN_LOG_LEVEL": "2"})

    def start(self) -> "ModelServer":
        super().start()
        for model in (DEFAULT_MODEL, OTHER_MODEL):
            url = f"http://127.0.0.1:{self.rest_port}/v1/models/{model}"
            self.wait_until(lambda: support.http_status(url) == 200, timeout=180, what=f"serving {model}")
        return self


Answer = support.Answer


def write_model_dir(folder: Path, script: str | None = None, files: dict[str, str] | None = None) -> Path:
    """A model directory whose code/ holds `script` as inference.py (dedented) and `files` (relative paths)."""
    (folder / "code").mkdir(parents=True, exist_ok=True)
    return support.write_code(folder, script, files)


class App(support.Background):
    """gunicorn running `sagemaker_tfs.proxy.app:create_app()` on a free loopback port, as `serve` would set
    it up (Settings.env_of: the model server instances, by default the one given, and the default model)."""

    def __init__(self, model_dir: Path, model_server: ModelServer | None, env: dict[str, str] | None = None,
                 workers: int = 1, threads: int = 1, worker_class: str = "sync"):
        self.port = support.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        settings = Settings.env_of(model_dir=str(model_dir), default_model=DEFAULT_MODEL, gunicorn_workers=workers,
                                   gunicorn_threads=threads)
        if model_server is not None:
            settings.update(Settings.env_of(model_server_rest_ports=(model_server.rest_port,),
                                            model_server_grpc_ports=(model_server.grpc_port,)))
        super().__init__([support.VENV_BIN / "gunicorn", "sagemaker_tfs.proxy.app:create_app()",
                          "--bind", f"127.0.0.1:{self.port}", "--workers", str(workers), "--threads", str(threads),
                          "--worker-class", worker_class, "--graceful-timeout", "5", "--no-control-socket"],
                         env={**settings, **(env or {})})

    def start(self, wait_for: int | None = 200) -> "App":
        """Start; wait until /ping answers `wait_for` (None: do not wait)."""
        super().start()
        if wait_for is not None:
            self.wait_until(lambda: support.http_status(self.url + "/ping") == wait_for, timeout=60,
                            what=f"answering /ping with {wait_for}")
        return self

    def call(self, method: str, path: str, body: bytes | str | None = None,
             headers: dict[str, str] | None = None) -> Answer:
        return support.http_call(self.port, method, path, body, headers, timeout=60)

    def invoke(self, body: bytes | str, content_type: str | None = "application/json", accept: str | None = None,
               **headers: str) -> Answer:
        """POST /invocations; keyword headers use underscores (X_Amzn_RequestId=...)."""
        all_headers = {name.replace("_", "-"): value for name, value in headers.items()}
        if content_type is not None:
            all_headers["Content-Type"] = content_type
        if accept is not None:
            all_headers["Accept"] = accept
        return self.call("POST", "/invocations", body, all_headers)
