"""The checks by machines (CONTRIBUTING, "Checks"): ruff's formatter, ruff's linter and mypy pass on the tree, run
by pre-commit from .pre-commit-config.yaml, as a developer's commit runs them. On a copy of the tree in its own git
repository: pre-commit stashes what is not staged, which must never touch the working tree under test."""

from __future__ import annotations

import os
import shutil
import subprocess

import paths

# what the hooks are: a finding of each fails this test (test_a_finding_of_each_check_fails_the_run)
HOOKS = ("ruff format", "ruff check", "mypy")


def _tree_copy(destination: os.PathLike) -> None:
    """The files git tracks or would track (not ignored), as they are in the working tree, in a new repository with
    every file staged; .venv linked, since the hooks run its commands."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=paths.REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, listed):
        source = paths.REPO / os.fsdecode(name)
        if source.is_file():  # (a tracked file deleted in the working tree is not there)
            target = destination / os.fsdecode(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    (destination / ".venv").symlink_to(paths.VENV_BIN.parent)
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@localhost"]
    subprocess.run([*git, "init", "-q"], cwd=destination, check=True)
    subprocess.run([*git, "add", "-A"], cwd=destination, check=True)


def _pre_commit(tree: os.PathLike, home: os.PathLike) -> subprocess.CompletedProcess:
    env = {**os.environ, "PRE_COMMIT_HOME": str(home), "NO_COLOR": "1"}
    return subprocess.run(
        [str(paths.VENV_BIN / "pre-commit"), "run", "--all-files", "--show-diff-on-failure"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_ruff_format_ruff_check_and_mypy_pass_on_the_tree(tmp_path):
    tree = tmp_path / "tree"
    _tree_copy(tree)
    run = _pre_commit(tree, tmp_path / "pre-commit")
    assert run.returncode == 0, run.stdout + run.stderr
    passed = [line for line in run.stdout.splitlines() if line.endswith("Passed")]
    assert [next(hook for hook in HOOKS if line.startswith(hook)) for line in passed] == list(HOOKS), run.stdout


def test_a_finding_of_each_check_fails_the_run(tmp_path):
    """The hooks really look: a file that is badly laid out, imports what it does not use and returns a str where it
    says int fails each of the three."""
    tree = tmp_path / "tree"
    _tree_copy(tree)
    bad = tree / "container" / "sagemaker_tfs" / "shared" / "checked_example.py"
    bad.write_text("import os\ndef answer( ) -> int :\n    return 'forty-two'\n")
    subprocess.run(["git", "add", "-A"], cwd=tree, check=True)
    run = _pre_commit(tree, tmp_path / "pre-commit")
    assert run.returncode == 1, run.stdout + run.stderr
    failed = [line for line in run.stdout.splitlines() if line.endswith("Failed")]
    assert [next(hook for hook in HOOKS if line.startswith(hook)) for line in failed] == list(HOOKS), run.stdout
    assert "checked_example.py:1:8: F401" in run.stdout
    assert 'checked_example.py:3: error: Incompatible return value type (got "str", expected "int")' in run.stdout
