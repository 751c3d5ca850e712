"""The stack under random traffic (issue 49): the stacks, the client, the checks and the memory bursts that
test_stack_random_traffic.py (a few thousand requests), test_stack_memory.py (the bursts) and scripts/fuzz_stack.py
(100,000 requests and the bursts) share.

Stacks, each serving half_plus_three (the default) and half_plus_two (versions 123 and 124), with the local runtime
API on and a 2 MiB client_max_body_size: `direct` and `app` (no script; the direct route on, and off), `pair` (an
input_handler/output_handler pair: the default codecs) and `toolkit` (a toolkit script on the served model). Every
request of `generated_requests.Traffic` goes, on keep-alive connections, to `direct` and `app` (whose answers and
connection handling are compared), or to one of the script stacks.

What a run checks, for every answer (`check`):
  - a 5xx only when documented (DOCUMENTED_5XX);
  - an error (4xx, 5xx) answered with a JSON object body: `{"error": "..."}`, or the runtime API's `{"Message": ...}`;
  - the request id header on every answer, the client's when it sent a valid one (/invocations);
  - an answer to every request but those whose client closes early (truncated and oversized bodies);
for `direct` against `app` (`compare`): the same status, Content-Type, body, and connection handling (the answer
closes the connection, or the connection answers the next request), but for the one documented difference
(`closed_by_the_route`); for each stack after the traffic
(`stack_findings`): the same gunicorn worker pids, no traceback, worker exit or timeout in serve's log, and /ping 200.
"""

from __future__ import annotations

import dataclasses
import hashlib
import http.client
import json
import re
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import clients
import model_dirs
import paths
import processes
import serve_stack
from app_scripts import DEFAULTS_SCRIPT
from generated_requests import Generated, Traffic

LIMIT = "2m"  # client_max_body_size of the traffic stacks: Traffic's oversized bodies are larger
LIMIT_BYTES = 2 << 20
RUNTIME_LIMIT_MB = 1  # the runtime API's payload limit: bodies between it and LIMIT are its ValidationError
ENV = {
    "SAGEMAKER_TFS_DEFAULT_MODEL_NAME": "half_plus_three",
    "SAGEMAKER_NGINX_CLIENT_MAX_BODY_SIZE": LIMIT,
    "SAGEMAKER_LOCAL_RUNTIME_API": "true",
    "SAGEMAKER_LOCAL_RUNTIME_MAX_PAYLOAD_MB": str(RUNTIME_LIMIT_MB),
    "SAGEMAKER_GUNICORN_WORKERS": "2",
}
# A toolkit script as the toolkit containers' users write them, on the served model (no model_fn): the default
# decoder and encoder around model.predict, a TFS predict request.
TOOLKIT_SCRIPT = """
def predict_fn(data, model):
    return model.predict(data)
"""
SCRIPTS = {"direct": None, "app": None, "pair": DEFAULTS_SCRIPT, "toolkit": TOOLKIT_SCRIPT}
STACK_ENV = {"app": {"SAGEMAKER_NGINX_DIRECT_INVOCATIONS": "false"}}
ROUTES = ("direct", "app")  # the stacks a "routes" request goes to, in order

# The 5xx answers the documents name, as (status, pattern of the body), and why each may come under random traffic
# with no fault injected. Anything else is a finding: an app 500 is an exception of ours, an nginx 500 a bug of the
# config, a 502/503 (model server or gunicorn unreachable) a crash.
DOCUMENTED_5XX = [
    # nginx, past SAGEMAKER_NGINX_PROXY_READ_TIMEOUT_SECONDS (nginx.conf.template, operations.md §4)
    (
        504,
        r'\{"error": "The inference request did not complete within \d+ seconds '
        r'\(SAGEMAKER_NGINX_PROXY_READ_TIMEOUT_SECONDS\)"\}',
    ),
    # the app's client of the model server, past its timeout (operations.md §5)
    (504, r'\{"error": "the model server at 127\.0\.0\.1:\d+ did not answer within [\d.]+ s"\}'),
    # the model server's own 5xx, passed through (tfs-compatibility.md §4, §5): UNIMPLEMENTED is 501 for a JSON
    # value of a type it cannot convert, UNAVAILABLE 503 a full batching queue, DEADLINE_EXCEEDED 504
    (501, r'\{\s*"error": "Conversion of JSON Value: .* to type: .*"\s*\}'),
    (503, r'\{\s*"error": "The batch scheduling queue to which this task was submitted is full; .*"\s*\}'),
    # nginx's answers to malformed requests (nginx.conf.template, operations.md §4): a Transfer-Encoding it does not
    # take, an HTTP version other than 1.0 and 1.1
    (501, r'\{"error": "Not Implemented: the request uses a Transfer-Encoding or method that is not supported"\}'),
    (505, r'\{"error": "HTTP Version Not Supported: send HTTP/1\.0 or HTTP/1\.1"\}'),
]
DOCUMENTED = [(status, re.compile(pattern.encode(), re.DOTALL)) for status, pattern in DOCUMENTED_5XX]
# The worker's refusals of a head it cannot take (a method it does not know, a second Content-Type): the headers
# after the refused line are not read, so the id of such an answer is a new one when the client's came later
REFUSED_HEAD = (b'{"error": "Bad Request: Malformed HTTP request: ', b'{"error": "Bad Request: Invalid HTTP Header: ')
# Findings reported, not failed on: nginx's own error pages (a malformed request, 404, 413, 505) carry no request id
REPORTED_ONLY = ("no request id",)
# serve's log lines that mean a worker crashed, was killed or restarted, or a request raised
LOG_ALARMS = re.compile(r"Traceback \(most recent call last\)|Worker exiting|WORKER TIMEOUT|\[(alert|crit|emerg)\]")


def model_root(folder: Path, script: str | None) -> Path:
    """folder holding half_plus_three and half_plus_two (2 versions), and code/inference.py when `script`."""
    model_dirs.copy_model(paths.HALF_PLUS_THREE, folder, "half_plus_three")
    model_dirs.copy_model(paths.HALF_PLUS_TWO_2_VERSIONS, folder, "half_plus_two")
    return model_dirs.write_code(folder, script)


def start_stacks(root: Path, names: Iterable[str] = SCRIPTS) -> dict[str, serve_stack.Stack]:
    """The named stacks, started together, each answering /ping."""
    stacks = {}
    for name in names:
        folder = model_root(root / name, SCRIPTS[name])
        stacks[name] = serve_stack.Stack(folder, env={**ENV, **STACK_ENV.get(name, {})}).start(wait=False)
    try:
        for stack in stacks.values():
            stack.wait_until(stack.ready, timeout=300, what="answering /ping with 200")
    except BaseException:
        stop_stacks(stacks)
        raise
    return stacks


def stop_stacks(stacks: dict[str, serve_stack.Stack]) -> None:
    for stack in stacks.values():
        stack.stop()


@dataclasses.dataclass
class Outcome:
    """What came back for one request on one stack."""

    status: int | None  # None: no answer (`error` says what happened)
    content_type: str | None = None
    body: bytes = b""
    request_id: str | None = None
    closes: bool = False  # the answer ends the connection (Connection: close, or HTTP/1.0)
    usable: bool | None = None  # the kept connection answered the next request (None: closed, or not tried)
    error: str | None = None

    def key(self) -> tuple:
        """What the two routes must agree on (the connection's fate apart: known only at the next request)."""
        body = re.sub(rb"serve-\d+", b"serve-PID", re.sub(rb"127\.0\.0\.1:\d+", b"127.0.0.1:PORT", self.body))
        return self.status, self.content_type, hashlib.sha256(body).hexdigest(), self.error

    def connection(self) -> tuple:
        return self.closes, self.usable

    def shown(self) -> str:
        return (
            f"{self.status} {self.content_type} closes={self.closes} usable={self.usable} error={self.error} "
            f"{self.body[:300]!r}"
        )


class Client:
    """One keep-alive connection to a stack's nginx on raw sockets (the wire bytes as generated), opened when
    needed; a connection the answer ends is closed, and the next request opens a new one. A kept connection that
    the server closed without saying so shows at the next request: that request gets no byte back, the previous
    answer is marked not usable, and the request is sent again on a new connection."""

    def __init__(self, port: int, timeout: float = 120):
        self.port, self.timeout = port, timeout
        self.sock: socket.socket | None = None
        self.last: Outcome | None = None  # the previous answer on the open connection

    def send(self, request: Generated) -> Outcome:
        if request.client_closes:
            self._close()  # its own connection: a reset of it must not be taken for the previous answer's
        if self.sock is not None:
            outcome = self._exchange(request, reused=True)
            if outcome is not None:
                return outcome
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout)
        outcome = self._exchange(request, reused=False)
        assert outcome is not None
        return outcome

    def _exchange(self, request: Generated, reused: bool) -> Outcome | None:
        assert self.sock is not None
        sock, previous, got_bytes = self.sock, self.last, False
        try:
            try:
                sock.sendall(request.wire())
            except (BrokenPipeError, ConnectionResetError):
                if not request.client_closes:
                    raise
            if request.mode == "truncated":
                sock.shutdown(socket.SHUT_WR)  # the body ends short: nginx reads the end of the stream
            response = http.client.HTTPResponse(sock, method=request.method)
            try:
                response.begin()
                got_bytes = True
                body = response.read()
            finally:
                response.close()
        except (OSError, http.client.HTTPException) as exc:
            self._close()
            if reused and not got_bytes and isinstance(exc, (http.client.RemoteDisconnected, ConnectionError)):
                if previous is not None:
                    previous.usable = False  # closed after an answer that kept it alive
                return None
            return Outcome(None, error=type(exc).__name__)
        if previous is not None and reused:
            previous.usable = True
        headers = {name.lower(): value for name, value in response.getheaders()}
        outcome = Outcome(
            response.status,
            headers.get("content-type"),
            body,
            headers.get("x-amzn-requestid"),
            closes=bool(response.will_close),
        )
        if outcome.closes or request.client_closes:
            self._close()
        else:
            self.last = outcome
        return outcome

    def settle(self) -> None:
        """Mark the last answer of the open connection usable or not, with a GET /ping on it."""
        if self.sock is not None and self.last is not None:
            probe = Generated(0, -1, "", "GET", "/ping", "HTTP/1.1", [b"Host: localhost"], b"")
            self.send(probe)
        self._close()

    def _close(self) -> None:
        if self.sock is not None:
            self.sock.close()
        self.sock, self.last = None, None


def documented_5xx(outcome: Outcome, method: str = "POST") -> bool:
    """A documented (status, body); for a HEAD, which gets no body, a documented status."""
    return any(
        outcome.status == status and (method == "HEAD" or pattern.fullmatch(outcome.body))
        for status, pattern in DOCUMENTED
    )


def check(request: Generated, outcome: Outcome) -> list[str]:
    """What is wrong with one answer (nothing, usually)."""
    problems = []
    if outcome.status is None:
        if not request.client_closes:
            problems.append(f"no answer ({outcome.error})")
        return problems
    if outcome.status >= 500 and not documented_5xx(outcome, request.method):
        problems.append(f"undocumented {outcome.status}")
    if outcome.status >= 400 and request.method != "HEAD":
        # the runtime API's own errors have SageMaker's Message; those nginx answers first, the stack's error
        members = ("error", "Message") if request.runtime_api else ("error",)
        try:
            parsed = json.loads(outcome.body)
        except ValueError:
            parsed = None
        base = (outcome.content_type or "").split(";")[0].strip()
        if not (base == "application/json" and isinstance(parsed, dict)) or not any(
            isinstance(parsed.get(member), str) for member in members
        ):
            problems.append("error body not JSON")
    if not outcome.request_id:
        problems.append("no request id")
    elif (
        request.request_id
        and not request.runtime_api  # InvokeEndpoint answers SageMaker's id, not the client's
        and not outcome.body.startswith(REFUSED_HEAD)
        and not (request.method == "HEAD" and outcome.status == 400)  # a refusal, with no body to tell it by
        and outcome.request_id != request.request_id
    ):
        problems.append(f"request id not the client's ({outcome.request_id!r})")
    return problems


@dataclasses.dataclass
class Finding:
    what: str
    stack: str
    request: Generated | None
    detail: str

    def __str__(self) -> str:
        where = self.request.describe() if self.request is not None else ""
        return f"{self.what} [{self.stack}] {self.detail}\n    {where}"


@dataclasses.dataclass
class Report:
    requests: Counter = dataclasses.field(default_factory=Counter)  # stack -> requests sent
    statuses: dict[str, Counter] = dataclasses.field(default_factory=dict)  # stack -> status -> count
    findings: list[Finding] = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    memory: list[dict[int, int]] = dataclasses.field(default_factory=list)  # VmRSS kB per worker, per burst

    def failures(self) -> list[Finding]:
        """The findings that fail a run (all but REPORTED_ONLY)."""
        return [finding for finding in self.findings if not finding.what.startswith(REPORTED_ONLY)]

    def kinds(self) -> Counter:
        return Counter(finding.what for finding in self.findings)

    def groups(self) -> dict[tuple[str, str, str], list[Finding]]:
        """The findings by what, stack and the answer's first bytes (the ids and numbers in it masked)."""
        grouped: dict[tuple[str, str, str], list[Finding]] = {}
        for finding in self.findings:
            shown = re.sub(r"\d+", "N", re.sub(r"fuzz-\d+-\d+|[0-9a-f-]{36}", "ID", finding.detail))[:120]
            grouped.setdefault((finding.what, finding.stack, shown), []).append(finding)
        return grouped


def send_traffic(
    stacks: dict[str, serve_stack.Stack],
    traffic: Traffic,
    indexes: Sequence[int],
    connections: int = 8,
    progress: Callable[[int], None] | None = None,
) -> Report:
    """Requests `indexes` of `traffic` over `connections` threads, each with a keep-alive connection per stack;
    the findings of every answer and of the comparison of the two routes."""
    report = Report(statuses={name: Counter() for name in stacks})
    lock = threading.Lock()
    pairs: list[tuple[Generated, Outcome, Outcome]] = []
    done = [0]

    def work(start: int) -> None:
        mine = {name: Client(stack.port) for name, stack in stacks.items()}
        seen: list[tuple[Generated, Outcome, Outcome]] = []
        found: list[Finding] = []
        counts: dict[str, Counter] = {name: Counter() for name in stacks}
        try:
            for index in indexes[start::connections]:
                request = traffic.make(index)
                names = ROUTES if request.target == "routes" else (request.target,)
                outcomes = []
                for name in names:
                    outcome = mine[name].send(request)
                    counts[name][outcome.status] += 1
                    found += [Finding(problem, name, request, outcome.shown()) for problem in check(request, outcome)]
                    outcomes.append(outcome)
                if request.target == "routes":
                    seen.append((request, outcomes[0], outcomes[1]))
                with lock:
                    done[0] += 1
                    if progress is not None:
                        progress(done[0])
            for client in mine.values():
                client.settle()
        finally:
            with lock:
                pairs.extend(seen)
                report.findings.extend(found)
                for name, counted in counts.items():
                    report.statuses[name].update(counted)
                    report.requests[name] += counted.total()

    started = time.monotonic()
    threads = [threading.Thread(target=work, args=(start,)) for start in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    report.seconds = time.monotonic() - started
    for request, direct, app in sorted(pairs, key=lambda pair: pair[0].index):
        if direct.key() != app.key() or (
            direct.connection() != app.connection() and not closed_by_the_route(request, direct, app)
        ):
            report.findings.append(
                Finding("routes differ", "direct/app", request, f"direct {direct.shown()}; app {app.shown()}")
            )
    report.findings.sort(key=lambda finding: finding.request.index if finding.request else -1)
    return report


# The model servers' errors after which nginx ends the client's connection on the direct route, where the app keeps
# it (docs/ARCHITECTURE.md, "The direct route"): /invocations hands their 400 to the app; InvokeEndpoint all of their
# errors, of which nginx drops keep-alive after a 400, 413, 500 or 501.
NGINX_CLOSES_AFTER = (400, 413, 500, 501)


def closed_by_the_route(request: Generated, direct: Outcome, app: Outcome) -> bool:
    """The documented difference: the direct route closed the connection after a model server error it handed to the
    app (the same answer), where the app's stack kept it."""
    if not direct.closes or app.closes or direct.status is None:
        return False
    if request.path == "/invocations":
        return direct.status == 400
    try:
        original = json.loads(direct.body).get("OriginalStatusCode")
    except (ValueError, AttributeError):
        return False
    return direct.status == 424 and original in NGINX_CLOSES_AFTER


class Watch:
    """A stack's gunicorn workers and log position before the traffic, for `stack_findings` after it."""

    def __init__(self, stack: serve_stack.Stack):
        self.stack, self.workers, self.log_start = stack, stack.gunicorn_workers(), len(stack.log())

    def findings(self, name: str) -> list[Finding]:
        found = []
        workers = self.stack.gunicorn_workers()
        if workers != self.workers:
            found.append(Finding("worker restart", name, None, f"gunicorn workers {self.workers} -> {workers}"))
        status = clients.http_status(self.stack.url + "/ping", timeout=30)
        if status != 200:
            found.append(Finding("ping", name, None, f"/ping answered {status} after the traffic"))
        # nginx writes a request's access line once it is answered: the /ping's line follows every earlier one
        log = processes.wait_for_log(self.stack, '"GET /ping HTTP/1.1" 200', since=self.log_start)
        for alarm in LOG_ALARMS.finditer(log, self.log_start):
            line_start = log.rfind("\n", 0, alarm.start()) + 1
            found.append(Finding("serve log", name, None, log[line_start : line_start + 2000]))
        return found


def memory_bursts(
    port: int, workers: set[int], bursts: int = 10, clients_per_burst: int = 20, body_mb: int = 10
) -> list[dict[int, int]]:
    """`bursts` bursts of `clients_per_burst` concurrent POSTs of a `body_mb` MB body: each worker's VmRSS (kB)
    after each, once settled (a worker trims freed memory after each large body, over a moment). After the first,
    settled means two readings 0.5 s apart within 1%; after the others, within 5% of after the first, or as it is
    after 30 s."""
    body = b"x" * (body_mb << 20)
    after: list[dict[int, int]] = []
    for burst in range(bursts):
        statuses = clients.post_burst(port, body, clients_per_burst)
        assert statuses == [200] * clients_per_burst, f"burst {burst + 1}: {statuses}"
        if not after:
            deadline, rss = time.monotonic() + 30, {pid: processes.resident_kb(pid) for pid in workers}
            while time.monotonic() < deadline:
                time.sleep(0.5)
                rss, before = {pid: processes.resident_kb(pid) for pid in workers}, rss
                if all(abs(rss[pid] - before[pid]) <= 0.01 * before[pid] for pid in workers):
                    break
            after.append(rss)
        else:
            after.append(processes.settled_rss(workers, {pid: after[0][pid] * 1.05 for pid in workers}))
    return after


MEMORY_ENV = {"SAGEMAKER_NGINX_CLIENT_MAX_BODY_SIZE": "11m", "SAGEMAKER_GUNICORN_WORKERS": "2"}


def memory_stack(folder: Path) -> serve_stack.Stack:
    """A stack whose handler reads the whole body (bodies pass through the workers), for `memory_bursts`."""
    return serve_stack.Stack(
        model_dirs.write_code(model_dirs.copy_model(paths.HALF_PLUS_THREE, folder, "model"), model_dirs.PASS_THROUGH),
        env=MEMORY_ENV,
    )


def memory_findings(after: list[dict[int, int]]) -> list[Finding]:
    """A worker whose VmRSS after the last burst is over 5% above its VmRSS after the first."""
    first, last = after[0], after[-1]
    return [
        Finding(
            "memory",
            "memory",
            None,
            f"worker {pid}: {first[pid]} kB after burst 1, {last[pid]} kB after burst {len(after)}",
        )
        for pid in first
        if last[pid] > 1.05 * first[pid]
    ]
