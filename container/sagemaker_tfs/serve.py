"""`serve`: the container's entrypoint. Starts and supervises the model servers, gunicorn and nginx.

Start-up, each step failing fast with one message that says what to fix:
  1. settings from SAGEMAKER_* (config.py) and the model tree (model_tree.py) are validated;
  2. the model server config (and batching config) are written to the runtime folder, and
     SAGEMAKER_TFS_INSTANCE_COUNT model servers start: `tensorflow_model_server` when it is on PATH,
     else the embedded one, with the same flags; code/requirements.txt is installed meanwhile;
  3. once every version of every model is AVAILABLE on every instance, gunicorn starts the Falcon app;
  4. once the app answers /ping with 200, nginx starts listening on SAGEMAKER_BIND_TO_PORT.
Then it supervises: a child that dies is logged and restarted (/ping is not 200 until it is back).
SIGTERM (or SIGINT) drains: nginx stops accepting and finishes in-flight requests, then gunicorn, then the
model servers stop; the exit status is 0.
All runtime files (configs, sockets, pid files, lock) live in SAGEMAKER_RUNTIME_DIR, so stacks with
different SAGEMAKER_BIND_TO_PORT run side by side.
"""

from __future__ import annotations

import collections
import fcntl
import http.client
import importlib.metadata
import importlib.util
import json
import logging
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from . import __version__, model_tree, nginx
from .config import ConfigError, Settings
from .model_tree import ModelTree, ModelTreeError

log = logging.getLogger("serve")

# Packages the container itself runs on: user requirements may not change their versions.
PINNED_PACKAGES = ("tensorflow", "tensorflow-serving-api", "numpy", "protobuf", "grpcio", "falcon", "gunicorn",
                   "requests", "urllib3", "uvloop", "httptools")


class StartupError(RuntimeError):
    """The stack cannot start; the message says why."""


class Child:
    """A supervised process whose output is forwarded to ours, keeping its last lines for error messages."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], pid_file: Path):
        self.name, self.args, self.env, self.pid_file = name, args, env, pid_file
        self.proc: subprocess.Popen | None = None
        self.tail: collections.deque[str] = collections.deque(maxlen=40)
        self.restarts = 0

    def start(self) -> None:
        self.proc = subprocess.Popen(self.args, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        self.pid_file.write_text(f"{self.proc.pid}\n")
        threading.Thread(target=self._forward, args=(self.proc.stdout,), daemon=True,
                         name=f"{self.name}-output").start()

    def _forward(self, stream) -> None:
        out = sys.stderr.buffer
        for line in iter(stream.readline, b""):
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
        lines = [line for line in self.tail if line.strip()][-count:]
        return "\n".join(f"    {line}" for line in lines) or "    (no output)"

    def stop(self, signum: int, timeout: float) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signum)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            log.warning("%s (pid %d) did not stop within %.0f s; killing it", self.name, self.proc.pid, timeout)
            self.proc.kill()
            self.proc.wait()


def gpu_count() -> int:
    """GPUs listed by `nvidia-smi -L` (0 without nvidia-smi)."""
    if not shutil.which("nvidia-smi"):
        return 0
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def model_server_base_command() -> list[str]:
    real = shutil.which("tensorflow_model_server")
    return [real] if real else [sys.executable, "-m", "sagemaker_tfs.model_server"]


def model_server_commands(settings: Settings, config_file: Path, batching_file: Path | None,
                          gpus: int) -> list[tuple[list[str], dict[str, str]]]:
    """The command line and extra environment of each model server instance."""
    base = model_server_base_command()
    commands = []
    count = settings.tfs_instance_count
    for i, (grpc_port, rest_port) in enumerate(settings.ports()):
        args = base + [
            f"--port={grpc_port}",
            f"--rest_api_port={rest_port}",
            f"--model_config_file={config_file}",
            "--max_num_load_retries=0",
            "--file_system_poll_wait_seconds=0",
            f"--rest_api_timeout_in_ms={settings.gunicorn_timeout_seconds * 1000}",
        ]
        if batching_file is not None:
            args += ["--enable_batching=true", f"--batching_parameters_file={batching_file}"]
        if settings.tfs_intra_op_parallelism:
            args.append(f"--tensorflow_intra_op_parallelism={settings.tfs_intra_op_parallelism}")
        if settings.tfs_inter_op_parallelism:
            args.append(f"--tensorflow_inter_op_parallelism={settings.tfs_inter_op_parallelism}")
        env: dict[str, str] = {}
        if gpus and count > 1:
            sharing = math.ceil(count / gpus)  # instances on each GPU
            fraction = round((1 - settings.tfs_fractional_gpu_mem_margin) / sharing, 4)
            args.append(f"--per_process_gpu_memory_fraction={fraction}")
            if gpus > 1:
                env["CUDA_VISIBLE_DEVICES"] = str(i % gpus)
        commands.append((args, env))
    return commands


def gunicorn_command(settings: Settings, app: str = "sagemaker_tfs.proxy.app:create_app()") -> list[str]:
    return [
        sys.executable, "-m", "gunicorn", app,
        "--bind", f"unix:{settings.runtime_dir}/gunicorn.sock",
        "--workers", str(settings.gunicorn_workers),
        "--threads", str(settings.gunicorn_threads),
        "--worker-class", settings.gunicorn_worker_class,
        "--timeout", str(settings.gunicorn_timeout_seconds),
        "--graceful-timeout", str(settings.gunicorn_timeout_seconds),
        "--keep-alive", "75",
        "--log-level", settings.gunicorn_loglevel,
        "--error-logfile", "-",
        "--pid", f"{settings.runtime_dir}/gunicorn.pid",
    ]


def install_requirements(code: Path, runtime_dir: Path) -> subprocess.Popen | None:
    """Start `pip install -r code/requirements.txt` (skipped when code/lib exists, as in the original)."""
    requirements = code / "requirements.txt"
    if (code / "lib").is_dir():
        if requirements.is_file():
            log.warning("%s/lib exists: its modules are used and %s is not installed", code, requirements)
        return None
    if not requirements.is_file():
        return None
    constraints = runtime_dir / "constraints.txt"
    pins = []
    for name in PINNED_PACKAGES:
        try:
            pins.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            pass
    constraints.write_text("\n".join(pins) + "\n")
    args = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
            "-r", str(requirements), "-c", str(constraints)]
    log.info("installing %s (the container's own packages are pinned by %s)", requirements, constraints)
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def http_get(host_or_socket: str | int, path: str, timeout: float = 2.0) -> tuple[int, bytes] | None:
    """GET over TCP on 127.0.0.1:port (int) or over a unix socket (str); None when nothing answers."""
    if isinstance(host_or_socket, int):
        conn = http.client.HTTPConnection("127.0.0.1", host_or_socket, timeout=timeout)
    else:
        conn = UnixHTTPConnection(host_or_socket, timeout)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.socket_path)


def version_states(rest_port: int, model: str) -> dict[int, tuple[str, str]] | None:
    """{version: (state, error message)} from the model server's status API; None if it does not answer."""
    answer = http_get(rest_port, f"/v1/models/{model}")
    if answer is None or answer[0] not in (200, 404):
        return None
    if answer[0] == 404:
        return {}
    states = {}
    for entry in json.loads(answer[1]).get("model_version_status", []):
        status = entry.get("status", {})
        states[int(entry["version"])] = (entry.get("state", ""), status.get("error_message", ""))
    return states


class Stack:
    """The model servers, gunicorn and nginx of one container, and their supervision."""

    app_factory = "sagemaker_tfs.proxy.app:create_app()"  # gunicorn's

    def __init__(self, settings: Settings, tree: ModelTree | None):
        self.settings = settings
        self.tree = tree
        self.runtime = Path(settings.runtime_dir)
        self.model_servers: list[Child] = []
        self.gunicorn: Child | None = None
        self.nginx: Child | None = None
        self.stopping = threading.Event()
        self.env = dict(os.environ)
        self.env.setdefault("OMP_NUM_THREADS", "1")  # as the original: no oversubscription by BLAS threads
        self.env["SAGEMAKER_RUNTIME_DIR"] = str(self.runtime)
        ports = settings.ports()
        self.env["TFS_GRPC_PORTS"] = ",".join(str(grpc) for grpc, _ in ports)
        self.env["TFS_REST_PORTS"] = ",".join(str(rest) for _, rest in ports)
        if tree is not None:
            self.env["SAGEMAKER_MODEL_DIR"] = str(tree.model_dir.resolve())
            self.env["TFS_DEFAULT_MODEL_NAME"] = tree.default_model

    @property
    def code_dir(self) -> Path:
        """The folder whose requirements.txt is installed at start-up."""
        return self.tree.model_dir / "code"

    def _write_model_config(self, config_file: Path) -> None:
        config_file.write_text(model_tree.model_config_text(self.tree))

    def _ready_message(self) -> str:
        return (", ".join(f"{m.name} v{','.join(map(str, m.versions))}" for m in self.tree.models) +
                f" (default model {self.tree.default_model}"
                + (f", handler script {self.tree.script}" if self.tree.script else "") + ")")

    def _restarted(self, child: Child, status: int) -> None:
        """Called after supervise() restarted a child that had exited with `status`."""

    # ---- start-up ----

    def start(self) -> None:
        s = self.settings
        deadline = time.monotonic() + s.tfs_wait_time_seconds
        config_file = self.runtime / "model_config.pbtxt"
        self._write_model_config(config_file)
        batching_file = None
        if s.tfs_enable_batching:
            batching_file = self.runtime / "batching_parameters.pbtxt"
            batching_file.write_text(model_tree.batching_parameters_text(s))
            log.info("batching on: %s", " ".join(batching_file.read_text().split()))
        gpus = gpu_count()
        for i, (args, extra_env) in enumerate(model_server_commands(s, config_file, batching_file, gpus)):
            child = Child(f"model server {i}", args, {**self.env, **extra_env}, self.runtime / f"tfs-{i}.pid")
            log.info("starting %s: %s", child.name, " ".join(args))
            child.start()
            self.model_servers.append(child)

        pip = install_requirements(self.code_dir, self.runtime)
        if pip is not None:
            output, _ = pip.communicate()
            text = output.decode(errors="replace")
            sys.stderr.write(text)
            if pip.returncode != 0:
                raise StartupError(f"pip could not install {self.code_dir}/requirements.txt "
                                   f"(exit {pip.returncode}):\n" + _last_lines(text))
            log.info("installed %s/requirements.txt", self.code_dir)

        self._wait_for_models(deadline)

        s.app_startup_error_file.unlink(missing_ok=True)
        self.gunicorn = Child("gunicorn", gunicorn_command(s, self.app_factory), self.env, self.runtime / "gunicorn-supervised.pid")
        log.info("starting gunicorn: %d worker(s) x %d thread(s), %s workers", s.gunicorn_workers,
                 s.gunicorn_threads, s.gunicorn_worker_class)
        self.gunicorn.start()
        sock = str(self.runtime / "gunicorn.sock")
        self._wait(lambda: (http_get(sock, "/ping") or (0,))[0] == 200, self.gunicorn, deadline,
                   "the Python service to answer /ping")

        config = nginx.write_config(s)
        self.nginx = Child("nginx", nginx.command(config), self.env, self.runtime / "nginx-supervised.pid")
        self.nginx.start()
        self._wait(lambda: http_get(s.bind_port, "/ping") is not None, self.nginx, deadline,
                   f"nginx to listen on port {s.bind_port}")
        log.info("ready on port %d: %s", s.bind_port, self._ready_message())

    def _wait(self, ready: Callable[[], bool], child: Child, deadline: float, what: str) -> None:
        while not ready():
            if self.stopping.is_set():
                raise StartupError("stopped by a signal during start-up")
            code = child.exited()
            if code is not None and child is self.gunicorn and self.settings.app_startup_error_file.is_file():
                raise StartupError(self.settings.app_startup_error_file.read_text().strip())
            if code is not None:
                raise StartupError(f"{child.name} exited with status {code} while waiting for {what}:\n"
                                   + child.last_lines())
            if time.monotonic() > deadline:
                raise StartupError(f"timed out after {self.settings.tfs_wait_time_seconds} s "
                                   f"(SAGEMAKER_TFS_WAIT_TIME_SECONDS) waiting for {what}:\n" + child.last_lines())
            self.stopping.wait(0.2)

    def _wait_for_models(self, deadline: float) -> None:
        for child, (_, rest_port) in zip(self.model_servers, self.settings.ports()):
            for model in self.tree.models:
                self._wait(lambda: self._model_ready(child, rest_port, model), child, deadline,
                           f"model {model.name} to be AVAILABLE")
        log.info("every model is AVAILABLE on %d model server(s)", len(self.model_servers))

    @staticmethod
    def _model_ready(child: Child, rest_port: int, model: model_tree.Model) -> bool:
        states = version_states(rest_port, model.name)
        if states is None:
            return False
        for version in model.versions:
            state, error = states.get(version, ("", ""))
            if error:
                raise StartupError(f"{child.name} could not load model {model.name} version {version} "
                                   f"from {model.base_path}: {error}")
            if state != "AVAILABLE":
                return False
        return True

    # ---- supervision ----

    def supervise(self) -> None:
        """Restart children that die, until a signal asks to stop."""
        while not self.stopping.wait(0.5):
            for child in self.children():
                code = child.exited()
                if code is None or self.stopping.is_set():
                    continue
                child.restarts += 1
                log.error("%s (pid %d) exited with status %d; restarting it (restart #%d). Last output:\n%s",
                          child.name, child.proc.pid, code, child.restarts, child.last_lines())
                child.start()
                self._restarted(child, code)

    def children(self) -> list[Child]:
        return [c for c in [*self.model_servers, self.gunicorn, self.nginx] if c is not None]

    def stop(self) -> None:
        """Drain: nginx finishes in-flight requests, then gunicorn, then the model servers stop."""
        grace = self.settings.gunicorn_timeout_seconds + 5
        if self.nginx:
            self.nginx.stop(signal.SIGQUIT, grace)
        if self.gunicorn:
            self.gunicorn.stop(signal.SIGTERM, grace)
        for child in self.model_servers:
            child.stop(signal.SIGTERM, 15)


def _last_lines(text: str, count: int = 15) -> str:
    lines = [line for line in text.splitlines() if line.strip()][-count:]
    return "\n".join(f"    {line}" for line in lines)


def _lock_runtime_dir(runtime: Path):
    """Hold a lock on the runtime folder for our lifetime: two stacks must not share one."""
    runtime.mkdir(parents=True, exist_ok=True)
    lock = open(runtime / "serve.lock", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise StartupError(f"runtime folder {runtime} is in use by another running stack; give each stack its "
                           "own SAGEMAKER_BIND_TO_PORT (or SAGEMAKER_RUNTIME_DIR)") from None
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    return lock


def prepare() -> tuple[Settings, ModelTree | None]:
    settings = Settings.from_env()
    if settings.gunicorn_worker_class in ("gevent", "eventlet", "tornado") and \
            importlib.util.find_spec(settings.gunicorn_worker_class) is None:
        raise ConfigError(f"SAGEMAKER_GUNICORN_WORKER_CLASS={settings.gunicorn_worker_class} needs the "
                          f"{settings.gunicorn_worker_class} package, which is not installed; use sync or gthread")
    if not shutil.which("nginx"):
        raise StartupError("nginx is not installed (apt-get install nginx, or run scripts/install.sh)")
    if settings.multi_model:
        from .multi_model.stack import check_multi_model

        check_multi_model(settings)
        return settings, None
    tree = model_tree.find_models(settings.model_dir, settings.tfs_default_model_name)
    return settings, tree


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["serve"]:  # SageMaker runs `docker run <image> serve`; the entrypoint is serve already
        args = args[1:]
    if args and args[0] in ("-h", "--help"):
        print(__doc__.strip() + "\n\nConfiguration: SAGEMAKER_* environment variables (see README.md).")
        return 0
    if args:
        print(f"serve: error: unexpected arguments {' '.join(args)}; configure with SAGEMAKER_* variables",
              file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s serve: %(message)s")
    log.info("sagemaker-tfs %s starting", __version__)
    stack: Stack | None = None

    def on_signal(signum, _frame):
        log.info("received %s: draining and stopping", signal.Signals(signum).name)
        if stack is not None:
            stack.stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        settings, tree = prepare()
        lock = _lock_runtime_dir(Path(settings.runtime_dir))
        if settings.multi_model:
            from .multi_model.stack import MultiModelStack

            stack = MultiModelStack(settings)
        else:
            stack = Stack(settings, tree)
        stack.start()
    except (ConfigError, ModelTreeError, StartupError) as exc:
        log.error("cannot start: %s", exc)
        if stack is not None:
            stack.stopping.set()
            stack.stop()
        return 1
    stack.supervise()
    stack.stop()
    lock.close()
    log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
