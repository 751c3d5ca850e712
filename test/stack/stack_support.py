"""Helpers of the full-stack tests: HTTP calls through nginx, model folders with a code/ folder."""

from __future__ import annotations

import http.client
import json
import textwrap
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import support

ATTRIBUTES = "X-Amzn-SageMaker-Custom-Attributes"


@dataclass
class Answer:
    status: int
    headers: dict[str, str]  # lower-case names
    body: bytes

    def json(self):
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode()


def call(url: str, body: bytes | str | None = None, method: str | None = None, timeout: float = 120,
         **headers: str) -> Answer:
    """One HTTP request; header names as keyword arguments with underscores (content_type='text/csv')."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        data = body.encode() if isinstance(body, str) else body
        names = {name.replace("_", "-"): value for name, value in headers.items()}
        connection.request(method or ("GET" if body is None else "POST"), parts.path, data, names)
        response = connection.getresponse()
        return Answer(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
    finally:
        connection.close()


def invoke(stack: support.Stack, body: bytes | str, content_type: str | None = "application/json",
           attributes: str | None = None, **headers: str) -> Answer:
    """POST /invocations through the stack's nginx."""
    if content_type is not None:
        headers["Content-Type"] = content_type
    if attributes is not None:
        headers[ATTRIBUTES] = attributes
    return call(stack.url + "/invocations", body, **headers)


def model_dir(root: Path, script: str | None = None, files: dict[str, str] | None = None,
              model: Path = support.HALF_PLUS_THREE) -> Path:
    """root/model: the reference `model` as the archive layout (<version>/ at the top), code/inference.py holding
    `script` (dedented) and code/`files`."""
    folder = support.copy_model(model, root, "model")
    code = folder / "code"
    for path, text in {**({"inference.py": script} if script else {}), **(files or {})}.items():
        target = code / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text))
    return folder


def pretty_predictions(values: str) -> str:
    """TensorFlow Serving's REST body for a flat list of predictions, byte for byte."""
    return '{\n    "predictions": [' + values + "\n    ]\n}"
