"""serve's reaper: a small process that outlives a SIGKILLed `serve` and kills what serve started.

Each child runs in its own session (so that a terminal's Ctrl-C reaches serve only), so a dead serve takes none of
them along: the model servers, the gunicorn master and the nginx master would keep running, ports held. serve
starts the reaper first, in a session of its own, with a pipe as its stdin, and writes each child's pid (its
session and process group id) to it as it starts one. When serve ends in any way its end of the pipe closes; the
reaper reads end of file and SIGKILLs each child's process group (gunicorn's and nginx's workers with their
masters), unless serve said `done` first (it stopped its children itself).

Why not PR_SET_PDEATHSIG on each child: the signal follows the *thread* that started the child, and serve starts
children from short-lived threads too (a model server brought back after a restart), and setting it needs a
preexec_fn, which is not safe while serve's threads run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from ..shared import process_title
from .processes import processes

_current: Reaper | None = None


class Reaper:
    """serve's side: the reaper process and the pipe to it."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE, start_new_session=True)
        stdin = self.proc.stdin
        assert stdin is not None  # (stdin=PIPE)
        self._stdin = stdin
        self._fd = stdin.fileno()

    def watch(self, pid: int) -> None:
        """Kill pid's session if serve dies (a line is one write: atomic, whichever thread writes it)."""
        try:
            os.write(self._fd, b"%d\n" % pid)
        except OSError:  # the reaper is gone (killed): nothing to tell
            pass

    def close(self) -> None:
        """serve stopped its children: the reaper ends without killing anything."""
        try:
            os.write(self._fd, b"done\n")
            self._stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def start() -> Reaper:
    global _current
    _current = Reaper()
    return _current


def watch(pid: int) -> None:
    """What Child.start calls for each child; nothing when no reaper runs (a Stack driven by a test)."""
    if _current is not None:
        _current.watch(pid)


def main() -> None:
    process_title.set_title("serve: reaper")
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # only serve's end matters
        signal.signal(signum, signal.SIG_IGN)
    sessions: set[int] = set()
    for line in sys.stdin.buffer:
        if line.strip() == b"done":
            return
        sessions.add(int(line))
    for pid in _members(sessions):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _members(sessions: set[int]) -> list[int]:
    """The processes in those sessions (whole sessions: a child's own children too, even after the child died;
    an unrelated process could only be in one if it reused a session leader's pid and started a session)."""
    return [process.pid for process in processes() if process.session in sessions]


if __name__ == "__main__":
    main()
