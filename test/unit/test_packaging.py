"""package-model: archives in the layout the container serves; wrong layouts refused with what to fix."""

import shutil
import subprocess
import tarfile
from pathlib import Path

import paths
import pytest
from sagemaker_tfs.packaging import PackagingError, build, check

PAIR_SCRIPT = (
    "def input_handler(data, context):\n    return data.read()\n\n"
    "def output_handler(response, context):\n    return response.content, 'application/json'\n"
)


def export(tmp_path: Path, version: str = "1") -> Path:
    folder = tmp_path / "export"
    shutil.copytree(paths.HALF_PLUS_THREE / "00000123", folder / version)
    return folder


def code(tmp_path: Path, script: str | None = PAIR_SCRIPT, requirements: str | None = None) -> Path:
    folder = tmp_path / "code"
    folder.mkdir()
    if script is not None:
        (folder / "inference.py").write_text(script)
    if requirements is not None:
        (folder / "requirements.txt").write_text(requirements)
    return folder


def members(archive: Path) -> list[str]:
    with tarfile.open(archive) as tar:
        return sorted(m.name for m in tar.getmembers())


def test_build_puts_versions_and_code_at_the_root(tmp_path):
    out = tmp_path / "model.tar.gz"
    summary = build(export(tmp_path, "1538687370"), out, code(tmp_path, requirements="six==1.17.0\n"))
    names = members(out)
    assert "1538687370/saved_model.pb" in names
    assert "1538687370/variables/variables.index" in names
    assert "code/inference.py" in names and "code/requirements.txt" in names
    assert not any(n.startswith(("export", "model")) for n in names)
    assert summary == [
        "model model: version(s) 1538687370",
        "code/inference.py: input_handler/output_handler",
        "code/requirements.txt: 1 requirement(s) installed at start-up",
    ]
    assert check(out) == summary


def test_cli_build_and_check(tmp_path):
    out = tmp_path / "m.tar.gz"
    cmd = [paths.VENV_BIN / "sagemaker-tfs", "package-model"]
    done = subprocess.run(
        cmd + ["build", str(export(tmp_path)), "--code", str(code(tmp_path)), "-o", str(out)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert (
        done.stdout == f"wrote {out}\n  model model: version(s) 1\n  code/inference.py: input_handler/output_handler\n"
    )
    done = subprocess.run(cmd + ["check", str(out)], capture_output=True, text=True)
    assert (done.returncode, done.stdout.splitlines()[0]) == (0, f"{out}: OK")


def test_no_version_folder_is_refused(tmp_path):
    folder = tmp_path / "export"
    shutil.copytree(paths.HALF_PLUS_THREE / "00000123", folder)  # saved_model.pb directly in the export folder
    out = tmp_path / "model.tar.gz"
    with pytest.raises(
        PackagingError,
        match=r"no SavedModel found in a version folder; found outside a version "
        r"folder in .*/model: .*/model/saved_model.pb; expected <model_dir>/<version>/",
    ):
        build(folder, out)
    assert not out.exists()


def test_non_numeric_version_is_refused(tmp_path):
    with pytest.raises(PackagingError, match=r"outside a version folder in .*model/v1/saved_model.pb"):
        build(export(tmp_path, "v1"), tmp_path / "model.tar.gz")


def test_script_outside_code_is_refused_in_an_archive(tmp_path):
    folder = export(tmp_path)
    (folder / "1" / "code").mkdir()
    (folder / "1" / "code" / "inference.py").write_text(PAIR_SCRIPT)
    archive = tmp_path / "bad.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder / "1", arcname="1")
    cli = subprocess.run(
        [paths.VENV_BIN / "sagemaker-tfs", "package-model", "check", str(archive)], capture_output=True, text=True
    )
    assert cli.returncode == 1
    assert cli.stderr.startswith("sagemaker-tfs package-model: error: found ")
    assert "/model/1/code/inference.py, but the handler script must be " in cli.stderr
    assert "/model/code/inference.py (a code/ folder next to the version folders); move it there" in cli.stderr


@pytest.mark.parametrize(
    "script, message",
    [
        (
            "def input_handler(data, context):\n    pass\n",
            r"defines input_handler: define handler\(data, context\), or both",
        ),
        ("x = 1\n", "defines none of the handler functions: define handler"),
        ("def handler(data, context)\n", r"does not compile: expected ':' \(line 1\)"),
    ],
)
def test_bad_scripts_are_refused(tmp_path, script, message):
    with pytest.raises(PackagingError, match=message):
        build(export(tmp_path), tmp_path / "model.tar.gz", code(tmp_path, script=script))


def test_handler_may_be_imported_from_a_module(tmp_path):
    script = "from helpers import handler\n"
    assert (
        build(export(tmp_path), tmp_path / "m.tar.gz", code(tmp_path, script=script))[1] == "code/inference.py: handler"
    )


def test_bad_requirement_names_the_line(tmp_path):
    with pytest.raises(PackagingError, match=r"requirements.txt line 2 is not a requirement: 'numpy=>1'"):
        build(export(tmp_path), tmp_path / "m.tar.gz", code(tmp_path, requirements="# pins\nnumpy=>1\n"))


def test_lib_wins_over_requirements(tmp_path):
    folder = code(tmp_path, requirements="six\n")
    (folder / "lib").mkdir()
    summary = build(export(tmp_path), tmp_path / "m.tar.gz", folder)
    assert summary[-1] == "code/lib: on the path; code/requirements.txt (1 lines) will NOT be installed"
    assert check(tmp_path / "m.tar.gz") == summary


def test_unsafe_archive_members_are_refused(tmp_path):
    archive = tmp_path / "evil.tar.gz"
    evil = tmp_path / "x.txt"
    evil.write_text("x")
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(evil, arcname="../x.txt")
    with pytest.raises(PackagingError, match=r"archive member '../x.txt' points outside the model directory"):
        check(archive)
