"""The version and the commit of this installation: what `serve` logs first and `sagemaker-tfs --version` prints,
so that a running image can be told apart from one built from other code (the original container's users could
not: TFS#206).

The version has one source, the package's metadata (pyproject.toml's `version`). The commit is the one the wheel
was built from (commit.txt, written by setup.py's build step), or, for an install from a checkout (editable), the
checkout's HEAD, read when asked. `commit()` is the one implementation of that rule: setup.py, noxfile.py and the
build scripts run this file (`python container/sagemaker_tfs/shared/build_info.py` prints it)."""

from __future__ import annotations

import functools
import subprocess
from importlib import metadata
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent
DISTRIBUTION = "sagemaker-tfs"


def version() -> str:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:  # imported from a tree that was never installed
        return "0+unknown"


@functools.cache
def commit() -> str:
    """The full commit id, `+dirty` when a checkout's tracked files differ from it, or `unknown`."""
    built = PACKAGE / "commit.txt"
    if built.is_file():
        return built.read_text().strip() or "unknown"
    git = ["git", "-C", str(PACKAGE)]
    try:
        top = subprocess.run([*git, "rev-parse", "--show-toplevel"], capture_output=True, text=True, timeout=10)
        if top.returncode != 0 or Path(top.stdout.strip()) != PACKAGE.parent.parent:
            return "unknown"  # not a checkout of this project (a copy inside another repository, an installed tree)
        head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        changed = subprocess.run(
            [*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    if head.returncode != 0:
        return "unknown"
    return head.stdout.strip() + ("+dirty" if changed.stdout.strip() else "")


def describe() -> str:
    """`0.1.0 (commit 1ce66f0...)`: the version and the commit, as printed and logged."""
    return f"{version()} (commit {commit()})"


if __name__ == "__main__":  # run as a file by the build: no package import
    print(commit())
