"""Fixtures of the model server's tests: the models the tests build, and a model server shared by the session."""

from __future__ import annotations

from pathlib import Path

import build_models
import paths
import pytest
from model_server_support import ModelServer, model_config, versioned_model


@pytest.fixture(scope="session")
def built_models(tmp_path_factory) -> Path:
    """The models of build_models.py, exported once per test session."""
    return build_models.build_all(tmp_path_factory.mktemp("built_models"))


@pytest.fixture(scope="session")
def server(built_models, tmp_path_factory) -> ModelServer:
    """One model server with every reference model (the broken one too) and the built models."""
    workdir = tmp_path_factory.mktemp("server")
    models = {
        "by_version": versioned_model(workdir),
        "half_plus_two": paths.HALF_PLUS_TWO,
        "half_plus_three": paths.HALF_PLUS_THREE,
        "two_versions": paths.HALF_PLUS_TWO_2_VERSIONS,
        "half_plus_two_tf2": paths.HALF_PLUS_TWO_TF2,
        "broken": paths.BAD_HALF_PLUS_TWO,
        **{name: built_models / name for name in build_models.MODELS},
    }
    # by_version's labels name versions that compute different things (1: half_plus_two, 2: half_plus_three)
    extra = {
        "by_version": 'model_version_policy { latest { num_versions: 2 } } version_labels { key: "stable" '
        'value: 1 } version_labels { key: "canary" value: 2 }',
        "two_versions": 'model_version_policy { all {} } version_labels { key: "stable" value: 123 } '
        'version_labels { key: "canary" value: 124 }',
    }
    with ModelServer(model_config(models, extra), workdir) as running:
        yield running
