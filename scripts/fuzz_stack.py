#!/usr/bin/env python3
"""The stack under random traffic (issue 49): seeded random HTTP requests through nginx, then memory bursts.

Four stacks through `serve` (test/stack/random_traffic.py), each with the local runtime API on: no script with the
direct route on (`direct`) and off (`app`), an input_handler/output_handler pair (`pair`) and a toolkit script
(`toolkit`). Request i of the seed (test/stack/generated_requests.py's Traffic: methods and paths, the runtime API,
bodies of every codec, malformed and repeated headers, Content-Encoding, chunked, truncated and oversized bodies)
goes over keep-alive connections to both no-script stacks, whose answers and connection handling are compared, or
to one script stack. Then, on a stack whose handler reads the body, --bursts bursts of 20 concurrent 10 MB POSTs:
each gunicorn worker's VmRSS after the last must be within 5% of after the first.

Findings: a 5xx that is not documented, an error body that is not JSON, an answer without the request id, no
answer, the routes differing, a worker restarted, a traceback or worker exit in serve's log, /ping not 200 after,
memory growing. Each names the request (seed and index: `--requests 1 --first INDEX` sends it alone). Exit 1 on any
but the missing request ids (random_traffic.REPORTED_ONLY).

  .venv/bin/python scripts/fuzz_stack.py [--requests 100000] [--seed 49] [--connections 8] [--bursts 10]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "test"))
sys.path.insert(0, str(REPO / "test" / "stack"))
import random_traffic  # noqa: E402
from generated_requests import Traffic  # noqa: E402

SHOWN = 60  # groups of findings printed, each with its first request


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=49)
    parser.add_argument("--first", type=int, default=0, help="the first request's index (to send one again)")
    parser.add_argument("--connections", type=int, default=8, help="concurrent keep-alive connections per stack")
    parser.add_argument("--bursts", type=int, default=10, help="memory bursts (0: none)")
    args = parser.parse_args()
    traffic = Traffic(args.seed, random_traffic.LIMIT_BYTES)
    indexes = range(args.first, args.first + args.requests)
    with tempfile.TemporaryDirectory(prefix="fuzz-stack-") as tmp:
        print(f"starting the stacks ({', '.join(random_traffic.SCRIPTS)})", flush=True)
        stacks = random_traffic.start_stacks(Path(tmp))
        try:
            watches = {name: random_traffic.Watch(stack) for name, stack in stacks.items()}
            last = [time.monotonic()]

            def progress(done: int) -> None:
                if time.monotonic() - last[0] >= 30:
                    last[0] = time.monotonic()
                    print(f"  {done} of {args.requests} requests", flush=True)

            print(f"seed {args.seed}: requests {indexes.start} to {indexes.stop - 1}", flush=True)
            report = random_traffic.send_traffic(stacks, traffic, indexes, args.connections, progress)
            for name, watch in watches.items():
                report.findings += watch.findings(name)
        finally:
            random_traffic.stop_stacks(stacks)
        if args.bursts:
            print(f"memory: {args.bursts} bursts of 20 concurrent 10 MB POSTs", flush=True)
            with random_traffic.memory_stack(Path(tmp) / "memory") as stack:
                report.memory = random_traffic.memory_bursts(stack.port, stack.gunicorn_workers(), args.bursts)
            report.findings += random_traffic.memory_findings(report.memory)
    print_summary(args, report)
    return 1 if report.failures() else 0


def print_summary(args: argparse.Namespace, report: random_traffic.Report) -> None:
    rate = args.requests / report.seconds if report.seconds else 0.0
    print(f"\nseed {args.seed}: {args.requests} requests in {report.seconds:.0f} s ({rate:.0f}/s)")
    for name, count in report.requests.items():
        statuses = ", ".join(
            f"{status}: {n}" for status, n in sorted(report.statuses[name].items(), key=lambda i: i[0] or 0)
        )
        print(f"  {name:8} {count:7} answers   {statuses}")
    for burst, rss in enumerate(report.memory, start=1):
        if burst in (1, len(report.memory)) or len(report.memory) <= 3:
            print(f"  memory after burst {burst}: " + ", ".join(f"worker {pid} {kb} kB" for pid, kb in rss.items()))
    kinds = report.kinds()
    print(f"findings: {sum(kinds.values())}" + (f" ({dict(kinds)})" if kinds else ""))
    # a group: one what, stack and answer, shown with its first request; the missing request ids (nginx's own
    # error pages: many, and all alike) after the others
    groups = sorted(report.groups().values(), key=lambda found: (found[0].what == "no request id", -len(found)))
    for found in groups[:SHOWN]:
        print(f"  {len(found)} x {found[0]}")
    if len(groups) > SHOWN:
        print(f"  ... and {len(groups) - SHOWN} more groups")


if __name__ == "__main__":
    sys.exit(main())
