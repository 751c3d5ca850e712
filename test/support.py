"""Helpers shared by the test suite: free loopback ports, background processes, reference models."""

from __future__ import annotations

import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from sagemaker_tfs.stack import readiness
from sagemaker_tfs.config import Settings

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
TESTDATA = REPO / "test" / "data" / "tfs-reference-models"  # from the TensorFlow Serving project (README there)

# Reference SavedModels from the TensorFlow Serving project (a copy of its test data, see test/data/README.md).
HALF_PLUS_TWO = TESTDATA / "saved_model_half_plus_two_cpu"  # TF1, version 123
HALF_PLUS_THREE = TESTDATA / "saved_model_half_plus_three"  # TF1, version 123, tf.saved_model.load fails on it
HALF_PLUS_TWO_2_VERSIONS = TESTDATA / "saved_model_half_plus_two_2_versions"  # TF1, versions 123 and 124
HALF_PLUS_TWO_TF2 = TESTDATA / "saved_model_half_plus_two_tf2_cpu"  # TF2, version 123
BAD_HALF_PLUS_TWO = TESTDATA / "bad_half_plus_two"  # no saved_model.pb: must fail to load
# TensorFlow Lite half_plus_two, version 123: tensors x -> y; the second stores a SignatureDef (x -> y naming the
# tensor `tflite_input:0`) in its signature_defs_metadata
HALF_PLUS_TWO_TFLITE = TESTDATA / "saved_model_half_plus_two_tflite"
HALF_PLUS_TWO_TFLITE_WITH_SIGDEF = TESTDATA / "saved_model_half_plus_two_tflite_with_sigdef"


LOWEST_PORT = 1024  # below are the privileged ports


def ephemeral_port_range() -> tuple[int, int]:
    """The kernel's range for ports of outgoing connections and of binds to port 0."""
    low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
    return int(low), int(high)


def _bindable(port: int) -> bool:
    """Whether port is free on every IPv4 address (nginx listens on all of them)."""
    with socket.socket() as sock:
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
        return True


_handed_out: set[int] = set()  # ports this process gave before: free until their server binds them, not after


def free_port_range(size: int) -> tuple[int, int]:
    """`size` consecutive loopback ports free right now, as (low, high) inclusive, chosen at random below the
    kernel's ephemeral range: a server there can find its port taken by an outgoing connection (even one that
    connected to itself), which a port below it never is. Never one handed out before in this process (a test that
    picks a port for a setting and then starts a stack, which picks its own, must not get the same twice)."""
    ceiling = ephemeral_port_range()[0] - size
    for _ in range(500):
        low = random.randint(LOWEST_PORT, ceiling)
        ports = range(low, low + size)
        if _handed_out.isdisjoint(ports) and all(_bindable(port) for port in ports):
            _handed_out.update(ports)
            return low, low + size - 1
    raise RuntimeError(f"no {size} consecutive free ports found below {ceiling + size}")


def free_port() -> int:
    """A TCP port free on the loopback interface right now, below the kernel's ephemeral range."""
    return free_port_range(1)[0]


def port_is_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


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


# A handler that reads the whole body and answers its size: bodies pass through the worker, not the model server.
PASS_THROUGH = """
    def handler(data, context):
        return str(len(data.read())), "text/plain"
"""


def settled_rss(pids: set[int], limit_kb: dict[int, float], timeout: float = 30.0) -> dict[int, int]:
    """Each process's VmRSS in kB once all are within their limit, or as they are after `timeout` (memory freed
    goes back to the system over a moment)."""
    deadline = time.monotonic() + timeout
    while True:
        rss = {pid: resident_kb(pid) for pid in pids}
        if all(rss[pid] <= limit_kb[pid] for pid in pids) or time.monotonic() > deadline:
            return rss
        time.sleep(0.5)


def post_burst(port: int, body: bytes, clients: int, path: str = "/invocations") -> list[int]:
    """`clients` concurrent POSTs of `body` (each on its own connection); their statuses."""
    statuses: list[int] = [0] * clients

    def send(index: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        try:
            connection.request("POST", path, body, {"Content-Type": "application/octet-stream"})
            answer = connection.getresponse()
            answer.read()
            statuses[index] = answer.status
        finally:
            connection.close()

    threads = [threading.Thread(target=send, args=(index,)) for index in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return statuses


def listening_pids(port: int) -> set[int] | None:
    """The pids holding a TCP socket listening on `port` (any address), per `ss`; None when nothing listens."""
    out = subprocess.run(["ss", "-ltnpH", f"sport = :{port}"], capture_output=True, text=True, check=True).stdout
    if not out.strip():
        return None
    return {int(pid) for pid in re.findall(r"pid=(\d+)", out)}


def http_status(url: str, timeout: float = 2.0) -> int | None:
    """The status of GET url, or None when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (OSError, urllib.error.URLError):
        return None


@dataclass
class Answer:
    """An HTTP answer: status, headers (lower-case names), body."""

    status: int
    headers: dict[str, str]
    body: bytes

    def json(self):
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode()

    @property
    def content_type(self) -> str | None:
        return self.headers.get("content-type")


def http_call(port: int, method: str, path: str, body: bytes | str | None = None,
              headers: dict[str, str] | list[tuple[str, str]] | None = None, timeout: float = 120) -> Answer:
    """One HTTP request to 127.0.0.1:port on a fresh connection; `headers` as a list of (name, value) sends each
    line as given, repeats and order kept (with a Content-Length of the body)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        if isinstance(headers, list):
            data = body.encode() if isinstance(body, str) else body or b""
            connection.putrequest(method, path, skip_accept_encoding=True)
            for name, value in [*headers, ("Content-Length", str(len(data)))]:
                connection.putheader(name, value)
            connection.endheaders(data)
        else:
            connection.request(method, path, body, headers or {})
        response = connection.getresponse()
        return Answer(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
    finally:
        connection.close()


CUSTOM_ATTRIBUTES = "X-Amzn-SageMaker-Custom-Attributes"


def invoke(stack: "Stack", body: bytes | str, content_type: str | None = "application/json",
           attributes: str | None = None, **headers: str) -> Answer:
    """POST /invocations through a stack's nginx (`stack`: anything with the `port` it listens on), on a fresh
    connection; `content_type` None sends none, `attributes` is the custom attributes header, and other headers are
    keyword arguments with underscores for dashes (X_Amzn_RequestId='...', Accept='text/csv')."""
    sent = {name.replace("_", "-"): value for name, value in headers.items()}
    if content_type is not None:
        sent["Content-Type"] = content_type
    if attributes is not None:
        sent[CUSTOM_ATTRIBUTES] = attributes
    return http_call(stack.port, "POST", "/invocations", body, sent)


def write_code(model_dir: Path, script: str | None = None, files: dict[str, str] | None = None) -> Path:
    """model_dir/code/inference.py holding `script` and code/<path> holding each of `files` (all dedented)."""
    for path, text in {**({"inference.py": script} if script is not None else {}), **(files or {})}.items():
        target = model_dir / "code" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text))
    return model_dir


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
    (support.Background, support.Stack, the app harnesses) or a function returning the text.

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
            shown = text if len(text) <= LOG_SHOWN else f"[... {len(text) - LOG_SHOWN} characters ...]" + \
                text[-LOG_SHOWN:]
            why = "the process exited" if ended else f"{timeout}s passed"
            times = "" if count == 1 else f" {count} times"
            raise AssertionError(f"{why} and the log does not hold{times} {missing!r}"
                                 f"{f' after character {since}' if since else ''}; the log:\n{shown}")
        time.sleep(0.05)


class Background:
    """A command running in the background, its stdout and stderr going to a log file.

    Use as a context manager; on exit the process gets SIGTERM, then SIGKILL after `stop_timeout`.
    """

    def __init__(self, args: list[str], env: dict[str, str] | None = None, cwd: str | Path | None = None,
                 stop_timeout: float = 20.0):
        self.args = [str(a) for a in args]
        self.env = {**os.environ, **(env or {})}
        self.cwd = cwd
        self.stop_timeout = stop_timeout
        self.log_path = Path(tempfile.mkstemp(prefix="bg-", suffix=".log")[1])
        self.proc: subprocess.Popen | None = None

    def start(self) -> "Background":
        log = open(self.log_path, "ab")  # O_APPEND: children that reopen /dev/stdout (nginx) must not overwrite
        self.proc = subprocess.Popen(self.args, env=self.env, cwd=self.cwd, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
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

    def __enter__(self) -> "Background":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def predict_log(name: str = "", **inputs) -> bytes:
    """A serialized PredictionLog of a Predict request (a warm-up record), its inputs as tf.make_tensor_proto
    makes them."""
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    entry = prediction_log_pb2.PredictionLog()
    request = entry.predict_log.request
    request.model_spec.name = name
    for alias, value in inputs.items():
        request.inputs[alias].CopyFrom(tf.make_tensor_proto(value))
    return entry.SerializeToString()


def write_warmup_requests(version_dir: Path, records: list[bytes]) -> Path:
    """version_dir/assets.extra/tf_serving_warmup_requests holding `records` (TensorFlow's TFRecordWriter)."""
    import tensorflow as tf

    path = version_dir / "assets.extra" / "tf_serving_warmup_requests"
    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)
    return path


def copy_model(source: Path, dest_parent: Path, name: str | None = None, versions: list[str] | None = None) -> Path:
    """Copy a reference model (optionally only some version folders) to dest_parent/name; returns the copy."""
    dest = dest_parent / (name or source.name)
    if versions is None:
        shutil.copytree(source, dest)
    else:
        dest.mkdir(parents=True)
        for version in versions:
            shutil.copytree(source / version, dest / version)
    return dest


class Stack(Background):
    """The full container stack (`serve`: model servers, gunicorn + Falcon app, nginx) on free loopback ports.

    `env` adds SAGEMAKER_* settings. `url` is nginx's base URL; `runtime_dir` holds the stack's files. `serve` is
    the command (another environment's, for the serving image's test).
    """

    def __init__(self, model_dir: str | Path, env: dict[str, str] | None = None, instances: int = 1,
                 serve: Path = VENV_BIN / "serve"):
        self.port = free_port()
        low, high = free_port_range(2 * instances)
        self.model_server_ports = list(range(low, high + 1))
        self.runtime_dir = Path(tempfile.mkdtemp(prefix="stack-"))
        self.url = f"http://127.0.0.1:{self.port}"
        settings = Settings.env_of(model_dir=str(model_dir), bind_port=self.port, safe_port_range=(low, high),
                                   tfs_instance_count=instances, runtime_dir=str(self.runtime_dir))
        super().__init__([serve], env={**settings, **(env or {})}, stop_timeout=60)

    def start(self, wait: bool = True) -> "Stack":
        super().start()
        if wait:
            self.wait_until(self.ready, timeout=180, what="answering /ping with 200")
        return self

    def ready(self) -> bool:
        return http_status(self.url + "/ping") == 200

    def pid_of(self, child: str) -> int:
        """The pid of a supervised child: 'tfs-0', 'gunicorn-supervised', 'nginx-supervised'."""
        return int((self.runtime_dir / f"{child}.pid").read_text())

    def processes(self) -> set[int]:
        """serve's children and theirs, found by parent and by the children's sessions (an orphan of a dead
        child keeps its session)."""
        return descendants(self.proc.pid) | session_members(self.child_sessions())

    def child_sessions(self) -> set[int]:
        """The sessions of the supervised children (each runs in its own) named by their pid files now."""
        return {int(path.read_text()) for path in self.runtime_dir.glob("*.pid")
                if (path.stem.startswith("tfs-") or path.stem.endswith("-supervised")) and path.read_text().strip()}

    def stop(self) -> int | None:
        """Stop serve; then kill whatever of its children's sessions is left (after a failed test)."""
        sessions = self.child_sessions() if self.runtime_dir.is_dir() else set()
        code = super().stop()
        for pid in session_members(sessions):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return code

    def gunicorn_workers(self) -> set[int]:
        return descendants(self.pid_of("gunicorn-supervised"))

    def __enter__(self) -> "Stack":
        return self if self.proc is not None else self.start()  # `with Stack(...).start(wait=False)` starts once


def listening_addresses(port: int) -> set[str]:
    """The local addresses with a TCP socket listening on `port`, e.g. {"127.0.0.1"} or {"0.0.0.0"} (IPv4-mapped
    IPv6 addresses as IPv4); empty when nothing listens."""
    return {address for address, _ in readiness.listening_sockets(port)}


def npy_body(array, allow_pickle: bool = False) -> bytes:
    """An NPY file of a numpy array, as the SageMaker SDK's NumpySerializer sends it (allow_pickle: an object array,
    which the container must refuse)."""
    import io

    import numpy as np

    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=allow_pickle)
    return buffer.getvalue()


def scrape(port: int, path: str = "/metrics") -> dict:
    """{(sample name, sorted labels): value} of a Prometheus page on a loopback port."""
    from prometheus_client.parser import text_string_to_metric_families

    answer = http_call(port, "GET", path)
    assert answer.status == 200, answer.text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(answer.text) for s in family.samples}


def sample(page: dict, name: str, **labels) -> float | None:
    """The value of one sample of a scraped page, None when it is not there."""
    return page.get(metric(name, **labels))


def metric(name: str, **labels) -> tuple[str, tuple]:
    """A sample's key in a scraped page."""
    return name, tuple(sorted(labels.items()))


def counted_page(port: int, expected: dict[tuple[str, tuple], float], before: dict | None = None,
                 path: str = "/metrics", timeout: float = 30.0) -> dict:
    """The page scraped once each sample of `expected` ({metric(name, **labels): value}) has its value, or, given
    the page `before`, has grown by it since (an absent sample counts 0). What a request adds to a page may come
    after its answer (gunicorn's workers write their totals twice a second, each its own; nginx's datagrams are
    read by serve): a test reads counts with this, not with one scrape after its requests."""
    pages = []

    def grown(page: dict, key: tuple[str, tuple]) -> float:
        return page.get(key, 0) - (before.get(key, 0) if before is not None else 0)

    def complete() -> bool:
        pages.append(scrape(port, path))
        return all(grown(pages[-1], key) == value for key, value in expected.items())

    try:
        wait_for(complete, timeout, f"the page to count {expected}")
    except AssertionError as failure:
        got = {key: grown(pages[-1], key) for key in expected}
        raise AssertionError(f"{failure}; it counts {got}") from None
    return pages[-1]


def runtime_client(port: int):
    """boto3's `sagemaker-runtime` client pointed at a local container's runtime API (SAGEMAKER_LOCAL_RUNTIME_API),
    with dummy credentials and no retries (so that each call is one request)."""
    import boto3
    from botocore.config import Config

    return boto3.client("sagemaker-runtime", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
                        aws_access_key_id="local", aws_secret_access_key="local",
                        config=Config(retries={"max_attempts": 1, "mode": "standard"}, read_timeout=120))


def client_error(call) -> dict:
    """The parsed response of the botocore ClientError that `call()` must raise (Error.Code, the members,
    ResponseMetadata)."""
    import pytest
    from botocore.exceptions import ClientError

    with pytest.raises(ClientError) as raised:
        call()
    return raised.value.response
