"""Helpers of the full-stack tests: HTTP calls through nginx, model folders with a code/ folder."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import clients
import model_dirs
import paths

ATTRIBUTES = clients.CUSTOM_ATTRIBUTES
Answer = clients.Answer
invoke = clients.invoke  # POST /invocations through the stack's nginx: the examples' tests use it too


def call(url: str, body: bytes | str | None = None, method: str | None = None, **headers: str) -> Answer:
    """One HTTP request; header names as keyword arguments with underscores (X_Amzn_RequestId='...')."""
    parts = urlsplit(url)
    names = {name.replace("_", "-"): value for name, value in headers.items()}
    return clients.http_call(parts.port, method or ("GET" if body is None else "POST"), parts.path, body, names)


def model_dir(
    root: Path, script: str | None = None, files: dict[str, str] | None = None, model: Path = paths.HALF_PLUS_THREE
) -> Path:
    """root/model: the reference `model` as the archive layout (<version>/ at the top), code/inference.py holding
    `script` (dedented) and code/`files`."""
    return model_dirs.write_code(model_dirs.copy_model(model, root, "model"), script, files)


def pretty_predictions(values: str) -> str:
    """TensorFlow Serving's REST body for a flat list of predictions, byte for byte."""
    return '{\n    "predictions": [' + values + "\n    ]\n}"
