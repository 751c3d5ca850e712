"""scripts/check-base-python.sh, the Dockerfile's first step: a base image whose Python sagemaker-tfs cannot run
on (tensorflow/serving:2.19.0 and older: Ubuntu 20.04, Python 3.8) fails the build at once with one message.
Run here against pyenv's interpreters, without building an image."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import paths
import pytest

PYENV = Path("/root/.pyenv/versions")
CHECK = paths.REPO / "scripts" / "check-base-python.sh"
BASES = "tensorflow/serving:2.20.0 or newer (GPU: tensorflow/serving:2.20.0-gpu), or a base with Python 3.10 to 3.13"


def interpreter(version: str) -> Path:
    found = sorted(PYENV.glob(f"{version}.*/bin/python3"))
    if not found:
        pytest.fail(f"no CPython {version} under {PYENV} (this kind of machine has 3.6 to 3.13 there)")
    return found[-1]


def check(python: Path | str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["sh", CHECK], capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHON": str(python)}
    )


@pytest.mark.parametrize("version", ["3.8", "3.9"])
def test_a_base_with_an_older_python_fails_with_one_message(version):
    python = interpreter(version)
    found = python.resolve().parent.parent.name  # 3.8.18
    result = check(python)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        f"cannot build: the base image's Python is {found} ({python}); sagemaker-tfs needs "
        f"Python >= 3.10: use {BASES}\n"
    )


@pytest.mark.parametrize("version", ["3.10", "3.13"])
def test_a_base_with_a_supported_python_is_used_as_it_is(version):
    python = interpreter(version)
    result = check(python)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == f"base python: {python} {python.resolve().parent.parent.name}, with venv: used as it is\n"


def test_a_base_without_python_needs_the_install_step(tmp_path):
    result = check(tmp_path / "python3")
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == f"cannot build: the base image has no python3 >= 3.10 with venv; use {BASES}\n"
