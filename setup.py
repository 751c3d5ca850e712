"""The build's one addition to pyproject.toml: the commit the wheel is built from, in sagemaker_tfs/commit.txt
(shared/build_info.py reads it; `serve` logs it first, `sagemaker-tfs --version` prints it).

The commit is SAGEMAKER_TFS_BUILD_COMMIT when set (scripts/wheelhouse.sh builds from a copy without .git), else the
git checkout's HEAD (marked +dirty when tracked files differ from it), else the commit.txt an sdist carries. The
sdist gets it the same way, so that a wheel built from the sdist names the same commit."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent
COMMIT_FILE = Path("sagemaker_tfs") / "commit.txt"


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(HERE), *args], capture_output=True, text=True, timeout=30)
    except OSError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def commit() -> str:
    given = os.environ.get("SAGEMAKER_TFS_BUILD_COMMIT", "").strip()
    if given:
        return given
    if _git("rev-parse", "--show-toplevel") == str(HERE):  # this checkout's own repository, not one around it
        head = _git("rev-parse", "HEAD")
        if head:
            return head + ("+dirty" if _git("status", "--porcelain", "--untracked-files=no") else "")
    carried = HERE / "container" / COMMIT_FILE
    return carried.read_text().strip() if carried.is_file() else "unknown"


class BuildPyWithCommit(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:  # an editable install runs the checkout's files: build_info reads its HEAD instead
            return
        target = Path(self.build_lib) / COMMIT_FILE
        target.write_text(commit() + "\n")


class SdistWithCommit(sdist):
    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        target = Path(base_dir) / "container" / COMMIT_FILE
        target.unlink(missing_ok=True)  # a hard link to the source's, if it has one
        target.write_text(commit() + "\n")


setup(cmdclass={"build_py": BuildPyWithCommit, "sdist": SdistWithCommit})
