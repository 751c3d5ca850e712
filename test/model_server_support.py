"""The embedded model server as a process for every test that needs one (the model server's own tests, and through
app_support the app's): model servers on free loopback ports, model configs, test models."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import paths
import ports
import processes
import requests

SERVER = [sys.executable, "-m", "sagemaker_tfs.model_server"]


class ModelServer(processes.Background):
    """`python -m sagemaker_tfs.model_server` with a model config, on free ports; ready when its ports open."""

    def __init__(self, config_text: str, workdir: Path, *args: str, env: dict[str, str] | None = None):
        self.grpc_port = ports.free_port()
        self.rest_port = ports.free_port()
        self.url = f"http://127.0.0.1:{self.rest_port}"
        self.config_file = workdir / "models.config"
        self.config_file.write_text(config_text)
        super().__init__(
            [
                *SERVER,
                f"--port={self.grpc_port}",
                f"--rest_api_port={self.rest_port}",
                f"--model_config_file={self.config_file}",
                "--max_num_load_retries=0",
                "--file_system_poll_wait_seconds=0",
                *args,
            ],
            env=env,
        )
        self.http = requests.Session()

    def start(self) -> ModelServer:
        super().start()
        self.wait_until(lambda: ports.port_is_open(self.rest_port), timeout=120, what="listening")
        return self

    def __enter__(self) -> ModelServer:
        return self.start()

    def stop(self) -> int | None:
        self.http.close()
        return super().stop()

    def get(self, path: str) -> requests.Response:
        return self.http.get(self.url + path, timeout=60)

    def post(self, path: str, body: object) -> requests.Response:
        data = body if isinstance(body, (bytes, str)) else json.dumps(body)
        return self.http.post(self.url + path, data=data, timeout=60)


def model_config(models: dict[str, Path], extra: dict[str, str] | None = None) -> str:
    """A text-format ModelServerConfig; extra adds text inside a model's `config { }`."""
    entries = []
    for name, path in models.items():
        more = (extra or {}).get(name, "")
        entries.append(f'  config {{ name: "{name}" base_path: "{path}" model_platform: "tensorflow" {more} }}')
    return "model_config_list {\n" + "\n".join(entries) + "\n}\n"


def versioned_model(parent: Path) -> Path:
    """A model whose versions compute different things: 00000001 is half_plus_two, 2 is half_plus_three;
    the other folders (hidden, code, not integers) are not versions."""
    base = parent / "by_version"
    shutil.copytree(paths.HALF_PLUS_TWO / "00000123", base / "00000001")
    shutil.copytree(paths.HALF_PLUS_THREE / "00000123", base / "2")
    for ignored in (".ipynb_checkpoints/7", "code", "v9", "1.5", "-3"):
        shutil.copytree(paths.HALF_PLUS_THREE / "00000123", base / ignored)
    return base
