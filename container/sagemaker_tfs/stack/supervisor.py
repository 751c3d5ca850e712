"""The supervision of one stack: start the model servers, gunicorn and nginx in order, restart a child that
dies (from the moment it is started), drain on stop.

Each child runs in its own session, hence its own process group: a terminal's Ctrl-C reaches `serve` only (which
drains), and a dead child's whole group (a gunicorn master's workers) is killed before the child starts again,
so that nothing of the old one keeps the socket. A dead nginx master's workers are the exception: they go on
serving (nginx listens with `reuseport`, so the new nginx binds beside them) until the new nginx listens, then
finish their requests and quit (SIGQUIT), so that a crashed master costs no request.
"""

from __future__ import annotations

import collections
import functools
import logging
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING

from ..config import Settings
from ..errors import StartupError
from ..model_client.model_servers import ModelServerError, model_status
from ..shared import logs, model_tree, runtime_dir
from ..shared.model_tree import ModelTree
from . import commands, direct_metrics, metrics_page, nginx, readiness, reaper, reload, requirements
from .metrics_page import ServeState
from .processes import processes

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

log = logging.getLogger("serve")

RESTART_CHECK_SECONDS = 0.5  # how often supervision looks for a dead child once ready
STARTUP_CHECK_SECONDS = 0.2  # how often start-up checks a child's readiness


class StopRequested(Exception):
    """A signal asked `serve` to stop during start-up."""


class Child:
    """A supervised process in its own session, its output forwarded to ours, keeping its last lines for error
    messages. With `own_stdout`, only its stderr is forwarded: its stdout is ours, written by the child itself (nginx's
    access log: a line per request, which forwarding through this process would cost a wake-up, a read and a write
    of it per request)."""

    def __init__(
        self,
        name: str,
        args: list[str],
        env: dict[str, str],
        pid_file: Path | None,
        on_exit: Callable[[], None] | None = None,
        own_stdout: bool = False,
    ):
        self.name, self.args, self.env, self.pid_file = name, args, env, pid_file
        self.own_stdout = own_stdout
        self.on_exit = on_exit  # called (from a thread) when the process ends, so that supervision sees it at once
        self.proc: subprocess.Popen[bytes] | None = None
        self.tail: collections.deque[str] = collections.deque(maxlen=40)
        self.restarts = 0
        self._output: threading.Thread | None = None

    def start(self) -> None:
        # what is forwarded: stdout and stderr together, or stderr alone
        stdout, stderr = (None, subprocess.PIPE) if self.own_stdout else (subprocess.PIPE, subprocess.STDOUT)
        self.proc = proc = subprocess.Popen(
            self.args, env=self.env, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL, start_new_session=True
        )
        reaper.watch(proc.pid)
        if self.pid_file is not None:
            runtime_dir.write_file(self.pid_file, f"{proc.pid}\n")
        forwarded = proc.stderr if self.own_stdout else proc.stdout
        assert forwarded is not None  # (a PIPE)
        self._output = threading.Thread(
            target=self._forward, args=(forwarded,), daemon=True, name=f"{self.name}-output"
        )
        self._output.start()
        if self.on_exit is not None:
            threading.Thread(
                target=self._wait_exit, args=(proc, self.on_exit), daemon=True, name=f"{self.name}-exit"
            ).start()

    @staticmethod
    def _wait_exit(proc: subprocess.Popen[bytes], on_exit: Callable[[], None]) -> None:
        proc.wait()
        on_exit()

    @property
    def pid(self) -> int:
        """The pid of the process last started."""
        assert self.proc is not None  # (called once start() was)
        return self.proc.pid

    def _forward(self, stream: IO[bytes]) -> None:
        out = sys.stderr.buffer
        noise = logs.tensorflow_noise_filter()
        for line in iter(stream.readline, b""):
            if noise is not None and noise(line):
                continue
            self.tail.append(line.decode(errors="replace").rstrip())
            try:
                out.write(line)
                out.flush()
            except (OSError, ValueError):
                pass
        stream.close()

    def exited(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def last_lines(self, count: int = 15) -> str:
        """The child's last output lines, indented (all of them once its group has closed its output)."""
        if self._output is not None and self.exited() is not None:
            self._output.join(2)
        lines = [line for line in self.tail if line.strip()][-count:]
        return "\n".join(f"    {line}" for line in lines) or "    (no output)"

    def kill_group(self) -> None:
        """SIGKILL whatever is left in the child's process group (its session's), the child being dead."""
        if self.proc is not None:
            signal_group(self.proc.pid, signal.SIGKILL)

    def stop(self, signum: int, timeout: float) -> None:
        """Ask the child to stop with signum, kill it after timeout, then kill anything left of its group."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signum)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("%s (pid %d) did not stop within %.0f s; killing it", self.name, self.proc.pid, timeout)
        self.kill_group()
        self.proc.wait()


def model_ready(server_name: str, rest_port: int, model: model_tree.Model) -> bool:
    """Whether every version of `model` on disk is AVAILABLE on the model server at `rest_port` (as
    ModelStatus.all_available); StartupError when a version failed to load."""
    try:
        status = model_status(rest_port, model.name)
    except ModelServerError:
        return False
    if status.http_status not in (200, 404):
        return False
    for version in model.versions:
        found = status.version(version)
        if found is not None and found.error:
            raise StartupError(
                f"{server_name} could not load model {model.name} version {version} "
                f"from {model.base_path}: {found.error}"
            )
    return status.serves(model.versions)


def signal_group(pgid: int, signum: int) -> bool:
    """Send signum to a process group; False when nothing is left in it."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    return True


def group_alive(pgid: int) -> bool:
    """Whether a process of the group is still running (zombies, which nobody may reap here, do not count)."""
    return any(process.group == pgid and process.state != "Z" for process in processes())


class Stack:
    """The model servers, gunicorn and nginx of one container, and their supervision."""

    def __init__(self, settings: Settings, tree: ModelTree | None, stopping: threading.Event):
        self.settings = settings
        self.tree = tree
        self.runtime = Path(settings.runtime_dir)
        self.model_servers: list[Child] = []
        self.gunicorn: Child | None = None
        self.nginx: Child | None = None
        self.stopping = stopping
        self.child_exited = threading.Event()  # set when a child ends, so that supervision sees it at once
        self.retiring: list[threading.Thread] = []  # dead nginx masters' workers finishing their requests
        self.env = settings.to_env(os.environ)  # the children's settings: what serve resolved, read back as is
        self.state = ServeState.STARTING  # then READY, then STOPPING (the metrics page reports it)
        self._metrics_server: WSGIServer | None = None
        self._direct_log: direct_metrics.DirectRouteLog | None = None

    # ---- what a multi-model stack (stack/multi_model.py) does differently ----

    @property
    def _models(self) -> ModelTree:
        """The tree of a single-model stack."""
        assert self.tree is not None  # (a MultiModelStack has none: it overrides every method that reads it)
        return self.tree

    @property
    def code_dir(self) -> Path:
        """The folder whose requirements.txt is installed at start-up."""
        return self._models.model_dir / "code"

    @property
    def serves_models(self) -> bool:
        """Whether model servers run (not for an inference toolkit script without SavedModels)."""
        return bool(self._models.models)

    def _write_model_config(self, config_file: Path) -> None:
        runtime_dir.write_file(config_file, model_tree.model_config_text(self._models))

    def _ready_message(self) -> str:
        """What the log's `ready: ` line says."""
        tree = self._models
        return (
            ", ".join(f"{m.name} v{','.join(map(str, m.versions))}" for m in tree.models)
            + (" on" if tree.models else "the script's model on")
            + f" port {self.settings.bind_port} (default model {tree.default_model or 'none'}"
            + (f", handler script {tree.script})" if tree.script else ")")
        )

    def _restarted(self, child: Child, status: int) -> None:
        """Called after a dead child (exit status `status`) was started again."""

    # ---- start-up ----

    def start(self) -> None:
        """Start every child in order, each once the previous ones are ready, supervising those started.
        Raises StartupError (with what to fix) or StopRequested (a signal came)."""
        s = self.settings
        deadline = time.monotonic() + s.tfs_wait_time_seconds
        direct_model = nginx.direct_model(s, self.tree.script) if self.tree is not None else None
        if s.metrics:  # gunicorn's processes write their values to the folder, for serve's page to add up
            collector = metrics_page.StackCollector(
                metrics_page.prepare_folder(self.runtime),
                lambda: [(child.name, child.restarts) for child in self.children()],
                lambda: self.state,
            )
            if direct_model is not None:  # nginx's datagrams, one per request of the direct route
                self._direct_log = direct_metrics.DirectRouteLog(self.runtime / direct_metrics.SOCKET)
            try:
                self._metrics_server = metrics_page.start(s.metrics_port, collector, *filter(None, [self._direct_log]))
            except OSError as exc:
                raise StartupError(
                    f"cannot listen on SAGEMAKER_METRICS_PORT={s.metrics_port}: {exc.strerror or exc}"
                ) from None
        config_file = self.runtime / runtime_dir.MODEL_CONFIG
        self._write_model_config(config_file)
        batching_file = None
        if s.tfs_enable_batching:
            batching_file = self.runtime / "batching_parameters.pbtxt"
            runtime_dir.write_file(batching_file, commands.batching_parameters_text(s))
            log.info("batching on: %s", " ".join(batching_file.read_text().split()))
        monitoring_file = None
        if s.metrics:
            monitoring_file = self.runtime / "monitoring_config.pbtxt"
            runtime_dir.write_file(monitoring_file, metrics_page.MODEL_SERVER_MONITORING)
        # No SavedModel (an inference toolkit script loads the model itself): no model server. Their GPUs are those
        # serve found (s.cuda_devices).
        servers = (
            commands.model_server_commands(s, config_file, batching_file, monitoring_file) if self.serves_models else []
        )
        for i, (args, extra_env) in enumerate(servers):
            child = Child(
                f"model server {i}",
                args,
                {**self.env, **extra_env},
                self.runtime / f"tfs-{i}.pid",
                self.child_exited.set,
            )
            log.info("starting %s: %s", child.name, " ".join(args))
            child.start()
            self.model_servers.append(child)

        self._install_requirements()
        self._wait_for_models(deadline)

        s.app_startup_error_file.unlink(missing_ok=True)
        runtime_dir.fresh_folder(self.runtime / runtime_dir.APP_READY_FOLDER)
        runtime_dir.fresh_folder(self.runtime / runtime_dir.SESSIONS_FOLDER)
        runtime_dir.remove_worker_sockets(self.runtime)
        runtime_dir.remove(self.runtime / "gunicorn.pid")
        # PYTHONUNBUFFERED: a script's print() reaches the log at once, as in the original's image (its Dockerfile
        # sets it), not when a worker's 8 kB buffer fills or the worker exits
        self.gunicorn = Child(
            "gunicorn",
            commands.gunicorn_command(s),
            requirements.worker_env(self.runtime, {**self.env, "PYTHONUNBUFFERED": "1"}),
            self.runtime / "gunicorn-supervised.pid",
            self.child_exited.set,
        )
        log.info(
            "starting gunicorn: %d worker(s) x %d thread(s), %s workers",
            s.gunicorn_workers,
            s.gunicorn_threads,
            s.gunicorn_worker_class,
        )
        self.gunicorn.start()
        self._wait(
            lambda: runtime_dir.ready_workers(self.runtime) >= s.gunicorn_workers,
            self.gunicorn,
            deadline,
            "every gunicorn worker to load the app",
        )

        version = nginx.version()
        config = nginx.write_config(s, direct_model, version)
        runtime_dir.remove(self.runtime / "nginx.pid")  # nginx writes it itself, through whatever is there
        self.nginx = front = Child(
            "nginx",
            nginx.command(config, version),
            self.env,
            self.runtime / "nginx-supervised.pid",
            self.child_exited.set,
            own_stdout=True,
        )
        front.start()
        self._wait(
            lambda: readiness.listens(front.pid, s.bind_port),
            front,
            deadline,
            f"nginx to listen on port {s.bind_port}",
        )
        self.state = ServeState.READY
        log.info("ready: %s", self._ready_message())

    def _wait(self, ready: Callable[[], bool], child: Child, deadline: float, what: str) -> None:
        """Poll ready() while supervising the children already started; the child waited for may not exit."""
        while not ready():
            if self.stopping.is_set():
                raise StopRequested()
            code = child.exited()
            if code is not None and child is self.gunicorn and self.settings.app_startup_error_file.is_file():
                raise StartupError(self.settings.app_startup_error_file.read_text().strip())
            if code is not None:
                raise StartupError(
                    f"{child.name} exited with status {code} while waiting for {what}:\n" + child.last_lines()
                )
            if time.monotonic() > deadline:
                raise StartupError(
                    f"timed out after {self.settings.tfs_wait_time_seconds} s "
                    f"(SAGEMAKER_TFS_WAIT_TIME_SECONDS) waiting for {what}:\n" + child.last_lines()
                )
            self._restart_dead(besides=child)
            self.stopping.wait(STARTUP_CHECK_SECONDS)

    def _install_requirements(self) -> None:
        """pip, while the model servers load (not counted in SAGEMAKER_TFS_WAIT_TIME_SECONDS, as pip may take long)."""
        args = requirements.pip_command(self.code_dir, self.runtime)
        if args is None:
            return
        pip = Child("pip", args, self.env, None)
        pip.start()
        try:
            self._wait(lambda: pip.exited() is not None, pip, math.inf, "pip")
        finally:
            pip.stop(signal.SIGTERM, 15)
        if pip.exited() != 0:
            raise StartupError(
                f"pip could not install {self.code_dir}/requirements.txt (exit {pip.exited()}):\n" + pip.last_lines()
            )
        log.info("installed %s/requirements.txt", self.code_dir)

    def _wait_for_models(self, deadline: float) -> None:
        if not self.model_servers:
            return
        for child, (_, rest_port) in zip(self.model_servers, self.settings.ports(), strict=True):
            for model in self._models.models:
                self._wait(
                    functools.partial(model_ready, child.name, rest_port, model),
                    child,
                    deadline,
                    f"model {model.name} to be AVAILABLE",
                )
        log.info("every model is AVAILABLE on %d model server(s)", len(self.model_servers))

    # ---- SAGEMAKER_RELOAD (development) ----

    def code_watcher(self) -> reload.CodeWatcher:
        """What restarts gunicorn's workers whenever code/ changes (after pip when requirements.txt did), from the
        state of code/ now, once started."""
        return reload.CodeWatcher(self.code_dir, self._reload_app, self.stopping)

    def _reload_app(self, changed: list[Path]) -> None:
        if self.code_dir / "requirements.txt" in changed and not self._reinstall_requirements():
            return  # the old workers keep serving: their packages are the ones they imported
        more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
        log.info("reload: %s changed%s; restarting the app's workers", changed[0], more)
        gunicorn = self.gunicorn
        # SIGHUP: the master (same pid, so supervision sees nothing) starts new workers, which import the code
        # afresh, and stops the old ones gracefully, letting their requests finish. The model servers stay.
        if gunicorn is not None and gunicorn.exited() is None:
            os.kill(gunicorn.pid, signal.SIGHUP)

    def _reinstall_requirements(self) -> bool:
        """pip again, waited for here (not with _wait: that would supervise the children from this thread too)."""
        args = requirements.pip_command(self.code_dir, self.runtime)
        if args is None:
            return True
        pip = Child("pip", args, self.env, None)
        pip.start()
        while pip.exited() is None and not self.stopping.wait(STARTUP_CHECK_SECONDS):
            pass
        pip.stop(signal.SIGTERM, 15)
        if pip.exited() != 0:
            log.error(
                "reload: pip could not install %s/requirements.txt (exit %s); the workers keep the old code:\n%s",
                self.code_dir,
                pip.exited(),
                pip.last_lines(),
            )
            return False
        log.info("installed %s/requirements.txt", self.code_dir)
        return True

    # ---- supervision ----

    def supervise(self) -> None:
        """Restart children that die, until a signal asks to stop."""
        while not self.stopping.is_set():
            self.child_exited.wait(RESTART_CHECK_SECONDS)
            self.child_exited.clear()
            self._restart_dead()

    def _restart_dead(self, besides: Child | None = None) -> None:
        for child in self.children():
            code = child.exited()
            if child is besides or code is None or self.stopping.is_set():
                continue
            child.restarts += 1
            old_group = child.pid
            if child is not self.nginx:
                child.kill_group()  # a gunicorn master's workers would keep the socket
            log.error(
                "%s (pid %d) exited with status %d; restarting it (restart #%d). Last output:\n%s",
                child.name,
                old_group,
                code,
                child.restarts,
                child.last_lines(),
            )
            child.start()
            self._restarted(child, code)
            if child is self.nginx:
                retire = threading.Thread(
                    target=self._retire_nginx_workers,
                    args=(old_group, child.pid),
                    name="nginx-retire",
                    daemon=True,
                )
                self.retiring.append(retire)
                retire.start()

    def _retire_nginx_workers(self, old_group: int, new_master: int) -> None:
        """The workers of a dead nginx master keep serving until the new master listens, then finish their
        requests and quit; any still there after the grace period are killed."""
        grace = time.monotonic() + self.settings.gunicorn_timeout_seconds + 5
        while (
            not readiness.listens(new_master, self.settings.bind_port)
            and time.monotonic() < grace
            and not self.stopping.is_set()
            and group_alive(new_master)
        ):
            time.sleep(0.05)
        signal_group(old_group, signal.SIGQUIT)
        while group_alive(old_group) and time.monotonic() < grace:
            time.sleep(0.1)
        if signal_group(old_group, signal.SIGKILL):
            log.info("nginx workers of the previous master (process group %d) stopped", old_group)

    def children(self) -> list[Child]:
        return [c for c in [*self.model_servers, self.gunicorn, self.nginx] if c is not None]

    def stop(self) -> None:
        """Drain: nginx finishes in-flight requests, then gunicorn, then the model servers stop; nothing of
        theirs is left running."""
        self.state = ServeState.STOPPING
        grace = self.settings.gunicorn_timeout_seconds + 5
        if self.nginx:
            self.nginx.stop(signal.SIGQUIT, grace)
        for retire in self.retiring:  # they drain like nginx (stopping is set, so they get SIGQUIT now)
            retire.join(grace + 5)
        if self.gunicorn:
            self.gunicorn.stop(signal.SIGTERM, grace)
        for child in self.model_servers:
            child.stop(signal.SIGTERM, 15)
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
        if self._direct_log is not None:
            self._direct_log.close()
