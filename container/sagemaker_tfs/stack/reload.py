"""SAGEMAKER_RELOAD (a development setting): a thread polls the code folder and calls back when a file changes.

Polling file sizes, mtimes and inodes rather than inotify: no dependency, and it also sees a folder mounted from
the host into a container (where inotify events often do not arrive). The folder is small, so a poll is cheap."""

from __future__ import annotations

import logging
import stat
import threading
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("serve")

POLL_SECONDS = 0.3

Snapshot = dict[Path, tuple[int, int, int]]


def snapshot(folder: Path) -> Snapshot:
    """Each file under `folder` (bytecode caches aside: the workers write them) with its mtime, size and inode."""
    found: Snapshot = {}
    if not folder.is_dir():
        return found
    for path in folder.rglob("*"):
        if "__pycache__" in path.relative_to(folder).parts:
            continue
        try:
            info = path.stat()
        except OSError:  # removed meanwhile
            continue
        if stat.S_ISREG(info.st_mode):
            found[path] = (info.st_mtime_ns, info.st_size, info.st_ino)
    return found


class CodeWatcher:
    """Calls on_change(changed files, sorted) from a daemon thread once the folder has changed and then stayed the
    same for one poll (an editor may save in several writes, a copy may take several files)."""

    def __init__(self, folder: Path, on_change: Callable[[list[Path]], None], stopping: threading.Event):
        self.folder, self.on_change, self.stopping = folder, on_change, stopping
        self._known = snapshot(folder)  # taken now (before the workers import the code): a later change is seen

    def start(self) -> None:
        threading.Thread(target=self._run, name="code-watcher", daemon=True).start()
        log.info("reload: watching %s for changes (SAGEMAKER_RELOAD: a development setting)", self.folder)

    def _run(self) -> None:
        while not self.stopping.wait(POLL_SECONDS):
            now = snapshot(self.folder)
            if now == self._known:
                continue
            while not self.stopping.wait(POLL_SECONDS):
                later = snapshot(self.folder)
                if later == now:
                    break
                now = later
            else:
                return
            changed = sorted(p for p in now.keys() | self._known.keys() if now.get(p) != self._known.get(p))
            self._known = now
            try:
                self.on_change(changed)
            except Exception:  # the watcher must outlive one failed reload
                log.exception("reload: restarting the app's workers failed")
