"""The runtime folder: the stack's config files, sockets, pid files and lock (SAGEMAKER_RUNTIME_DIR).

It is trusted only when private: `serve` refuses a folder that is a symbolic link, belongs to another user or
can be written by others, and it creates every file it writes there afresh (removing what was at the path and
creating exclusively, without following links), so that nothing is ever written through a planted link.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from ..errors import StartupError

# The folder's entries, each named here only (who makes it: who reads it)
LOCK_FILE = "serve.lock"
APP_READY_FOLDER = "app-ready"  # a file per gunicorn worker that has created the app, named by its pid
MODEL_CONFIG = "model_config.pbtxt"  # serve: the model servers' --model_config_file
GUNICORN_SOCKET = "gunicorn.sock"  # gunicorn: nginx
REGISTRY_SOCKET = "registry.sock"  # the multi-model registry in serve: each worker's subscriber
MODELS_SOCKET = "models.sock"  # the registry's /models API in serve: nginx
RUNTIME_API_SOCKET = "runtime.sock"  # the local runtime API in serve: nginx
DIRECT_LOG_SOCKET = "direct-log.sock"  # serve's direct-route metrics: nginx's access log of the direct route
WORKER_SOCKET = "worker-{pid}.sock"  # each gunicorn worker's own: nginx, for the requests of the sessions it opened
SESSIONS_FOLDER = "sessions"  # the local runtime API's open sessions, a file each (runtime_api/sessions.py)


class RuntimeDirError(StartupError):
    """The runtime folder cannot be trusted or used; the message says what to do."""


def default_path(port: int, env: Mapping[str, str] | None = None) -> str:
    """The user's private runtime folder ($XDG_RUNTIME_DIR) when there is one, else a folder of the user's own
    in the temporary folder (created 0700), one per port so that stacks run side by side."""
    env = os.environ if env is None else env
    xdg = env.get("XDG_RUNTIME_DIR", "")
    if os.path.isabs(xdg):
        return f"{xdg}/sagemaker-tfs-{port}"
    return f"{env.get('TMPDIR') or '/tmp'}/sagemaker-tfs-{os.geteuid()}-{port}"


def claim(path: Path) -> IO[str]:
    """Create the folder (0700) if missing, check that it is private, and lock it for our lifetime (two stacks
    must not share one). Returns the open lock file: keep it open."""
    lock_path = path / LOCK_FILE
    try:
        _make_private(path)
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise RuntimeDirError(
                f"{lock_path} is a symbolic link: serve writes only files it creates; remove it"
            ) from None
        # e.g. a container run with a read-only root file system and no tmpfs on /tmp
        raise RuntimeDirError(
            f"cannot write the runtime folder {path} ({exc.strerror}): set "
            "SAGEMAKER_RUNTIME_DIR to a writable folder of serve's user (with a read-only root "
            "file system: on a tmpfs, e.g. docker run --read-only --tmpfs /tmp)"
        ) from None
    lock = os.fdopen(fd, "r+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise RuntimeDirError(
            f"runtime folder {path} is in use by another running stack; give each stack its "
            "own SAGEMAKER_BIND_TO_PORT (or SAGEMAKER_RUNTIME_DIR)"
        ) from None
    lock.truncate(0)
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    return lock


def serve_pid(path: Path) -> int | None:
    """The pid of the serve that holds the folder (its lock file says); None when no serve holds it (a serve that
    has exited leaves its lock file, unlocked) or it cannot be read."""
    try:
        with open(path / LOCK_FILE) as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)  # taken: no serve holds the folder
            except BlockingIOError:
                return int(lock.read().split()[0])
            return None  # (closing the file releases the lock)
    except (OSError, ValueError, IndexError):
        return None


def _make_private(path: Path) -> None:
    try:
        path.mkdir(mode=0o700, parents=True)
    except FileExistsError:
        pass
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise RuntimeDirError(f"runtime folder {path} is a symbolic link: give SAGEMAKER_RUNTIME_DIR the folder itself")
    if not stat.S_ISDIR(info.st_mode):
        raise RuntimeDirError(f"runtime folder {path} is not a folder: choose another SAGEMAKER_RUNTIME_DIR")
    if info.st_uid != os.geteuid():
        raise RuntimeDirError(
            f"runtime folder {path} belongs to uid {info.st_uid}, not to uid {os.geteuid()} who "
            "runs serve: choose another SAGEMAKER_RUNTIME_DIR"
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise RuntimeDirError(
            f"runtime folder {path} can be written by other users (mode "
            f"{info.st_mode & 0o777:o}): make it private (chmod go-w) or choose another "
            "SAGEMAKER_RUNTIME_DIR"
        )


def remove(path: Path) -> None:
    """Remove what is at path (a file, a link, a folder), if anything: before a child creates it itself."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode):
        shutil.rmtree(path)
    else:
        path.unlink()


def write_file(path: Path, text: str) -> None:
    """Put a new file holding text at path, atomically (readers see the old file or the new one): it is created
    exclusively under a temporary name, never through a link, and then takes the place of whatever was at path."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.new")
    remove(temp)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w") as file:
        file.write(text)
    os.replace(temp, path)  # replaces a link itself, not its target


def fresh_folder(path: Path) -> Path:
    """An empty private folder at path, in place of whatever was there."""
    remove(path)
    path.mkdir(mode=0o700)
    return path


def folder(path: Path) -> Path:
    """A folder at path, kept if it is a real folder (not a link), else made afresh."""
    if not path.is_dir() or path.is_symlink():
        return fresh_folder(path)
    return path


def mark_worker_ready(runtime: Path, pid: int) -> None:
    """Said by a gunicorn worker once it has created the app (see gunicorn_settings.py)."""
    write_file(runtime / APP_READY_FOLDER / str(pid), "")


def ready_workers(runtime: Path) -> int:
    """How many gunicorn workers said they are ready since the folder was made afresh."""
    try:
        return len(os.listdir(runtime / APP_READY_FOLDER))
    except FileNotFoundError:
        return 0


def worker_socket(runtime: Path, pid: int | str) -> Path:
    """A gunicorn worker's own socket (`pid`: a number, or the nginx variable that holds it)."""
    return runtime / WORKER_SOCKET.format(pid=pid)


def remove_worker_sockets(runtime: Path) -> None:
    """The sockets of an earlier run's workers, gone."""
    for path in runtime.glob(WORKER_SOCKET.format(pid="*")):
        remove(path)
