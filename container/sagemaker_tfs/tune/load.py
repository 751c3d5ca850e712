"""Load generators: the user's payloads sent to POST /invocations, closed loop (a fixed number of connections, each
sending its next request when the answer comes) and open loop (requests at Poisson arrival times, whatever the
answers do; a closed loop understates p99, since a slow answer also delays the requests behind it).

Closed loop: wrk where installed (a Lua script sends the payloads in turn), else h2load 1.69 or later (one
payload: it cannot rotate bodies; its per-request log gives the percentiles), else asyncio in this process.
Open loop: asyncio in this process (neither wrk nor h2load sends at a fixed arrival rate); each latency counts
from the request's scheduled time, so a generator that falls behind shows as latency rather than hiding it. Each
measurement carries the generator's own CPU: a compiled generator's from its rusage when it exits (os.wait4), the
Python one's from /proc/self/stat.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from . import usage

# Before nghttp2 1.69, a timed h2load run (-D) may never exit: a connection that the server closed (nginx does after
# keepalive_requests, 1,000 by default) and that is being remade when the time is up is never stopped
# (nghttp2 commit 6813f88c, "h2load does not stop early with -D option"). Debian 12 ships 1.52.
H2LOAD_FIXED = (1, 69)
MAX_OPEN_CONNECTIONS = 512  # the open loop's connections at most: past that, it queues (and the latency shows it)


class LoadError(RuntimeError):
    """The generator failed, or the model answered a payload with a non-2xx status; the message says which."""


@dataclass(frozen=True)
class Payloads:
    """The bodies sent, in turn, with their headers."""

    files: tuple[Path, ...]
    bodies: tuple[bytes, ...]
    content_type: str
    accept: str | None

    @classmethod
    def read(cls, path: Path, content_type: str, accept: str | None) -> Payloads:
        """A file, or every file of a folder (sorted; hidden ones left out)."""
        if path.is_dir():
            files = tuple(sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith(".")))
            if not files:
                raise LoadError(f"The payload folder {path} has no files")
        elif path.is_file():
            files = (path,)
        else:
            raise LoadError(f"The payload {path} does not exist: give a file or a folder of files")
        try:
            bodies = tuple(f.read_bytes() for f in files)
        except OSError as exc:
            raise LoadError(f"Unable to read the payload {exc.filename}: {exc.strerror}") from None
        return cls(tuple(f.resolve() for f in files), bodies, content_type, accept)

    def headers(self) -> dict[str, str]:
        return {"Content-Type": self.content_type, **({"Accept": self.accept} if self.accept else {})}

    def requests(self, host: str, path: str) -> list[bytes]:
        """Each body as a whole HTTP/1.1 request on a kept-alive connection."""
        head = "".join(f"{name}: {value}\r\n" for name, value in self.headers().items())
        return [
            f"POST {path} HTTP/1.1\r\nHost: {host}\r\n{head}Content-Length: {len(body)}\r\n\r\n".encode() + body
            for body in self.bodies
        ]


@dataclass
class Measurement:
    """One run of the generator: what it offered (connections, or an arrival rate) and what came back."""

    generator: str
    seconds: float
    requests: int
    errors: int  # non-2xx answers, broken connections, timeouts
    p50_ms: float
    p90_ms: float
    p99_ms: float
    generator_cpu: float  # the generator's CPU, in cores (1.0: one core busy)
    concurrency: int | None = None  # closed loop
    offered_rate: float | None = None  # open loop: requests/s scheduled
    behind_ms: float = 0.0  # open loop: how late the 99th percentile request was sent, by the generator's fault
    groups: usage.GroupUsage | None = None  # the stack's processes over the run
    notes: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds > 0 else 0.0


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Nearest rank: the smallest value with at least `fraction` of the values at or below it."""
    if not sorted_values:
        return 0.0
    rank = max(1, int(fraction * len(sorted_values) + 0.999999))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def poisson_schedule(rate: float, seconds: float, seed: int) -> list[float]:
    """Send times (seconds from the start) of a Poisson process of `rate` per second over `seconds`: exponential
    gaps drawn from a generator of its own, so that the same seed gives the same schedule."""
    draw = random.Random(seed)
    times, now = [], 0.0
    while rate > 0:
        now += draw.expovariate(rate)
        if now >= seconds:
            break
        times.append(now)
    return times


# -- the Python generator --------------------------------------------------------------------------------------


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, host: str, port: int) -> _Connection:
        return cls(*await asyncio.open_connection(host, port))

    async def exchange(self, request: bytes) -> tuple[int, bytes, bool]:
        """(status, body, whether the server keeps the connection) of one request."""
        self.writer.write(request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip().lower()
        if headers.get("transfer-encoding") == "chunked":
            body = b""
            while size := int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16):
                body += (await self.reader.readexactly(size + 2))[:-2]
            await self.reader.readuntil(b"\r\n")
        else:
            body = await self.reader.readexactly(int(headers.get("content-length", "0")))
        return status, body, headers.get("connection") != "close"

    def close(self) -> None:
        self.writer.close()


_EXCHANGE_ERRORS = (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, IndexError)


def _self_cpu() -> float:
    return usage.cpu_seconds("self")


async def _closed_loop(
    host: str, port: int, requests: list[bytes], concurrency: int, seconds: float
) -> tuple[list[float], int, float]:
    latencies: list[float] = []
    errors = 0
    loop = asyncio.get_running_loop()
    start = loop.time()
    end = start + seconds

    async def client(offset: int) -> None:
        nonlocal errors
        connection: _Connection | None = None
        sent = offset
        while loop.time() < end:
            began = loop.time()
            try:
                connection = connection or await _Connection.open(host, port)
                status, _, keep = await connection.exchange(requests[sent % len(requests)])
            except _EXCHANGE_ERRORS:
                errors += 1
                if connection is not None:
                    connection.close()
                connection = None
                await asyncio.sleep(0.01)  # a refused connection must not spin
                continue
            latencies.append(loop.time() - began)
            errors += not 200 <= status < 300
            sent += 1
            if not keep:
                connection.close()
                connection = None
        if connection is not None:
            connection.close()

    await asyncio.gather(*(client(i) for i in range(concurrency)))
    return latencies, errors, loop.time() - start


def python_closed(url_host: str, port: int, payloads: Payloads, concurrency: int, seconds: float) -> Measurement:
    requests = payloads.requests(f"{url_host}:{port}", "/invocations")
    cpu = _self_cpu()
    latencies, errors, took = asyncio.run(_closed_loop(url_host, port, requests, concurrency, seconds))
    return _measurement("python", latencies, errors, took, (_self_cpu() - cpu) / took, concurrency=concurrency)


async def _open_loop(
    host: str, port: int, requests: list[bytes], schedule: list[float]
) -> tuple[list[float], list[float], int, float]:
    latencies: list[float] = []
    behind: list[float] = []
    errors = 0
    idle: list[_Connection] = []
    opened = 0
    freed = asyncio.Condition()
    loop = asyncio.get_running_loop()
    start = loop.time()

    async def one(index: int, due: float) -> None:
        nonlocal errors, opened
        async with freed:
            while not idle and opened >= MAX_OPEN_CONNECTIONS:
                await freed.wait()
            connection = idle.pop() if idle else None
            if connection is None:
                opened += 1
        try:
            connection = connection or await _Connection.open(host, port)
            behind.append(loop.time() - due)
            status, _, keep = await connection.exchange(requests[index % len(requests)])
        except _EXCHANGE_ERRORS:
            errors += 1
            keep = False
        else:
            latencies.append(loop.time() - due)  # from when it was due: a late send counts against the stack
            errors += not 200 <= status < 300
        async with freed:
            if keep and connection is not None:
                idle.append(connection)
            else:
                opened -= 1
                if connection is not None:
                    connection.close()
            freed.notify()

    tasks = []
    for index, offset in enumerate(schedule):
        due = start + offset
        delay = due - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(index, due)))
    await asyncio.gather(*tasks)
    took = max(loop.time() - start, schedule[-1] if schedule else 0.0)
    for connection in idle:
        connection.close()
    return latencies, behind, errors, took


def open_loop(host: str, port: int, payloads: Payloads, rate: float, seconds: float, seed: int) -> Measurement:
    """Requests at the times of a seeded Poisson process of `rate` per second, each on an idle connection or a new
    one; latencies from each request's due time."""
    schedule = poisson_schedule(rate, seconds, seed)
    requests = payloads.requests(f"{host}:{port}", "/invocations")
    cpu = _self_cpu()
    latencies, behind, errors, took = asyncio.run(_open_loop(host, port, requests, schedule))
    result = _measurement("python", latencies, errors, took, (_self_cpu() - cpu) / took if took else 0.0)
    result.offered_rate = rate
    result.behind_ms = percentile(sorted(behind), 0.99) * 1e3
    return result


def _measurement(
    generator: str, latencies: list[float], errors: int, seconds: float, cpu: float, concurrency: int | None = None
) -> Measurement:
    ordered = sorted(latencies)
    return Measurement(
        generator,
        seconds,
        len(ordered),
        errors,
        percentile(ordered, 0.50) * 1e3,
        percentile(ordered, 0.90) * 1e3,
        percentile(ordered, 0.99) * 1e3,
        cpu,
        concurrency=concurrency,
    )


# -- compiled generators ---------------------------------------------------------------------------------------


def _lua_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def wrk_script(payloads: Payloads, folder: Path) -> Path:
    """wrk's Lua script: every payload read from its file (any bytes), sent in turn; its done() prints the counts
    and the percentiles (µs) on one line for _wrk to read."""
    headers = "".join(f"headers[{_lua_string(k)}] = {_lua_string(v)}\n" for k, v in payloads.headers().items())
    files = ", ".join(_lua_string(str(f)) for f in payloads.files)
    script = folder / "tune-post.lua"
    script.write_text(
        "local headers = {}\n" + headers + f"local files = {{{files}}}\n"
        "local bodies = {}\n"
        "for i, path in ipairs(files) do\n"
        '  local f = assert(io.open(path, "rb")); bodies[i] = f:read("*a"); f:close()\n'
        "end\n"
        "local n = 0\n"
        "request = function()\n"
        "  n = n % #bodies + 1\n"
        '  return wrk.format("POST", "/invocations", headers, bodies[n])\n'
        "end\n"
        "done = function(summary, latency, requests)\n"
        "  local e = summary.errors\n"
        '  io.write(string.format("TUNE %d %d %d %.1f %.1f %.1f\\n", summary.requests, summary.duration,\n'
        "    e.status + e.connect + e.read + e.write + e.timeout,\n"
        "    latency:percentile(50), latency:percentile(90), latency:percentile(99)))\n"
        "end\n"
    )
    return script


def _run_measured(command: list[str], timeout: float) -> tuple[int, str, float]:
    """(exit status, stdout and stderr, CPU seconds) of a generator: its rusage, taken as it is reaped."""
    with tempfile.TemporaryFile() as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while True:
            pid, status, rusage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                process.kill()
            time.sleep(0.02)
        process.returncode = os.waitstatus_to_exitcode(status)
        output.seek(0)
        return process.returncode, output.read().decode(errors="replace"), rusage.ru_utime + rusage.ru_stime


def wrk_closed(url: str, script: Path, concurrency: int, seconds: float) -> Measurement:
    threads = min(concurrency, 2)  # enough for a stack's rates; each more thread is a core taken from the stack
    command = ["wrk", f"-t{threads}", f"-c{concurrency}", f"-d{max(1, round(seconds))}s", "--timeout", "30s"]
    status, output, cpu = _run_measured([*command, "-s", str(script), url + "/invocations"], seconds + 40)
    line = next((line for line in output.splitlines() if line.startswith("TUNE ")), None)
    if status != 0 or line is None:
        raise LoadError(f"wrk failed (exit status {status}):\n{output.strip()[-2000:]}")
    fields = line.split()[1:]
    requests, micros, errors = (int(x) for x in fields[:3])
    p50, p90, p99 = (float(x) for x in fields[3:])
    took = micros / 1e6
    return Measurement(
        "wrk", took, requests, errors, p50 / 1e3, p90 / 1e3, p99 / 1e3, cpu / took, concurrency=concurrency
    )


def h2load_problem(version_line: str | None = None) -> str | None:
    """Why the installed h2load (or the one whose `h2load --version` line is given) cannot run a timed step; None
    when it can."""
    if version_line is None:
        version_line = subprocess.run(["h2load", "--version"], capture_output=True, text=True, check=False).stdout
    found = re.search(r"nghttp2/(\d+)\.(\d+)", version_line)
    if found is None:
        return f"Unable to read h2load's version from {version_line.strip()!r}: use wrk or python"
    if (int(found[1]), int(found[2])) >= H2LOAD_FIXED:
        return None
    fixed = ".".join(map(str, H2LOAD_FIXED))
    return (
        f"h2load {found[1]}.{found[2]} may never end a timed run (fixed in nghttp2 {fixed}): "
        "use wrk or python, or a newer h2load"
    )


def h2load_closed(url: str, payloads: Payloads, concurrency: int, seconds: float, folder: Path) -> Measurement:
    """h2load over HTTP/1.1, one payload; the percentiles from its per-request log (it prints none itself)."""
    log = folder / "h2load.log"
    log.unlink(missing_ok=True)
    headers = [arg for k, v in payloads.headers().items() for arg in ("-H", f"{k.lower()}: {v}")]
    command = [
        "h2load",
        "--h1",
        f"-c{concurrency}",
        f"-t{min(concurrency, 2)}",
        f"-D{max(1, round(seconds))}",
        "-d",
        str(payloads.files[0]),
        *headers,
        f"--log-file={log}",
        url + "/invocations",
    ]
    status, output, cpu = _run_measured(command, seconds + 40)
    if status != 0 or not log.exists():
        raise LoadError(f"h2load failed (exit status {status}):\n{output.strip()[-2000:]}")
    latencies, errors, first, last = [], 0, float("inf"), 0.0
    for row in log.read_text().splitlines():
        parts = row.split("\t")  # start (µs since the epoch), status (-1: failed), µs to the answer's end
        if len(parts) < 3:
            continue
        began, code, micros = float(parts[0]) / 1e6, int(parts[1]), int(parts[2])
        first, last = min(first, began), max(last, began + micros / 1e6)
        if 200 <= code < 300:
            latencies.append(micros / 1e6)
        else:
            errors += 1
    took = max(last - first, 1e-9) if latencies else seconds
    return _measurement("h2load", latencies, errors, took, cpu / took, concurrency=concurrency)


class ClosedLoop:
    """The closed-loop generator chosen: wrk, else h2load (a single payload), else Python; or the one named."""

    def __init__(self, payloads: Payloads, folder: Path, choice: str = "auto"):
        self.payloads, self.folder = payloads, folder
        if choice == "auto":
            if shutil.which("wrk"):
                choice = "wrk"
            elif shutil.which("h2load") and len(payloads.files) == 1 and h2load_problem() is None:
                choice = "h2load"
            else:
                choice = "python"
        elif choice != "python" and not shutil.which(choice):
            raise LoadError(f"{choice} is not installed (apt-get install {choice})")
        elif choice == "h2load" and len(payloads.files) > 1:
            raise LoadError("h2load sends one body: give one payload file, or use wrk or python")
        elif choice == "h2load" and (problem := h2load_problem()) is not None:
            raise LoadError(problem)
        self.name = choice
        self._script = wrk_script(payloads, folder) if choice == "wrk" else None

    def run(self, host: str, port: int, concurrency: int, seconds: float) -> Measurement:
        url = f"http://{host}:{port}"
        if self._script is not None:
            return wrk_closed(url, self._script, concurrency, seconds)
        if self.name == "h2load":
            return h2load_closed(url, self.payloads, concurrency, seconds, self.folder)
        return python_closed(host, port, self.payloads, concurrency, seconds)


def probe(host: str, port: int, payloads: Payloads, times: int = 1) -> None:
    """Send every payload `times` times, one at a time; a non-2xx answer raises LoadError naming it."""

    async def run() -> None:
        connection: _Connection | None = None
        try:
            for _ in range(times):
                for file, request in zip(
                    payloads.files, payloads.requests(f"{host}:{port}", "/invocations"), strict=True
                ):
                    connection = connection or await _Connection.open(host, port)
                    status, body, keep = await asyncio.wait_for(connection.exchange(request), 60)
                    if not 200 <= status < 300:
                        text = body.decode(errors="replace").strip()
                        raise LoadError(f"The model answered the payload {file.name} with {status}: {text[:500]}")
                    if not keep:
                        connection.close()
                        connection = None
        except (*_EXCHANGE_ERRORS, asyncio.TimeoutError) as exc:
            raise LoadError(f"The stack did not answer a payload: {exc or type(exc).__name__}") from None
        finally:
            if connection is not None:
                connection.close()

    asyncio.run(run())


# -- what the generator alone can drive ------------------------------------------------------------------------

_BARE_NGINX = """\
daemon off;
worker_processes 1;
pid {folder}/nginx.pid;
error_log stderr error;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {folder}/body;
    proxy_temp_path {folder}/proxy;
    fastcgi_temp_path {folder}/fastcgi;
    uwsgi_temp_path {folder}/uwsgi;
    scgi_temp_path {folder}/scgi;
    client_max_body_size 0;
    server {{
        listen 127.0.0.1:{port};
        location / {{ return 200 '{{"predictions": []}}'; }}
    }}
}}
"""


@contextlib.contextmanager
def bare_nginx(port: int) -> Iterator[None]:
    """nginx answering every request at once with a fixed body (one worker): what the generator alone can drive."""
    folder = Path(tempfile.mkdtemp(prefix="sagemaker-tfs-tune-nginx-"))
    config = folder / "nginx.conf"
    config.write_text(_BARE_NGINX.format(folder=folder, port=port))
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    process = subprocess.Popen(
        [nginx, "-c", str(config), "-p", str(folder), "-e", "stderr"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while not _listening(port):
            if time.monotonic() > deadline or process.poll() is not None:
                raise LoadError("nginx did not start for the generator's own measurement")
            time.sleep(0.05)
        yield
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(folder, ignore_errors=True)


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True
