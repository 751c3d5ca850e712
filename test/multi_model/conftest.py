"""Fixtures of the multi-model tests: one stack shared by the session for the rules that need no setting of
their own (each test loads its own names and unloads what it loaded)."""

from __future__ import annotations

import pytest
from mme_support import MultiModelStack


@pytest.fixture(scope="session")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("mme") / "models"


@pytest.fixture(scope="session")
def stack(root):
    root.mkdir()
    with MultiModelStack(root) as running:
        yield running


@pytest.fixture(scope="session")
def gated(tmp_path_factory):
    """(model folder, Gate): a model whose every load waits until gate.open() (gated_model.py)."""
    from gated_model import Gate, build

    folder = tmp_path_factory.mktemp("gated")
    gate = Gate(folder / "gate")
    return build(folder / "model", gate.path), gate
