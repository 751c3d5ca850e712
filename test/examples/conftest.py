"""Fixtures of the examples' tests: each example is built, packaged and unpacked once per session, as a user
would (`python build.py EXPORT_DIR`, `sagemaker-tfs package-model build`, tar -x into a fresh model folder)."""

from __future__ import annotations

import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from examples_support import EXAMPLES, run
from paths import VENV_BIN


@dataclass(frozen=True)
class Packaged:
    export_dir: Path  # what build.py wrote
    archive: Path  # model.tar.gz, from sagemaker-tfs package-model build
    model_dir: Path  # the archive unpacked into a fresh folder, as SageMaker unpacks it into /opt/ml/model


def package(example: str, work: Path) -> Packaged:
    source = EXAMPLES / example
    export_dir, archive, model_dir = work / "export", work / "model.tar.gz", work / "model"
    run(sys.executable, source / "build.py", export_dir)
    code = ["--code", source / "code"] if (source / "code").is_dir() else []
    run(VENV_BIN / "sagemaker-tfs", "package-model", "build", export_dir, *code, "-o", archive)
    model_dir.mkdir()
    with tarfile.open(archive) as tar:
        tar.extractall(model_dir, filter="data")
    return Packaged(export_dir, archive, model_dir)


@pytest.fixture(scope="session")
def packaged(tmp_path_factory):
    """packaged(example) -> Packaged, built on first use."""
    done: dict[str, Packaged] = {}

    def get(example: str) -> Packaged:
        if example not in done:
            done[example] = package(example, tmp_path_factory.mktemp(example))
        return done[example]

    return get
