"""The distribution as users get it: `python -m build` makes the sdist and the wheel, `twine check --strict` passes,
the sdist rebuilds the same wheel, and the wheel installed alone, outside the tree, runs `serve`, `sagemaker-tfs
transform` and `package-model`, and gives `sagemaker_tfs.testing`'s types to a user's mypy.

The wheel goes into a fresh virtual environment of its own (`pip install --no-deps`); the packages it depends on
come from the suite's environment through a path entry (a `.pth` line), which adds them but not the suite's
editable install of this project: every `sagemaker_tfs` module the commands import is the wheel's (checked)."""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import model_dirs
import paths
import pytest
import serve_stack
from clients import invoke

PYTHON = Path(sys.executable)
SOURCES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE", "NOTICE", "CHANGELOG.md", "container")


# The commit a build names when built from a copy without .git (as scripts/wheelhouse.sh builds): any id will do
BUILD_COMMIT, COMMIT = "SAGEMAKER_TFS_BUILD_COMMIT", "0123456789abcdef0123456789abcdef01234567"


def run(
    *args: str | Path, cwd: Path, check: bool = True, timeout: float = 600, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
    if check and done.returncode != 0:
        raise AssertionError(f"{args} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    """The sdist and the wheel `python -m build` makes from a copy of the tree (the wheel from the sdist, as build
    does), and a wheel built straight from the tree: {"sdist", "wheel", "tree wheel"}."""
    root = tmp_path_factory.mktemp("build")
    source = root / "source"
    source.mkdir()
    for name in SOURCES:
        copy = shutil.copytree if (paths.REPO / name).is_dir() else shutil.copy2
        copy(
            paths.REPO / name,
            source / name,
            **({"ignore": shutil.ignore_patterns("__pycache__", "*.egg-info")} if copy is shutil.copytree else {}),
        )
    for args in (("--outdir", root / "dist"), ("--wheel", "--outdir", root / "tree")):
        run(PYTHON, "-m", "build", "--no-isolation", *args, source, cwd=root, env={BUILD_COMMIT: COMMIT})
    [sdist] = (root / "dist").glob("*.tar.gz")
    [wheel] = (root / "dist").glob("*.whl")
    [tree_wheel] = (root / "tree").glob("*.whl")
    return {"sdist": sdist, "wheel": wheel, "tree wheel": tree_wheel}


def test_twine_check_strict_passes(built, tmp_path):
    done = run(PYTHON, "-m", "twine", "check", "--strict", built["sdist"], built["wheel"], cwd=tmp_path)
    assert done.stdout.count("PASSED") == 2, done.stdout


def test_the_sdist_rebuilds_the_same_wheel(built):
    def names(wheel: Path) -> list[str]:
        return sorted(zipfile.ZipFile(wheel).namelist())

    assert built["wheel"].name == built["tree wheel"].name
    assert names(built["wheel"]) == names(built["tree wheel"])


def test_the_wheel_carries_every_file_of_the_package(built):
    """Every file git tracks under container/sagemaker_tfs (templates, py.typed, data), and the licence files."""
    tracked = run("git", "ls-files", "container/sagemaker_tfs", cwd=paths.REPO).stdout.split()
    wanted = {name.removeprefix("container/") for name in tracked}
    names = set(zipfile.ZipFile(built["wheel"]).namelist())
    assert wanted - names == set()
    assert "sagemaker_tfs/py.typed" in names
    licences = {name.rsplit("/", 1)[-1] for name in names if "/licenses/" in name}
    assert licences == {"LICENSE", "NOTICE"}
    sdist_names = {name.split("/", 1)[1] for name in tarfile.open(built["sdist"]).getnames() if "/" in name}
    assert {"LICENSE", "NOTICE", "CHANGELOG.md", "README.md", "pyproject.toml"} <= sdist_names


@pytest.fixture(scope="module")
def installed(built, tmp_path_factory) -> Path:
    """A fresh virtual environment outside the tree holding the wheel; its bin folder."""
    root = tmp_path_factory.mktemp("installed")
    venv = root / "venv"
    run(PYTHON, "-m", "venv", venv, cwd=root)
    python = venv / "bin" / "python"
    purelib = run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))", cwd=root).stdout.strip()
    (Path(purelib) / "suite-dependencies.pth").write_text("".join(f"{path}\n" for path in site.getsitepackages()))
    run(python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", built["wheel"], cwd=root)
    where = run(python, "-c", "import sagemaker_tfs; print(sagemaker_tfs.__file__)", cwd=root).stdout.strip()
    assert where == f"{purelib}/sagemaker_tfs/__init__.py"  # the wheel's, not the tree's
    return venv / "bin"


@pytest.fixture(scope="module")
def archive(installed, tmp_path_factory) -> Path:
    """half_plus_three as a model.tar.gz, built and checked by the wheel's `sagemaker-tfs package-model`."""
    root = tmp_path_factory.mktemp("archive")
    shutil.copytree(paths.HALF_PLUS_THREE, root / "export")
    built = run(installed / "sagemaker-tfs", "package-model", "build", "export", "-o", "model.tar.gz", cwd=root)
    assert (root / "model.tar.gz").is_file(), built.stderr
    checked = run(installed / "sagemaker-tfs", "package-model", "check", "model.tar.gz", cwd=root)
    assert "half_plus_three" in checked.stdout + checked.stderr or "model" in checked.stdout
    return root / "model.tar.gz"


def test_the_version_names_the_commit_the_wheel_was_built_from(built, installed, tmp_path):
    assert zipfile.ZipFile(built["wheel"]).read("sagemaker_tfs/commit.txt") == f"{COMMIT}\n".encode()
    done = run(installed / "sagemaker-tfs", "--version", cwd=tmp_path)
    assert done.stdout == f"sagemaker-tfs 0.1.0 (commit {COMMIT})\n"


def test_serve_from_the_wheel(installed, tmp_path):
    model = model_dirs.copy_model(paths.HALF_PLUS_THREE, tmp_path, "model")
    with serve_stack.Stack(model, serve=installed / "serve", cwd=tmp_path) as stack:
        # serve's first line: the version and the commit, before anything else it says
        assert stack.log().splitlines()[0].endswith(f"sagemaker-tfs 0.1.0 (commit {COMMIT}) starting")
        answer = invoke(stack, '{"instances": [1.0, 2.0, 5.0]}')
        assert (answer.status, answer.json()) == (200, {"predictions": [3.5, 4.0, 5.5]})
        # the embedded model server runs on the wheel's environment too (gunicorn's workers import the same package)
        assert f"starting model server 0: {installed}/python -m sagemaker_tfs.model_server " in stack.log()


def test_transform_from_the_wheel(installed, archive, tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.json").write_text('{"instances": [1.0, 2.0]}')
    done = run(
        installed / "sagemaker-tfs",
        "transform",
        "--model",
        archive,
        "--data",
        "in",
        "--content-type",
        "application/json",
        "--output-path",
        "out",
        cwd=tmp_path,
    )
    assert json.loads((tmp_path / "out" / "a.json.out").read_text()) == {"predictions": [3.5, 4.0]}, done.stderr


ENDPOINT = """
from sagemaker_tfs.testing import Endpoint

with Endpoint("model") as endpoint:
    result = endpoint.invoke('{"instances": [1.0, 2.0]}')
    print(result.status, result.json())
"""


def test_the_testing_endpoint_from_the_wheel(installed, tmp_path):
    model_dirs.copy_model(paths.HALF_PLUS_THREE, tmp_path, "model")
    (tmp_path / "use_endpoint.py").write_text(ENDPOINT)
    done = run(installed / "python", "use_endpoint.py", cwd=tmp_path)
    assert done.stdout == "200 {'predictions': [3.5, 4.0]}\n"


TYPED = """
from sagemaker_tfs.testing import Endpoint


def status_text(endpoint: Endpoint) -> str:
    return endpoint.invoke("{}").status
"""


def test_a_users_mypy_reads_the_endpoints_types(installed, tmp_path):
    """py.typed: mypy reads Endpoint.invoke's Result, so it finds the mistake (without it: no types at all)."""
    (tmp_path / "typed_use.py").write_text(TYPED)
    done = run(
        paths.VENV_BIN / "mypy",
        "--python-executable",
        installed / "python",
        "--no-incremental",
        "--strict",
        "typed_use.py",
        cwd=tmp_path,
        check=False,
    )
    assert done.stdout.splitlines()[0] == (
        'typed_use.py:6: error: Incompatible return value type (got "int", expected "str")  [return-value]'
    ), done.stdout
