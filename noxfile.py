"""The test matrix (CONTRIBUTING, "The test matrix"): the quick suite against the installed wheel, on every CPython
the package claims (`tests-3.10` to `tests-3.13`) but the one the main suite has just run on (`.venv`'s: the whole
suite, from the tree; another session of it would add minutes to CI and test nothing more), and on the lowest
versions pyproject.toml allows (`lowest`).

Each session builds the wheel from a copy of the sources, installs it with its extras into a fresh virtual
environment (uv: its installs take seconds where pip takes minutes), checks that `sagemaker_tfs` is imported from
there and not from the tree, and runs the tests that start no whole stack (`-m "not slow"`) and all the embedded model
server's tests, its slow ones too (`model_server`: TensorFlow 2.21 has wheels for all four Pythons); `lowest` runs the
first part only. The style checks (test/unit/test_checks.py) run once, in the main suite: they read the tree, not the
package.

    .venv/bin/nox                      # every session (what .ci/run runs after the main suite)
    .venv/bin/nox -s tests-3.13        # one
"""

from __future__ import annotations

import os
import runpy
import shutil
import subprocess
from pathlib import Path

import nox
import tomllib

nox.options.default_venv_backend = "uv"
nox.options.error_on_missing_interpreters = True  # a Python the README names must be tested, not skipped

ROOT = Path(__file__).resolve().parent
PYTHONS = ("3.10", "3.11", "3.12", "3.13")
# uv's downloads and wheels stay in the repository's .nox folder, like the sessions' environments
os.environ.setdefault("UV_CACHE_DIR", str(ROOT / ".nox" / "uv-cache"))
# the tests' temporary folder: the system's (nox points TMPDIR into .nox, too deep for the tests' unix sockets)
TESTS_TMPDIR = os.environ.get("TMPDIR") or "/tmp"


def _pyenv_interpreters() -> None:
    """pyenv's CPythons first on PATH (its shims answer `python3.10` only for the versions made global): each
    session finds its Python by name, on this kind of machine and on one with the Pythons on PATH alike."""
    try:
        root = subprocess.run(["pyenv", "root"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return
    found = [max(Path(root, "versions").glob(f"{version}.*"), default=None) for version in PYTHONS]
    folders = [str(path / "bin") for path in found if path is not None]
    os.environ["PATH"] = os.pathsep.join([*folders, os.environ.get("PATH", "")])


_pyenv_interpreters()


def _main_suite_python() -> str | None:
    """The CPython of `.venv`, which scripts/test.sh runs the whole suite on; None without one."""
    try:
        found = subprocess.run(
            [str(ROOT / ".venv" / "bin" / "python"), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return found.stdout.strip()


MATRIX = tuple(version for version in PYTHONS if version != _main_suite_python())
EXTRAS = "model-server,s3,test,examples"
SOURCES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE", "NOTICE", "CHANGELOG.md", "container")
QUICK = "not slow"  # the tests that start no whole stack
WITH_MODEL_SERVER = "not slow or model_server"  # and the embedded model server's slow ones


def _wheel(session: nox.Session) -> Path:
    """The wheel of the working tree, built in the session's temporary folder from a copy of the sources (so that
    setuptools leaves nothing in the tree)."""
    work = Path(session.create_tmp()).resolve()
    source, dist = work / "source", work / "dist"
    shutil.rmtree(source, ignore_errors=True)
    shutil.rmtree(dist, ignore_errors=True)
    source.mkdir()
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(path, source / name)
    # the commit the wheel names (setup.py): the copy has no .git, so it is given, as scripts/wheelhouse.sh gives it
    commit = runpy.run_path(str(ROOT / "container" / "sagemaker_tfs" / "shared" / "build_info.py"))["commit"]()
    session.run(
        "uv",
        "build",
        "--quiet",
        "--wheel",
        "--out-dir",
        str(dist),
        str(source),
        external=True,
        env={"SAGEMAKER_TFS_BUILD_COMMIT": commit},
    )
    (wheel,) = dist.glob("sagemaker_tfs-*.whl")
    return wheel


def _run_suite(session: nox.Session, marks: str) -> None:
    where = session.run(
        "python", "-c", "import sagemaker_tfs; print(sagemaker_tfs.__file__)", silent=True, external=False
    )
    assert where is not None and where.strip().startswith(session.virtualenv.location), where
    session.run(
        "python",
        "-m",
        "pytest",
        "-n",
        "2",
        "--max-worker-restart=0",
        "-m",
        marks,
        "--deselect",
        "test/unit/test_checks.py",
        "-p",
        "no:cacheprovider",
        *session.posargs,
        env={"TMPDIR": TESTS_TMPDIR},
    )


@nox.session(python=MATRIX)
def tests(session: nox.Session) -> None:
    """The quick suite and the embedded model server's tests against the wheel installed with its extras, on this
    Python."""
    session.install(f"sagemaker-tfs[{EXTRAS}] @ {_wheel(session).as_uri()}")
    _run_suite(session, WITH_MODEL_SERVER)


def _requirements() -> list[str]:
    """pyproject.toml's dependencies and those of the extras installed: each a direct requirement of the install, so
    that uv's lowest-direct resolution takes its floor (the wheel's own would be transitive, and resolved highest)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    return [*project["dependencies"], *(line for extra in EXTRAS.split(",") for line in extras[extra])]


@nox.session(python=PYTHONS[0])
def lowest(session: nox.Session) -> None:
    """The quick suite on the lowest version of each dependency that pyproject.toml allows (uv's lowest-direct
    resolution), on the lowest Python: a floor that does not hold fails here."""
    requirements = Path(session.create_tmp()).resolve() / "lowest-requirements.txt"
    requirements.write_text("".join(f"{line}\n" for line in _requirements()))
    wheel = _wheel(session)
    session.install("--resolution", "lowest-direct", "-r", str(requirements), f"sagemaker-tfs @ {wheel.as_uri()}")
    _run_suite(session, QUICK)
