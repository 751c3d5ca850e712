"""The version-folder rule (version_folders.py) and every caller: `serve`'s model-tree check, `package-model`, the
model server's version scan and the transform runner (which starts `serve`) agree on what a version folder is.

The case that used to disagree: a folder named with non-ASCII digits (`１２`) passed `serve`'s check, the model
server never loaded it, and start-up timed out. Now every caller refuses or ignores it alike."""

import shutil
import subprocess
from pathlib import Path

import paths
import ports
import pytest
from sagemaker_tfs.model_server.model_config import list_versions
from sagemaker_tfs.packaging import PackagingError, build, check
from sagemaker_tfs.shared.model_tree import ModelTreeError, find_models
from sagemaker_tfs.shared.version_folders import INT64_MAX, parse_version
from sagemaker_tfs.transform import transform

FULL_WIDTH_12 = "\uff11\uff12"  # １２
HINT = f"{FULL_WIDTH_12!r} is not a version number: write it with the ASCII digits 0-9"


@pytest.mark.parametrize(
    "name, version",
    [
        ("1", 1),
        ("00000123", 123),
        ("0", 0),
        (str(INT64_MAX), INT64_MAX),
        (FULL_WIDTH_12, None),
        ("\u0663", None),
        ("\u00b2", None),  # full-width, Arabic-Indic three, superscript two
        (str(INT64_MAX + 1), None),
        ("v1", None),
        ("1.0", None),
        ("-1", None),
        ("+1", None),
        (" 1", None),
        ("", None),
        ("code", None),
        (".1", None),
    ],
)
def test_the_rule(name, version):
    assert parse_version(name) == version


def saved_model(folder: Path) -> Path:
    shutil.copytree(paths.HALF_PLUS_TWO / "00000123", folder)
    return folder


@pytest.fixture
def non_ascii_only(tmp_path) -> Path:
    """A model whose only version folder is named in full-width digits."""
    model = tmp_path / "model"
    saved_model(model / FULL_WIDTH_12)
    return model


@pytest.fixture
def mixed(tmp_path) -> Path:
    """A model with version 1, 0012 and a full-width 12 side by side."""
    model = tmp_path / "mixed"
    for name in ("1", "0012", FULL_WIDTH_12):
        saved_model(model / name)
    return model


def refusal(model: Path) -> str:
    return (
        f"no SavedModel found in a version folder; found outside a version folder in {model}: "
        f"{model / FULL_WIDTH_12 / 'saved_model.pb'}; expected <model_dir>/<version>/saved_model.pb or "
        f"<model_dir>/<model name>/<version>/saved_model.pb, where <version> is a number such as 1; {HINT}"
    )


def test_serve_model_tree_check(non_ascii_only, mixed):
    with pytest.raises(ModelTreeError) as error:
        find_models(non_ascii_only)
    assert str(error.value) == refusal(non_ascii_only)
    with pytest.raises(ModelTreeError, match="found SavedModels outside a version folder in .*; " + HINT):
        find_models(mixed)
    shutil.rmtree(mixed / FULL_WIDTH_12)
    assert [(m.name, m.versions) for m in find_models(mixed).models] == [("mixed", (1, 12))]


def test_model_server_version_scan(mixed):
    assert list_versions(mixed) == {1: mixed / "1", 12: mixed / "0012"}


def test_package_model_check_and_build(non_ascii_only, tmp_path):
    with pytest.raises(PackagingError) as error:
        check(non_ascii_only)
    assert str(error.value) == refusal(non_ascii_only)
    with pytest.raises(PackagingError, match=HINT):
        build(non_ascii_only, tmp_path / "model.tar.gz")
    assert not (tmp_path / "model.tar.gz").exists()


def test_serve_refuses_it_at_once(non_ascii_only, tmp_path):
    env = {
        "SAGEMAKER_MODEL_DIR": str(non_ascii_only),
        "SAGEMAKER_BIND_TO_PORT": str(ports.free_port()),
        "SAGEMAKER_RUNTIME_DIR": str(tmp_path / "runtime"),
    }
    result = subprocess.run(
        ["env", *(f"{k}={v}" for k, v in env.items()), str(paths.VENV_BIN / "serve")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert refusal(non_ascii_only) in result.stdout + result.stderr


def test_the_transform_runner_fails_the_job_with_serves_message(non_ascii_only, tmp_path):
    data = tmp_path / "in"
    data.mkdir()
    (data / "a.csv").write_text("1\n")
    description = transform(
        str(non_ascii_only),
        data=str(data),
        output_path=str(tmp_path / "out"),
        work_dir=str(tmp_path / "work"),
        startup_timeout=120,
    )
    assert description["TransformJobStatus"] == "Failed"
    assert description["FailureReason"].startswith("AlgorithmError: Model container 0 exited with status 1 ")
    assert HINT in description["FailureReason"]
