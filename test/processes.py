"""Processes a test starts or watches: a command in the background with its log, waiting for a condition
or a log line, the processes of a tree or session and their memory."""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat from the state on (field 3), or None when the process is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return text.rsplit(")", 1)[1].split()


def live_processes() -> dict[int, list[str]]:
    """{pid: stat fields from the state on} of every process that is not a zombie."""
    processes = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields is not None and fields[0] != "Z":
                processes[int(entry.name)] = fields
    return processes


def descendants(pid: int) -> set[int]:
    """The live processes started by `pid`, directly or not."""
    parents = {child: int(fields[1]) for child, fields in live_processes().items()}
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def session_members(session_ids: set[int]) -> set[int]:
    """The live processes in any of these sessions (a session id is the pid of the process that started it)."""
    return {pid for pid, fields in live_processes().items() if int(fields[3]) in session_ids}


def resident_kb(pid: int) -> int:
    """VmRSS of a process in kB (/proc/<pid>/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise ValueError(f"no VmRSS for {pid}")


def settled_rss(pids: set[int], limit_kb: dict[int, float], timeout: float = 30.0) -> dict[int, int]:
    """Each process's VmRSS in kB once all are within their limit, or as they are after `timeout` (memory freed
    goes back to the system over a moment)."""
    deadline = time.monotonic() + timeout
    while True:
        rss = {pid: resident_kb(pid) for pid in pids}
        if all(rss[pid] <= limit_kb[pid] for pid in pids) or time.monotonic() > deadline:
            return rss
        time.sleep(0.5)


def wait_for(condition, timeout: float = 30.0, what: str = "the condition") -> None:
    """Poll `condition()` until true; fail after `timeout` seconds (a guard against hangs, not a timing check)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not {what} after {timeout}s")
        time.sleep(0.1)


LOG_SHOWN = 20_000  # characters of a log a failure message shows (its end)


def wait_for_log(source, *lines: str, count: int = 1, since: int = 0, timeout: float = 60.0) -> str:
    """The log of a running process once every one of `lines` is in it (each at least `count` times, after its
    first `since` characters); its whole text, for further checks. `source` is anything with a log() method
    (processes.Background, serve_stack.Stack, the app harnesses) or a function returning the text.

    A process writes its log after the fact it logs (an answer sent, a signal received, a child's line forwarded by
    serve's thread): a test reads it with this, never with log() right after the action. To check that a line is
    absent, wait here for a line written after the point in question (the request's own line), then check. Fails
    after `timeout` seconds, or at once when the process has exited without writing them, showing the log."""
    read = source.log if hasattr(source, "log") else source
    deadline = time.monotonic() + timeout
    while True:
        ended = hasattr(source, "alive") and source.proc is not None and not source.alive()
        text = read()
        missing = [line for line in lines if text.count(line, since) < count]
        if not missing:
            return text
        if ended or time.monotonic() > deadline:
            shown = (
                text if len(text) <= LOG_SHOWN else f"[... {len(text) - LOG_SHOWN} characters ...]" + text[-LOG_SHOWN:]
            )
            why = "the process exited" if ended else f"{timeout}s passed"
            times = "" if count == 1 else f" {count} times"
            raise AssertionError(
                f"{why} and the log does not hold{times} {missing!r}"
                f"{f' after character {since}' if since else ''}; the log:\n{shown}"
            )
        time.sleep(0.05)


_MADE: list[Path] = []  # temporary files and folders of this process's background processes


@atexit.register
def _remove_made() -> None:
    for path in _MADE:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def remove_at_exit(path: Path) -> Path:
    """`path`, removed when this process exits, not before: tests read logs and runtime folders after a stop."""
    _MADE.append(path)
    return path


class Background:
    """A command running in the background, its stdout and stderr going to a log file.

    Use as a context manager; on exit the process gets SIGTERM, then SIGKILL after `stop_timeout`.
    """

    def __init__(
        self,
        args: list[str],
        env: dict[str, str] | None = None,
        cwd: str | Path | None = None,
        stop_timeout: float = 20.0,
    ):
        self.args = [str(a) for a in args]
        self.env = {**os.environ, **(env or {})}
        self.cwd = cwd
        self.stop_timeout = stop_timeout
        descriptor, name = tempfile.mkstemp(prefix="bg-", suffix=".log")
        os.close(descriptor)
        self.log_path = remove_at_exit(Path(name))
        self.proc: subprocess.Popen | None = None

    def start(self) -> Background:
        log = open(self.log_path, "ab")  # O_APPEND: children that reopen /dev/stdout (nginx) must not overwrite
        self.proc = subprocess.Popen(
            self.args, env=self.env, cwd=self.cwd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_until(self, ready, timeout: float = 120.0, what: str = "ready") -> None:
        """Poll `ready()` until true; fail with the process log if it exits or the time runs out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                return
            if not self.alive():
                raise AssertionError(f"{self.args[0]} exited ({self.proc.returncode}) before {what}:\n{self.log()}")
            time.sleep(0.1)
        raise AssertionError(f"{self.args[0]} not {what} after {timeout}s:\n{self.log()}")

    def signal(self, signum: int) -> None:
        if self.alive():
            self.proc.send_signal(signum)

    def stop(self) -> int | None:
        """SIGTERM, wait, then SIGKILL the whole process group; returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # children left behind, if any
        except (ProcessLookupError, PermissionError):
            pass
        return self.proc.wait()

    def __enter__(self) -> Background:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
