"""The runtime folder's rules on the real file system: created private, refused unless private, files created
afresh without following links."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import paths
import pytest
from sagemaker_tfs.shared import runtime_dir
from sagemaker_tfs.shared.runtime_dir import RuntimeDirError


def test_the_default_is_the_user_s_private_runtime_folder_else_a_folder_of_the_user_s_own():
    uid = os.geteuid()
    assert runtime_dir.default_path(9090, {"XDG_RUNTIME_DIR": "/run/user/7"}) == "/run/user/7/sagemaker-tfs-9090"
    assert runtime_dir.default_path(9090, {}) == f"/tmp/sagemaker-tfs-{uid}-9090"
    assert runtime_dir.default_path(9090, {"XDG_RUNTIME_DIR": "relative"}) == f"/tmp/sagemaker-tfs-{uid}-9090"
    assert runtime_dir.default_path(9090, {"TMPDIR": "/scratch"}) == f"/scratch/sagemaker-tfs-{uid}-9090"


def test_a_missing_folder_is_created_private_and_locked(tmp_path):
    path = tmp_path / "a" / "runtime"
    lock = runtime_dir.claim(path)
    try:
        assert stat.S_IMODE(path.stat().st_mode) == 0o700
        assert (path / "serve.lock").read_text() == f"{os.getpid()}\n"
        with pytest.raises(RuntimeDirError, match=f"^runtime folder {path} is in use by another running stack"):
            runtime_dir.claim(path)
    finally:
        lock.close()


def test_serve_pid_names_only_a_serve_that_holds_the_folder(tmp_path):
    """A serve that has exited (stopped with Ctrl-C, or killed) leaves its lock file, with its pid, unlocked: no
    serve holds the folder then, and no ModelError may name that pid."""
    exited = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(exited.stdout)
    path = tmp_path / "runtime"
    path.mkdir(mode=0o700)
    (path / "serve.lock").write_text(f"{dead}\n")
    assert runtime_dir.serve_pid(path) is None
    lock = runtime_dir.claim(path)  # a serve holding it: this process
    try:
        assert runtime_dir.serve_pid(path) == os.getpid()
    finally:
        lock.close()
    assert runtime_dir.serve_pid(path) is None
    assert runtime_dir.serve_pid(tmp_path / "none") is None


def test_the_suite_reads_no_runtime_folder_of_the_machine():
    """Every test's default runtime folder is in the session's own temporary folder (test/conftest.py), not the
    machine's: a serve run there earlier (scripts/serve-example.sh) leaves its files in the machine's."""
    default = Path(runtime_dir.default_path(8080))
    assert default.parent == Path(os.environ["XDG_RUNTIME_DIR"])
    assert default.parent.name.startswith(paths.TEST_RUNTIME_PREFIX)
    assert default.parent.parent == Path(tempfile.gettempdir())


def test_an_existing_folder_others_can_read_but_not_write_is_accepted(tmp_path):
    tmp_path.chmod(0o755)
    runtime_dir.claim(tmp_path).close()


def test_a_file_in_place_of_the_folder_is_refused(tmp_path):
    (tmp_path / "runtime").write_text("")
    with pytest.raises(RuntimeDirError, match="is not a folder: choose another SAGEMAKER_RUNTIME_DIR$"):
        runtime_dir.claim(tmp_path / "runtime")


def test_write_file_replaces_a_link_and_leaves_its_target_alone(tmp_path):
    target = tmp_path / "target"
    target.write_text("keep")
    link = tmp_path / "nginx.conf"
    link.symlink_to(target)
    runtime_dir.write_file(link, "new")
    assert (link.is_symlink(), link.read_text(), target.read_text()) == (False, "new", "keep")


def test_folder_replaces_a_link_and_keeps_a_real_folder(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "nginx").symlink_to(outside)
    made = runtime_dir.folder(tmp_path / "nginx")
    assert made.is_dir() and not made.is_symlink() and stat.S_IMODE(made.stat().st_mode) == 0o700
    (made / "kept").write_text("")
    assert runtime_dir.folder(made) == made and (made / "kept").exists()
    assert list(outside.iterdir()) == []


def test_ready_workers_counts_the_marks_since_the_folder_was_made_afresh(tmp_path):
    assert runtime_dir.ready_workers(tmp_path) == 0
    runtime_dir.fresh_folder(tmp_path / runtime_dir.APP_READY_FOLDER)
    runtime_dir.mark_worker_ready(tmp_path, 101)
    runtime_dir.mark_worker_ready(tmp_path, 102)
    assert runtime_dir.ready_workers(tmp_path) == 2
    runtime_dir.fresh_folder(tmp_path / runtime_dir.APP_READY_FOLDER)
    assert runtime_dir.ready_workers(tmp_path) == 0
