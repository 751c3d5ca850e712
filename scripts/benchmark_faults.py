#!/usr/bin/env python3
"""Faults benchmark: the stack under load, under SIGKILLs of its parts, at exit, and fed bad requests, in one run.

One stack through `serve` (nginx -> gunicorn -> Falcon app -> the real model server, half_plus_three) with a
pass-through input_handler/output_handler pair, and these measurements:
  load     wrk at concurrency 64 for --load-seconds (60): requests, errors (non-2xx answers and socket errors)
  faults   at concurrency 16 (keep-alive clients that reconnect), SIGKILL of the model server, of one gunicorn
           worker, and of the nginx master: failed requests, and seconds from the kill until /ping is 200 again
  exit     SIGTERM to serve: processes of the stack still running, and ports still listening, after serve exits
  errors   malformed and refused requests of every kind the stack answers itself (nginx, gunicorn, the app):
           how many answers are not a JSON `{"error": ...}` body with Content-Type application/json
  sigkill  (another stack) SIGKILL to serve itself: seconds until no process of the stack runs and no port of it
           listens (polled up to 10 s), and what is left then
  memory   (a second stack, handler reading the body) 40 concurrent 10 MB POST /invocations: each gunicorn
           worker's resident memory (VmRSS) before, and once settled (polled up to 30 s) after, as a ratio
Targets (issue 11): 0 errors under load; model server back in <= 5 s; <= 1 failed request for a worker or an nginx
kill; nothing left after exit; every error body JSON; (issue 22) memory after the burst <= 1.2 x before; nothing left
<= 5 s after a SIGKILL of serve.

  .venv/bin/python scripts/benchmark_faults.py [--load-seconds 60] [--json results.json] [--parts memory,...]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "test"))
import clients  # noqa: E402
import model_dirs  # noqa: E402
import paths  # noqa: E402
import ports  # noqa: E402
import processes  # noqa: E402
import serve_stack  # noqa: E402

BODY = b'{"instances": [1.0, 2.0, 5.0]}'
PAIR = """\
def input_handler(data, context):
    return data.read()


def output_handler(response, context):
    return response.content, "application/json"
"""
PARTS = ("load", "faults", "errors", "exit", "memory", "sigkill")
MAX_BODY = "1m"  # SAGEMAKER_NGINX_CLIENT_MAX_BODY_SIZE of the stack, so that a 413 can be provoked


def wrk_load(url: str, seconds: int, connections: int) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(
            f'wrk.method = "POST"\nwrk.body = {json.dumps(BODY.decode())}\n'
            'wrk.headers["Content-Type"] = "application/json"\n'
        )
    out = subprocess.run(
        ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "-s", script.name, url + "/invocations"],
        capture_output=True,
        text=True,
        timeout=seconds + 60,
    ).stdout
    os.unlink(script.name)
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    non_2xx = int((re.search(r"Non-2xx or 3xx responses: (\d+)", out) or [0, 0])[1])
    socket_errors = sum(int(n) for n in re.findall(r"(?:connect|read|write|timeout) (\d+)", out))
    return {
        "connections": connections,
        "seconds": seconds,
        "requests": requests,
        "errors": non_2xx + socket_errors,
        "requests_per_s": round(requests / seconds),
    }


class Load:
    """`count` threads posting BODY over keep-alive connections (reconnecting after a failure), counting
    answers and failures (a non-200 answer, or no answer)."""

    def __init__(self, port: int, count: int):
        self.port, self.ok, self.failed = port, 0, 0
        self.failures: list[str] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(count)]

    def __enter__(self) -> Load:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(30)

    def _run(self) -> None:
        conn = None
        while not self.stop.is_set():
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                conn.request("POST", "/invocations", BODY, {"Content-Type": "application/json"})
                response = conn.getresponse()
                body = response.read()
                if response.status == 200:
                    self.ok += 1
                    continue
                self._fail(f"{response.status} {body[:120]!r}")
                if response.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = None
            except (OSError, http.client.HTTPException) as exc:
                self._fail(f"{type(exc).__name__}: {exc}")
                if conn is not None:
                    conn.close()
                conn = None
                time.sleep(0.05)  # a client's back-off, so that a dead port is not hammered

    def _fail(self, what: str) -> None:
        self.failed += 1
        if len(self.failures) < 5:
            self.failures.append(what)


def kill_and_recover(stack: serve_stack.Stack, target: str) -> dict:
    """SIGKILL one part of the stack under load at concurrency 16; failed requests and seconds to /ping 200."""
    gunicorn = stack.pid_of("gunicorn-supervised")
    pids = {
        "model server": lambda: stack.pid_of("tfs-0"),
        "gunicorn worker": lambda: min(processes.descendants(gunicorn)),
        "nginx master": lambda: stack.pid_of("nginx-supervised"),
    }
    with Load(stack.port, 16) as load:
        time.sleep(2)
        before = load.ok
        killed_at = time.monotonic()
        os.kill(pids[target](), signal.SIGKILL)
        time.sleep(0.05)
        while clients.http_status(stack.url + "/ping", timeout=1) != 200:
            if time.monotonic() - killed_at > 120:
                break
            time.sleep(0.05)
        recovered = time.monotonic() - killed_at
        time.sleep(2)  # requests go on being answered afterwards
    return {
        "target": target,
        "failed_requests": load.failed,
        "seconds_until_ping_200": round(recovered, 2),
        "answered": load.ok,
        "answered_before_kill": before,
        "first_failures": load.failures,
    }


def raw(port: int, data: bytes) -> tuple[int, str, bytes]:
    """Send raw bytes; (status, content type, body) of the answer, or (0, '', b'') when none."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except (TimeoutError, ConnectionResetError):
            pass
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    if not lines[0].startswith("HTTP/"):
        return 0, "", b""
    status = int(lines[0].split()[1])
    content_type = next(
        (line.split(":", 1)[1].strip() for line in lines[1:] if line.lower().startswith("content-type:")), ""
    )
    if any(line.lower() == "transfer-encoding: chunked" for line in lines[1:]):
        body = dechunk(body)
    return status, content_type, body


def dechunk(data: bytes) -> bytes:
    out = b""
    while data:
        size_line, _, rest = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out, data = out + rest[:size], rest[size + 2 :]
    return out


def bad_requests() -> dict[str, bytes]:
    def request(line: str, headers: str = "Host: x\r\n", body: bytes = b"") -> bytes:
        return f"{line}\r\n{headers}Connection: close\r\n\r\n".encode() + body

    post = "POST /invocations HTTP/1.1"
    return {
        "body over the limit (413)": request(
            post,
            "Host: x\r\nContent-Type: application/json\r\nContent-Length: 2000000\r\n",
            b"[" + b"1," * 999_999 + b"1]",
        ),
        "header line too large": request("GET /ping HTTP/1.1", "Host: x\r\nX-Big: " + "a" * 70_000 + "\r\n"),
        "malformed header": request("GET /ping HTTP/1.1", "Host: x\r\nno colon here\r\n"),
        "bad Content-Length": request(post, "Host: x\r\nContent-Length: abc\r\n"),
        "bad Transfer-Encoding": request(post, "Host: x\r\nTransfer-Encoding: gzip, bogus\r\n"),
        "missing Host": request("GET /ping HTTP/1.1", ""),
        "HTTP/3.0 (505)": request("GET /ping HTTP/3.0"),
        "unknown method (501 or 405)": request("FOO /ping HTTP/1.1"),
        "TRACE": request("TRACE /ping HTTP/1.1"),
        "two Content-Type headers": request(
            post, "Host: x\r\nContent-Type: application/json\r\nContent-Type: text/csv\r\nContent-Length: 3\r\n", b"[1]"
        ),
        "too many headers": request(
            "GET /ping HTTP/1.1", "Host: x\r\n" + "".join(f"X-H{i}: v\r\n" for i in range(150))
        ),
        "unknown path (404)": request("GET /nope HTTP/1.1"),
        "wrong method (405)": request("DELETE /invocations HTTP/1.1"),
        "bad JSON (400)": request(post, "Host: x\r\nContent-Type: application/json\r\nContent-Length: 5\r\n", b"{nope"),
        "unsupported Content-Type (415)": request(
            post, "Host: x\r\nContent-Type: image/gif\r\nContent-Length: 3\r\n", b"GIF"
        ),
        "deeply nested JSON": request(
            post, "Host: x\r\nContent-Type: application/json\r\nContent-Length: 4000\r\n", b"[" * 2000 + b"]" * 2000
        ),
        "huge integer": request(
            post, "Host: x\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n", b"9" * 5000
        ),
    }


def error_bodies(port: int) -> dict:
    results, not_json = {}, []
    for name, data in bad_requests().items():
        status, content_type, body = raw(port, data)
        try:
            is_json = content_type.startswith("application/json") and "error" in json.loads(body)
        except ValueError:
            is_json = False
        results[name] = {"status": status, "content_type": content_type, "json": is_json}
        if not is_json:
            not_json.append(name)
    return {"requests": len(results), "not_json": not_json, "answers": results}


def stop_and_count(stack: serve_stack.Stack) -> dict:
    """SIGTERM serve; what of the stack is still running (processes, listening ports) after it exits."""
    pids = stack.processes()
    low, high = map(int, stack.env["SAGEMAKER_SAFE_PORT_RANGE"].split("-"))
    stack_ports = [stack.port, *range(low, high + 1)]
    stack.proc.send_signal(signal.SIGTERM)
    code = stack.proc.wait(120)
    time.sleep(0.5)
    left = [pid for pid in pids if processes.pid_alive(pid)]
    listening = [port for port in stack_ports if ports.listening_addresses(port)]
    return {
        "exit_status": code,
        "processes_before": len(pids),
        "processes_left": len(left),
        "ports_left_listening": listening,
    }


def memory_after_burst(tmp: Path, count: int = 40, body_mb: int = 10) -> dict:
    """A stack whose handler reads the body; the gunicorn workers' VmRSS before and after `count` concurrent
    POSTs of `body_mb` MB."""
    model = model_dirs.write_code(model_dirs.copy_model(paths.HALF_PLUS_THREE, tmp, "memory"), model_dirs.PASS_THROUGH)
    with serve_stack.Stack(model, env={"SAGEMAKER_NGINX_CLIENT_MAX_BODY_SIZE": f"{body_mb + 1}m"}) as stack:
        try:
            clients.post_burst(stack.port, b"x" * 1000, count)  # every connection thread exists
            pids = stack.gunicorn_workers()
            before = {pid: processes.resident_kb(pid) for pid in pids}
            statuses = clients.post_burst(stack.port, b"x" * (body_mb << 20), count)
            after = processes.settled_rss(pids, {pid: before[pid] * 1.2 for pid in pids})
        finally:
            stack.stop()
    return {
        "clients": count,
        "body_mb": body_mb,
        "answered_200": statuses.count(200),
        "rss_kb_before": list(before.values()),
        "rss_kb_after": list(after.values()),
        "worst_ratio": round(max(after[pid] / before[pid] for pid in pids), 2),
    }


def main_stack(tmp: Path, parts: set[str], load_seconds: int, results: dict) -> None:
    """The parts measured on the main stack (the pass-through pair, calling the model server)."""
    model = model_dirs.write_code(model_dirs.copy_model(paths.HALF_PLUS_THREE, tmp, "model"), PAIR)
    stack = serve_stack.Stack(
        model, env={"SAGEMAKER_NGINX_CLIENT_MAX_BODY_SIZE": MAX_BODY, "TF_CPP_MIN_LOG_LEVEL": "2"}
    )
    stack.start()
    try:
        if "load" in parts:
            results["load"] = load = wrk_load(stack.url, load_seconds, 64)
            print(
                f"load: c64 {load_seconds}s: {load['requests']} requests, {load['errors']} errors "
                f"({load['requests_per_s']} req/s)",
                flush=True,
            )
        if "faults" in parts:
            results["faults"] = []
            for target in ("model server", "gunicorn worker", "nginx master"):
                fault = kill_and_recover(stack, target)
                results["faults"].append(fault)
                print(
                    f"SIGKILL {target} under c16: {fault['failed_requests']} failed request(s), /ping 200 again "
                    f"after {fault['seconds_until_ping_200']} s ({fault['answered']} answered)"
                    + (f"; first failures: {fault['first_failures']}" if fault["failed_requests"] else ""),
                    flush=True,
                )
        if "errors" in parts:
            results["errors"] = errors = error_bodies(stack.port)
            print(
                f"error bodies: {errors['requests'] - len(errors['not_json'])} of {errors['requests']} JSON"
                + (f"; not JSON: {errors['not_json']}" if errors["not_json"] else ""),
                flush=True,
            )
        if "exit" in parts:
            results["exit"] = done = stop_and_count(stack)
            print(
                f"exit: SIGTERM -> status {done['exit_status']}, {done['processes_left']} of "
                f"{done['processes_before']} processes left, ports still listening: "
                f"{done['ports_left_listening'] or 'none'}",
                flush=True,
            )
    finally:
        stack.stop()


def sigkill_serve(tmp: Path) -> dict:
    """SIGKILL serve itself; how long until nothing of its stack runs or listens."""
    model = model_dirs.write_code(model_dirs.copy_model(paths.HALF_PLUS_THREE, tmp, "sigkill"), PAIR)
    with serve_stack.Stack(model) as stack:
        try:
            pids = stack.processes()
            stack_ports = [stack.port, *stack.model_server_ports]
            stack.proc.send_signal(signal.SIGKILL)
            started = time.monotonic()
            while True:
                left = pids & set(processes.live_processes())
                listening = [port for port in stack_ports if ports.listening_pids(port) is not None]
                seconds = time.monotonic() - started
                if not left and not listening or seconds > 10:
                    break
                time.sleep(0.05)
        finally:
            stack.stop()
    return {
        "processes_before": len(pids),
        "processes_left": len(left),
        "ports_left_listening": listening,
        "seconds_until_nothing_left": round(seconds, 2) if not left and not listening else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--load-seconds", type=int, default=60)
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"some of {','.join(PARTS)} (default: all)")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="benchmark-faults-") as tmp:
        if "memory" in parts:
            memory = results["memory"] = memory_after_burst(Path(tmp))
            print(
                f"memory: {memory['clients']} x {memory['body_mb']} MB POST ({memory['answered_200']} answered 200): "
                f"worker VmRSS {memory['rss_kb_before']} kB before, {memory['rss_kb_after']} kB after, worst "
                f"{memory['worst_ratio']}x",
                flush=True,
            )
        if "sigkill" in parts:
            killed = results["sigkill"] = sigkill_serve(Path(tmp))
            print(
                f"SIGKILL serve: {killed['processes_left']} of {killed['processes_before']} processes left, ports "
                f"still listening: {killed['ports_left_listening'] or 'none'}, nothing left after "
                f"{killed['seconds_until_nothing_left']} s",
                flush=True,
            )
        if parts & {"load", "faults", "errors", "exit"}:
            main_stack(Path(tmp), parts, args.load_seconds, results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
