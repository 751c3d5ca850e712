"""Helpers of the multi-model tests: a stack with SAGEMAKER_MULTI_MODEL=true, and its routes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import clients
import model_dirs
import paths
import serve_stack

Answer = clients.Answer


class MultiModelStack(serve_stack.Stack):
    """serve in multi-model mode on free ports: `root` is the model root; 2 gunicorn workers unless told."""

    def __init__(self, root: Path, env: dict[str, str] | None = None, instances: int = 1):
        settings = {
            "SAGEMAKER_MULTI_MODEL": "true",
            "SAGEMAKER_GUNICORN_WORKERS": "2",
            "SAGEMAKER_MULTI_MODEL_CODE_DIR": str(root.parent / "no-universal-code"),
        }
        super().__init__(root, {**settings, **(env or {})}, instances)
        self.root = root

    def call(self, method: str, path: str, body: object = None, **headers: str) -> Answer:
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
            headers.setdefault("Content_Type", "application/json")
        return clients.http_call(self.port, method, path, body, {k.replace("_", "-"): v for k, v in headers.items()})

    def load(self, name: object, url: object, **headers: str) -> Answer:
        return self.call("POST", "/models", {"model_name": name, "url": url}, **headers)

    def unload(self, name: str, **headers: str) -> Answer:
        return self.call("DELETE", f"/models/{name}", **headers)

    def invoke(self, name: str, body: object = None, content_type: str = "application/json", **headers: str) -> Answer:
        body = {"instances": [1.0, 2.0]} if body is None else body
        return self.call(
            "POST",
            f"/models/{name}/invoke",
            body if isinstance(body, (str, bytes)) else json.dumps(body),
            Content_Type=content_type,
            **headers,
        )

    def listed(self, query: str = "") -> Answer:
        return self.call("GET", "/models" + query)


def model(
    root: Path,
    name: str,
    source: Path = paths.HALF_PLUS_TWO,
    script: str | None = None,
    files: dict[str, str] | None = None,
) -> Path:
    """root/name: a copy of a reference model (version folders at the top), with code/ when given."""
    path = root / name
    shutil.copytree(source, path)
    if script is not None or files:
        model_dirs.write_code(path, script, files)
    return path


def gated_copy(root: Path, gated: tuple[Path, object], name: str) -> tuple[Path, object]:
    """root/name: a copy of the gated model (conftest.gated), its gate closed: a load of it waits for gate.open()."""
    source, gate = gated
    url = root / name
    shutil.copytree(source, url)
    gate.close()
    return url, gate


def model_server_state(stack: serve_stack.Stack, name: str, instance: int = 0) -> str | None:
    """The state of `name` on a model server instance (read from its REST port directly), None when it does not
    serve it: unknown (404), or removed by a reload, whose versions TFS goes on reporting as END."""
    answer = clients.http_call(stack.model_server_ports[2 * instance + 1], "GET", f"/v1/models/{name}")
    state = answer.json()["model_version_status"][0]["state"] if answer.status == 200 else None
    return None if state == "END" else state


def predictions(*values: float) -> str:
    """TensorFlow Serving's REST body for a flat list of predictions, byte for byte."""
    return '{\n    "predictions": [' + ", ".join(map(str, values)) + "\n    ]\n}"


def error(message: str) -> dict[str, str]:
    return {"error": message}
