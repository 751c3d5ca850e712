#!/usr/bin/env python3
"""Answers that stream (a handler returning `(generator_of_bytes, content_type)`), through the real `serve` (nginx ->
gunicorn's loop workers, SAGEMAKER_GUNICORN_WORKERS=2 -> the app) against benchmark_proxy.py's stand-in model
server (the handler never calls the model), in one run:

  nginx        a handler yields 20 parts 50 ms apart, each a line holding time.time_ns() taken just before its
               yield; the client (http.client, reading the chunked body as it arrives) takes each part's arrival
               minus its stamp, over --streams streams one after the other: p50 (target <= 1 ms), p99 (<= 3 ms)
  runtime-api  the same through the local runtime API (SAGEMAKER_LOCAL_RUNTIME_API=true, its own stack): boto3's
               invoke_endpoint_with_response_stream, the PayloadParts joined into lines (AWS's LineIterator
               pattern): p50 (target <= 2 ms), p99
  concurrent   --concurrent (64) such streams at once through nginx, one thread each: p99 part latency (target
               <= 10 ms); the wall time for all of them over one lone stream's (the median of 3; target <= 1.2x)
  bulk         a 1 GiB stream of 1 MiB parts (one bytes object yielded 1024 times), read and discarded: each gunicorn
               and nginx worker's RSS growth (the most VmRSS seen, every 20 ms, over what it held before; target
               <= 16 MB), nginx's proxy temp files seen during it (its folder and the workers' open files, every 20
               ms; target none), and its rate; then --whole-mib sent as one whole answer against the same size
               streamed, in --rounds alternating rounds (rates from the answer's head to its last byte, so the
               handler's making of the whole body is not counted): the median ratio (target >= 0.8x); a 1 GiB
               whole answer holds 1 GiB in its worker (its RSS growth is shown, and nginx's temp files for it)

  .venv/bin/python scripts/benchmark_streaming.py [--only nginx|runtime-api|concurrent|bulk] [--streams 10]
                                                  [--concurrent 64] [--whole-mib 1024] [--rounds 3] [--json FILE]
  .venv/bin/python scripts/benchmark_streaming.py --quick   # a smoke run: fewer, shorter streams, 64 MiB bulk

Needs nginx (scripts/install.sh) and boto3 (the test extra) for runtime-api. The client runs on the same machine
and its time counts in the latencies (the concurrent threads share one GIL). Benchmarks run alone
(docs/BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import math
import os
import selectors
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "test"))
sys.path.insert(0, str(REPO / "scripts"))
import processes  # noqa: E402
import serve_stack  # noqa: E402
from benchmark_proxy import make_standin, model_folder  # noqa: E402

MEASURES = ("nginx", "runtime-api", "concurrent", "bulk")
ENDPOINT = "local-endpoint"
MIB = 1 << 20
SCRIPT = """\
import json
import time

PART = b"x" * (1 << 20)  # the bulk stream's part, one object yielded again and again


def handler(data, context):
    request = json.loads(data.read())
    kind = request["kind"]
    if kind == "parts":
        return stamped(request["count"], request["interval"]), "text/x-parts"
    if kind == "bulk":
        return (PART for _ in range(request["count"])), "application/octet-stream"
    return b"x" * request["size"], "application/octet-stream"  # whole


def stamped(count, interval):
    for index in range(count):
        if index:
            time.sleep(interval)
        yield f"{index} {time.time_ns()}\\n".encode()
"""


@dataclass
class Row:
    measure: str
    figure: str
    value: float
    unit: str
    target: str = ""  # "<= 1" or ">= 0.8": its limit; "" for none
    note: str = ""

    def met(self) -> bool | None:
        if not self.target:
            return None
        limit = float(self.target[3:])
        return self.value <= limit if self.target.startswith("<=") else self.value >= limit


def percentile(values: list[float], pct: float) -> float:
    """Nearest rank."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(pct / 100 * len(ordered)) - 1)]


def post(port: int, request: dict[str, Any]) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    connection.request("POST", "/invocations", json.dumps(request), {"Content-Type": "application/json"})
    answer = connection.getresponse()
    if answer.status != 200:
        raise SystemExit(f"{request['kind']}: {answer.status} {answer.read()[:300]!r}")
    return connection, answer


def latencies_of(lines: list[bytes], arrived_ns: int) -> list[float]:
    """Each part's arrival minus its stamp, in ms."""
    return [(arrived_ns - int(line.split()[1])) / 1e6 for line in lines]


def stream(port: int, count: int, interval: float) -> tuple[list[float], float]:
    """One stamped stream through nginx: each part's latency in ms, and the stream's wall time in s."""
    started = time.perf_counter()
    connection, answer = post(port, {"kind": "parts", "count": count, "interval": interval})
    buffer, latencies = b"", []
    while data := answer.read1(65536):
        arrived = time.time_ns()
        *whole, buffer = (buffer + data).split(b"\n")
        latencies += latencies_of(whole, arrived)
    connection.close()
    if len(latencies) != count or buffer:
        raise SystemExit(f"a stream gave {len(latencies)} parts of {count}, {buffer!r} left")
    return latencies, time.perf_counter() - started


def latency_rows(measure: str, latencies: list[float], p50_target: str, p99_target: str) -> list[Row]:
    note = f"{len(latencies)} parts"
    return [
        Row(measure, "part latency p50", percentile(latencies, 50), "ms", p50_target, note),
        Row(measure, "part latency p99", percentile(latencies, 99), "ms", p99_target, note),
    ]


def measure_nginx(stack: serve_stack.Stack, args: argparse.Namespace) -> list[Row]:
    for _ in range(2):  # warm-up
        stream(stack.port, args.parts, args.interval)
    latencies: list[float] = []
    for _ in range(args.streams):
        latencies += stream(stack.port, args.parts, args.interval)[0]
    return latency_rows("nginx", latencies, "<= 1", "<= 3")


def measure_runtime_api(stack: serve_stack.Stack, args: argparse.Namespace) -> list[Row]:
    import boto3
    from botocore.config import Config

    client = boto3.client(
        "sagemaker-runtime",
        endpoint_url=stack.url,
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
        config=Config(retries={"max_attempts": 1, "mode": "standard"}, read_timeout=120),
    )
    body = json.dumps({"kind": "parts", "count": args.parts, "interval": args.interval})

    def one() -> list[float]:
        answer = client.invoke_endpoint_with_response_stream(
            EndpointName=ENDPOINT, Body=body, ContentType="application/json"
        )
        buffer, latencies = b"", []
        for event in answer["Body"]:  # PayloadParts need not align with the container's writes: a line buffer
            arrived = time.time_ns()
            *whole, buffer = (buffer + event["PayloadPart"]["Bytes"]).split(b"\n")
            latencies += latencies_of(whole, arrived)
        if len(latencies) != args.parts or buffer:
            raise SystemExit(f"a runtime API stream gave {len(latencies)} parts of {args.parts}, {buffer!r} left")
        return latencies

    for _ in range(2):  # warm-up
        one()
    latencies = [value for _ in range(args.streams) for value in one()]
    return latency_rows("runtime-api", latencies, "<= 2", "")


def measure_concurrent(stack: serve_stack.Stack, args: argparse.Namespace) -> list[Row]:
    """`args.concurrent` streams at once, read by one thread through a selector: a thread per stream would make the
    client's own turns for the GIL part of the latency measured."""
    stream(stack.port, args.parts, args.interval)  # warm-up
    lone = statistics.median(stream(stack.port, args.parts, args.interval)[1] for _ in range(3))
    body = json.dumps({"kind": "parts", "count": args.parts, "interval": args.interval}).encode()
    head = (  # HTTP/1.0: nginx sends the parts raw, no chunk sizes between the lines (it reads them chunked)
        f"POST /invocations HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    selector = selectors.DefaultSelector()
    received: dict[socket.socket, bytes] = {}
    latencies: list[float] = []
    later: list[float] = []  # the parts after each stream's first: the 64 starts at once are not in them
    started = time.perf_counter()
    for _ in range(args.concurrent):
        client = socket.create_connection(("127.0.0.1", stack.port))
        client.sendall(head + body)
        received[client] = b""
        selector.register(client, selectors.EVENT_READ)
    heads: dict[socket.socket, bool] = {}
    while received:
        for key, _ in selector.select():
            client = key.fileobj
            assert isinstance(client, socket.socket)
            data = client.recv(65536)
            arrived = time.time_ns()
            if not data:
                selector.unregister(client)
                client.close()
                if received.pop(client):
                    raise SystemExit("a stream ended inside a line")
                continue
            buffer = received[client] + data
            if not heads.get(client):
                if b"\r\n\r\n" not in buffer:
                    received[client] = buffer
                    continue
                status, _, buffer = buffer.partition(b"\r\n\r\n")
                if not status.startswith(b"HTTP/1.1 200"):
                    raise SystemExit(f"a stream was answered {status[:80]!r}")
                heads[client] = True
            *whole, received[client] = buffer.split(b"\n")
            latencies += latencies_of(whole, arrived)
            later += latencies_of([line for line in whole if not line.startswith(b"0 ")], arrived)
    wall = time.perf_counter() - started
    if len(latencies) != args.concurrent * args.parts:
        raise SystemExit(f"{len(latencies)} parts of {args.concurrent * args.parts}")
    name = f"{args.concurrent} streams"
    return [
        Row(name, "part latency p50", percentile(latencies, 50), "ms", "", f"{len(latencies)} parts"),
        Row(name, "part latency p99", percentile(latencies, 99), "ms", "<= 10", f"{len(latencies)} parts"),
        Row(name, "p99 after the first parts", percentile(later, 99), "ms", "", f"{len(later)} parts"),
        Row(name, "wall / one lone stream", wall / lone, "x", "<= 1.2", f"{wall:.2f} s / {lone:.2f} s"),
    ]


def worker_pids(stack: serve_stack.Stack) -> dict[int, str]:
    """The gunicorn and nginx workers: {pid: 'gunicorn worker <pid>' / 'nginx worker <pid>'}."""
    found = {pid: f"gunicorn worker {pid}" for pid in stack.gunicorn_workers()}
    for pid in processes.descendants(stack.pid_of("nginx-supervised")):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"worker process" in command:
            found[pid] = f"nginx worker {pid}"
    if not any(name.startswith("nginx") for name in found.values()) or len(found) < 2:
        raise SystemExit(f"workers not found: {found}")
    return found


class Watch(threading.Thread):
    """Every 20 ms: each pid's VmRSS (the most seen kept), and any file in nginx's proxy temp folder or open by an
    nginx worker under it."""

    def __init__(self, pids: dict[int, str], temp: Path) -> None:
        super().__init__(daemon=True)
        self.pids, self.temp = pids, temp
        self.peak_kb = {pid: processes.resident_kb(pid) for pid in pids}
        self.temp_files: set[str] = set()
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.02):
            self.sample()
        self.sample()

    def sample(self) -> None:
        for pid in self.pids:
            try:
                self.peak_kb[pid] = max(self.peak_kb[pid], processes.resident_kb(pid))
            except (OSError, ValueError):
                pass
        self.temp_files |= temp_files(self.temp)
        for pid, name in self.pids.items():
            if name.startswith("nginx"):
                try:
                    for fd in Path(f"/proc/{pid}/fd").iterdir():
                        target = os.readlink(fd)
                        if target.startswith(str(self.temp)):
                            self.temp_files.add(target)
                except OSError:
                    pass

    def __enter__(self) -> Watch:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.join()


def temp_files(folder: Path) -> set[str]:
    return {str(path) for path in folder.rglob("*") if not path.is_dir()}


def transfer(port: int, request: dict[str, Any], expected: int) -> float:
    """One answer read and discarded: its rate in GiB/s, from its head to its last byte."""
    connection, answer = post(port, request)
    started = time.perf_counter()
    buffer, received = bytearray(MIB), 0
    while count := answer.readinto(buffer):
        received += count
    took = time.perf_counter() - started
    connection.close()
    if received != expected:
        raise SystemExit(f"{request['kind']}: {received} bytes of {expected}")
    return received / took / (1 << 30)


def measure_bulk(stack: serve_stack.Stack, args: argparse.Namespace) -> list[Row]:
    for _ in range(4):  # warm-up, likely on both workers
        transfer(stack.port, {"kind": "bulk", "count": 16}, 16 * MIB)
    pids = worker_pids(stack)
    temp = stack.runtime_dir / "nginx" / "proxy"
    before = temp_files(temp)
    with Watch(pids, temp) as watch:
        start_kb = dict(watch.peak_kb)
        streamed_rate = transfer(stack.port, {"kind": "bulk", "count": args.bulk_mib}, args.bulk_mib * MIB)
    new_files = (watch.temp_files | temp_files(temp)) - before
    size = f"{args.bulk_mib} MiB"
    rows = [
        Row("bulk", f"RSS growth, {name}", (watch.peak_kb[pid] - start_kb[pid]) / 1000, "MB", "<= 16", size)
        for pid, name in sorted(pids.items(), key=lambda item: item[1])
    ]
    rows.append(Row("bulk", "nginx temp files", len(new_files), "", "<= 0", ", ".join(sorted(new_files))[:60]))
    rows.append(Row("bulk", "streamed rate", streamed_rate, "GiB/s", "", size))
    ratios, whole_rates, stream_rates = [], [], []
    whole_size = args.whole_mib * MIB
    with Watch(pids, temp) as whole_watch:  # from before the first whole answer: a worker frees one a moment late
        whole_start_kb = dict(whole_watch.peak_kb)
        transfer(stack.port, {"kind": "whole", "size": whole_size}, whole_size)  # warm-up
        for turn in range(args.rounds):
            rates = {}
            for kind in ("whole", "bulk") if turn % 2 == 0 else ("bulk", "whole"):
                request = {"kind": kind, "size": whole_size, "count": args.whole_mib}
                rates[kind] = transfer(stack.port, request, whole_size)
            whole_rates.append(rates["whole"])
            stream_rates.append(rates["bulk"])
            ratios.append(rates["bulk"] / rates["whole"])
    whole_note = f"{args.whole_mib} MiB each, {args.rounds} rounds"
    most = max(whole_watch.peak_kb[pid] - whole_start_kb[pid] for pid in pids)
    return [
        *rows,
        Row("bulk", "whole answer rate", statistics.median(whole_rates), "GiB/s", "", whole_note),
        Row("bulk", "same size streamed rate", statistics.median(stream_rates), "GiB/s", "", whole_note),
        Row("bulk", "streamed / whole rate", statistics.median(ratios), "x", ">= 0.8", whole_note),
        Row("bulk", "RSS growth, whole answers", most / 1000, "MB", "", "the most of any worker; no target"),
        Row("bulk", "nginx temp files, whole answers", len(whole_watch.temp_files - before), "", "", "no target"),
    ]


RUNS: dict[str, Callable[[serve_stack.Stack, argparse.Namespace], list[Row]]] = {
    "nginx": measure_nginx,
    "runtime-api": measure_runtime_api,
    "concurrent": measure_concurrent,
    "bulk": measure_bulk,
}


@contextlib.contextmanager
def stack_of(root: Path, name: str, env: dict[str, str]) -> Iterator[serve_stack.Stack]:
    """A stack with SCRIPT (its model folder in root/name), stopped and its files removed on the way out."""
    folder = root / name
    folder.mkdir()
    stack = serve_stack.Stack(model_folder(folder, SCRIPT), env={**env, "SAGEMAKER_GUNICORN_WORKERS": "2"})
    try:
        with stack:
            yield stack
    finally:
        stack.log_path.unlink(missing_ok=True)
        shutil.rmtree(stack.runtime_dir, ignore_errors=True)


def show(rows: list[Row]) -> None:
    print(f"\n{'measure':<12} {'figure':<34} {'value':>10}  {'unit':<6} {'target':<9}    note")
    for row in rows:
        met = row.met()
        mark = " " if met is None else "✓" if met else "✗"
        target = "0" if row.target == "<= 0" else row.target
        print(f"{row.measure:<12} {row.figure:<34} {row.value:>10.3f}  {row.unit:<6} {target:<9} {mark}  {row.note}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--only", choices=MEASURES, action="append", help="run this measure only (repeatable)")
    parser.add_argument("--streams", type=int, help="streams of nginx and runtime-api (10; --quick 3)")
    parser.add_argument("--concurrent", type=int, help="streams at once (64; --quick 16)")
    parser.add_argument("--parts", type=int, help="parts of a stamped stream (20; --quick 10)")
    parser.add_argument("--interval-ms", type=float, help="between its parts (50; --quick 20)")
    parser.add_argument("--bulk-mib", type=int, help="the bulk stream's size (1024; --quick 64)")
    parser.add_argument("--whole-mib", type=int, help="the whole answer's size, and its streamed twin's (1024)")
    parser.add_argument("--rounds", type=int, help="whole vs streamed rounds (3; --quick 1)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: a few seconds per measure")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)
    defaults = dict(streams=3, concurrent=16, parts=10, interval_ms=20, bulk_mib=64, whole_mib=64, rounds=1)
    if not args.quick:
        defaults = dict(streams=10, concurrent=64, parts=20, interval_ms=50, bulk_mib=1024, whole_mib=1024, rounds=3)
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    args.interval = args.interval_ms / 1000
    chosen = args.only or list(MEASURES)
    print(
        f"{args.parts} parts {args.interval_ms:g} ms apart per stream, {args.streams} streams, {args.concurrent} at "
        f"once; bulk {args.bulk_mib} MiB streamed; whole {args.whole_mib} MiB vs the same streamed (the worker "
        f"holds a whole answer in memory: --whole-mib 256 where RAM is short)",
        flush=True,
    )
    root = Path(tempfile.mkdtemp(prefix="benchmark-streaming-"))
    rows: list[Row] = []
    try:
        standin = make_standin(root)
        configurations = {
            "plain": ({}, [m for m in chosen if m != "runtime-api"]),
            "runtime-api": ({"SAGEMAKER_LOCAL_RUNTIME_API": "true"}, [m for m in chosen if m == "runtime-api"]),
        }
        for name, (env, measures) in configurations.items():
            if not measures:
                continue
            with stack_of(root, name, {**standin, **env}) as stack:
                for measure in measures:
                    started = time.perf_counter()
                    rows += RUNS[measure](stack, args)
                    print(f"{measure}: {time.perf_counter() - started:.1f} s", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    show(rows)
    if args.json:
        Path(args.json).write_text(json.dumps([{**asdict(row), "met": row.met()} for row in rows], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
