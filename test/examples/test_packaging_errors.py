"""Wrong archives, made the way users make them (tar of a wrong folder), are refused by `sagemaker-tfs package-model
check` and by `serve` with a message that says what to fix; `sagemaker-tfs package-model build` refuses a wrong
export folder."""

import shutil
import tarfile

import pytest
from examples_support import run
from paths import VENV_BIN
from ports import free_port

HANDLER = "def handler(data, context):\n    return data.read(), context.accept_header\n"


def no_version_folder(export, folder):
    """The SavedModel's files at the root: `tar -czf model.tar.gz -C export/1 .`"""
    shutil.copytree(export / "1", folder, dirs_exist_ok=True)


def non_numeric_version(export, folder):
    shutil.copytree(export / "1", folder / "v1")


def script_in_the_version_folder(export, folder):
    """code/ inside the version folder (TFS#162)."""
    shutil.copytree(export / "1", folder / "1")
    (folder / "1" / "code").mkdir()
    (folder / "1" / "code" / "inference.py").write_text(HANDLER)


def script_at_the_root(export, folder):
    shutil.copytree(export / "1", folder / "1")
    (folder / "inference.py").write_text(HANDLER)


# (layout, what the message must say: the problem found, then what to fix)
CASES = {
    no_version_folder: [
        "no SavedModel found in a version folder",
        "/saved_model.pb",
        "expected <model_dir>/<version>/saved_model.pb",
        "where <version> is a number such as 1",
    ],
    non_numeric_version: [
        "no SavedModel found in a version folder",
        "/v1/saved_model.pb",
        "where <version> is a number such as 1",
    ],
    script_in_the_version_folder: [
        "/1/code/inference.py, but the handler script must be",
        "/code/inference.py (a code/ folder next to the version folders); move it there",
    ],
    script_at_the_root: ["/inference.py, but the handler script must be", "move it there"],
}


@pytest.fixture(params=list(CASES), ids=lambda layout: layout.__name__)
def wrong_archive(request, packaged, tmp_path):
    """(archive, unpacked model folder, the message's parts) for one wrong layout."""
    folder = tmp_path / "wrong"
    folder.mkdir()
    request.param(packaged("half_plus_three").export_dir, folder)
    archive = tmp_path / "model.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for child in sorted(folder.iterdir()):
            tar.add(child, arcname=child.name)
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    with tarfile.open(archive) as tar:
        tar.extractall(model_dir, filter="data")
    return archive, model_dir, CASES[request.param]


def assert_says(output: str, parts: list[str]) -> None:
    for part in parts:
        assert part in output, f"{part!r} not in:\n{output}"


def test_package_model_check_refuses_it(wrong_archive):
    archive, _, parts = wrong_archive
    result = run(VENV_BIN / "sagemaker-tfs", "package-model", "check", archive, expect=1)
    assert result.stderr.startswith("sagemaker-tfs package-model: error: ")
    assert_says(result.stderr, parts)


def test_serve_refuses_it(wrong_archive, tmp_path):
    _, model_dir, parts = wrong_archive
    env = {
        "SAGEMAKER_MODEL_DIR": str(model_dir),
        "SAGEMAKER_BIND_TO_PORT": str(free_port()),
        "SAGEMAKER_RUNTIME_DIR": str(tmp_path / "runtime"),
    }
    result = run("env", *(f"{k}={v}" for k, v in env.items()), VENV_BIN / "serve", expect=1)
    assert_says(result.stdout + result.stderr, [str(model_dir)] + parts)


def test_package_model_build_refuses_a_version_folder_given_as_the_export_folder(packaged, tmp_path):
    version_dir = packaged("half_plus_three").export_dir / "1"
    result = run(
        VENV_BIN / "sagemaker-tfs", "package-model", "build", version_dir, "-o", tmp_path / "model.tar.gz", expect=1
    )
    assert_says(result.stderr, ["no SavedModel found in a version folder", "where <version> is a number such as 1"])
    assert not (tmp_path / "model.tar.gz").exists()
