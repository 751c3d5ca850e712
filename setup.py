"""The build's one addition to pyproject.toml: the commit the wheel is built from, in sagemaker_tfs/commit.txt
(shared/build_info.py reads it; `serve` logs it first, `sagemaker-tfs --version` prints it).

The commit is SAGEMAKER_TFS_BUILD_COMMIT when set (the build scripts build from a copy without .git), else the
commit.txt an sdist carries, else the git checkout's HEAD (marked +dirty when tracked files differ from it). The
sdist gets it the same way, so that a wheel built from the sdist names the same commit."""

from __future__ import annotations

import os
import runpy
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent
COMMIT_FILE = Path("sagemaker_tfs") / "commit.txt"


def commit() -> str:
    """SAGEMAKER_TFS_BUILD_COMMIT, else what the package's own rule says (shared/build_info.py, run as a file: the
    commit.txt an sdist carries, or this checkout's HEAD)."""
    given = os.environ.get("SAGEMAKER_TFS_BUILD_COMMIT", "").strip()
    if given:
        return given
    return runpy.run_path(str(HERE / "container" / "sagemaker_tfs" / "shared" / "build_info.py"))["commit"]()


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
