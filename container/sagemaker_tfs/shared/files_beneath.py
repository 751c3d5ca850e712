"""Reading a file beneath a folder, following no link, at the moment it is read.

A path checked once (os.path.realpath inside the folder) and opened later can be led out of the folder: a component
replaced by a symbolic link in between is followed by a plain open. Here the file is opened one component at a time
from the folder, each with O_NOFOLLOW, so a link anywhere below the folder is refused, never followed, whenever it
appeared; and a FIFO or device is refused without being opened for a blocking read.
"""

from __future__ import annotations

import errno
import os
import stat

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK  # NONBLOCK: a FIFO's open must not wait


class LinkRefused(OSError):
    """A symbolic link on the path below the folder."""


def read_beneath(root: str, relative: str) -> bytes:
    """The bytes of the regular file `relative` (no `..`) below the folder `root`; OSError says why not (LinkRefused
    for a link on the way)."""
    parts = [part for part in relative.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise ValueError(f"{relative!r} is not a path below the folder")
    folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            inner = _open(part, _DIRECTORY, folder, relative)
            os.close(folder)
            folder = inner
        fd = _open(parts[-1], _FILE, folder, relative) if parts else os.dup(folder)
    finally:
        os.close(folder)
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        return file.read()


def _open(name: str, flags: int, folder: int, relative: str) -> int:
    try:
        return os.open(name, flags, dir_fd=folder)
    except OSError as exc:
        # O_NOFOLLOW on a link: ELOOP; O_DIRECTORY on a link to a folder: ENOTDIR
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(name, folder):
            raise LinkRefused(
                errno.ELOOP, f"{name!r} on the way to {relative!r} is a symbolic link, which is not followed"
            ) from None
        raise


def _is_link(name: str, folder: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
    except OSError:
        return False
