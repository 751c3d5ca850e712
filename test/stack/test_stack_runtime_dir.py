"""The runtime folder is trusted only when it is private: `serve` refuses one that another user owns or can
write, and never writes through a link planted in it."""

from __future__ import annotations

import os
from pathlib import Path

import processes
import pytest
import serve_stack
from stack_support import invoke, model_dir, pretty_predictions
from test_stack_lifecycle import cannot_start, serve_fails

VICTIM_TEXT = "not serve's to write\n"

# Every file serve (or nginx, which it starts) creates in the runtime folder, besides the lock.
PLANTED = (
    "nginx.conf",
    "model_config.pbtxt",
    "batching_parameters.pbtxt",
    "tfs-0.pid",
    "gunicorn-supervised.pid",
    "nginx-supervised.pid",
    "nginx.pid",
    "gunicorn.pid",
    "app-startup-error.txt",
)


@pytest.fixture
def victim(tmp_path) -> Path:
    path = tmp_path / "victim.txt"
    path.write_text(VICTIM_TEXT)
    return path


def test_links_planted_in_the_runtime_folder_are_replaced_never_written_through(tmp_path, victim):
    outside = tmp_path / "outside"
    outside.mkdir()
    stack = serve_stack.Stack(model_dir(tmp_path), env={"SAGEMAKER_TFS_ENABLE_BATCHING": "true"})
    for name in PLANTED:
        (stack.runtime_dir / name).symlink_to(victim)
    (stack.runtime_dir / "nginx").symlink_to(outside, target_is_directory=True)  # nginx's temp folders
    with stack:
        assert invoke(stack, "1.0").text == pretty_predictions("3.5")
        assert victim.read_text() == VICTIM_TEXT
        assert list(outside.iterdir()) == []
        for name in (
            "nginx.conf",
            "model_config.pbtxt",
            "batching_parameters.pbtxt",
            "tfs-0.pid",
            "gunicorn-supervised.pid",
            "nginx-supervised.pid",
            "nginx.pid",
            "gunicorn.pid",
        ):
            assert (stack.runtime_dir / name).is_file() and not (stack.runtime_dir / name).is_symlink(), name
        assert (stack.runtime_dir / "nginx").is_dir() and not (stack.runtime_dir / "nginx").is_symlink()
    assert victim.read_text() == VICTIM_TEXT


def test_a_linked_lock_file_is_refused_and_not_written_through(tmp_path, victim):
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    (runtime / "serve.lock").symlink_to(victim)
    output = serve_fails(model_dir(tmp_path), SAGEMAKER_RUNTIME_DIR=str(runtime))
    assert cannot_start(output) == (
        f"{runtime}/serve.lock is a symbolic link: serve writes only files it creates; remove it"
    )
    assert victim.read_text() == VICTIM_TEXT


def test_a_linked_constraints_file_is_not_written_through(tmp_path, victim):
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    (runtime / "constraints.txt").symlink_to(victim)
    folder = model_dir(
        tmp_path,
        "def handler(data, context):\n    return data.read()\n",
        {"requirements.txt": "--no-index\nno-such-package-anywhere==1.0\n"},
    )
    output = serve_fails(folder, SAGEMAKER_RUNTIME_DIR=str(runtime))
    assert cannot_start(output) == f"pip could not install {folder}/code/requirements.txt (exit 1):"
    assert victim.read_text() == VICTIM_TEXT
    assert not (runtime / "constraints.txt").is_symlink()


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o1777])
def test_a_runtime_folder_others_can_write_is_refused(tmp_path, mode):
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    runtime.chmod(mode)
    output = serve_fails(model_dir(tmp_path), SAGEMAKER_RUNTIME_DIR=str(runtime))
    assert cannot_start(output) == (
        f"runtime folder {runtime} can be written by other users (mode {mode & 0o777:o}): make it private "
        f"(chmod go-w) or choose another SAGEMAKER_RUNTIME_DIR"
    )
    assert list(runtime.iterdir()) == []


def test_a_runtime_folder_of_another_user_is_refused(tmp_path):
    if os.geteuid() == 0:
        runtime = tmp_path / "runtime"
        runtime.mkdir(mode=0o755)
        os.chown(runtime, 65534, 65534)
        owner = 65534
    else:
        runtime, owner = Path("/"), 0
    output = serve_fails(model_dir(tmp_path), SAGEMAKER_RUNTIME_DIR=str(runtime))
    assert cannot_start(output) == (
        f"runtime folder {runtime} belongs to uid {owner}, not to uid {os.geteuid()} who runs serve: "
        f"choose another SAGEMAKER_RUNTIME_DIR"
    )


def test_a_linked_runtime_folder_is_refused(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    runtime = tmp_path / "runtime"
    runtime.symlink_to(real, target_is_directory=True)
    output = serve_fails(model_dir(tmp_path), SAGEMAKER_RUNTIME_DIR=str(runtime))
    assert cannot_start(output) == (
        f"runtime folder {runtime} is a symbolic link: give SAGEMAKER_RUNTIME_DIR the folder itself"
    )
    assert list(real.iterdir()) == []


def test_a_runtime_folder_that_cannot_be_written_gets_one_message_naming_the_setting(tmp_path):
    # a file where a parent folder should be: like a read-only /tmp (test/image's --read-only container), serve
    # cannot make the folder; it says which setting moves it, without a traceback
    (tmp_path / "file").write_text("")
    runtime = tmp_path / "file" / "runtime"
    output = serve_fails(model_dir(tmp_path), SAGEMAKER_RUNTIME_DIR=str(runtime))
    assert cannot_start(output) == (
        f"cannot write the runtime folder {runtime} (Not a directory): set SAGEMAKER_RUNTIME_DIR to a writable "
        "folder of serve's user (with a read-only root file system: on a tmpfs, e.g. docker run --read-only "
        "--tmpfs /tmp)"
    )
    assert "Traceback" not in output


def uid_of(pid: int) -> int:
    return next(
        int(line.split()[1]) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("Uid:")
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="serve as root: CI and the container run it so")
def test_nginx_workers_of_a_root_serve_are_not_root(tmp_path):
    # the runtime folder (serve_stack.Stack's, in /tmp) is entered by nginx's workers through its group only
    with serve_stack.Stack(model_dir(tmp_path)) as stack:
        master = stack.pid_of("nginx-supervised")
        workers = processes.descendants(master)
        assert workers and {uid_of(pid) for pid in workers} == {65534}  # nobody
        assert uid_of(master) == 0  # it listens on the port and reads the config
        assert invoke(stack, "[1.0, 2.0]").status == 200  # the workers reach gunicorn's socket
        big = "[" + ", ".join(["1.0"] * 300_000) + "]"  # buffered in the temp folder: the workers write there
        assert invoke(stack, big).status == 200
        info = stack.runtime_dir.stat()
        assert (info.st_mode & 0o777, info.st_uid, info.st_gid) == (0o710, 0, 65534)
