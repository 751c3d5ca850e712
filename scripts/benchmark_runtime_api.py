#!/usr/bin/env python3
"""What the local runtime API (SAGEMAKER_LOCAL_RUNTIME_API=true) adds to a request, in one run: InvokeEndpoint
(`POST /endpoints/local/invocations`) against the same request to `/invocations` on the same stack, through the
real `serve` against benchmark_proxy.py's stand-in model server (near-zero cost, so the figures are the stack's own),
for each target: `no script` (/invocations takes the direct route) and `pair` (benchmark_proxy.py's pass-through
input_handler/output_handler, through the app).

  c1   the median of paired differences: one request to each in turn, each on its own keep-alive connection
  c8   requests/s with wrk, in alternating rounds: the runtime API's share of /invocations' rate (median)

  .venv/bin/python scripts/benchmark_runtime_api.py [--targets "no script,pair"] [--pairs 2000] [--rounds 3]
                                                    [--duration 3]

Needs nginx and wrk (scripts/install.sh installs both). Timings on a shared machine are noisy: compare figures of
one run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "test"))
sys.path.insert(0, str(REPO / "scripts"))
import serve_stack  # noqa: E402
from benchmark_proxy import (  # noqa: E402
    REQUEST_BODY,
    SCRIPTS,
    KeptAlive,
    make_standin,
    model_folder,
    wrk,
    wrk_script,
)

RUNTIME_PATH = "/endpoints/local/invocations"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--targets", default="no script,pair")
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=3)
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="benchmark-runtime-api-"))
    env = {**make_standin(root), "SAGEMAKER_LOCAL_RUNTIME_API": "true"}
    lua = wrk_script(root, REQUEST_BODY, "application/json")
    for target in args.targets.split(","):
        folder = root / target.replace(" ", "-")
        folder.mkdir()
        with serve_stack.Stack(model_folder(folder, SCRIPTS[target]), env=env) as stack:
            measure(stack, target, lua, args)
    return 0


def measure(stack: serve_stack.Stack, target: str, lua: Path, args: argparse.Namespace) -> None:
    targets = {
        "/invocations": KeptAlive(stack.port, "/invocations"),
        "InvokeEndpoint": KeptAlive(stack.port, RUNTIME_PATH),
    }
    for kept in targets.values():
        for _ in range(200):  # warm-up
            kept.exchange()
    times: dict[str, list[int]] = {name: [] for name in targets}
    for turn in range(args.pairs):
        for name in list(targets) if turn % 2 else list(targets)[::-1]:
            times[name].append(targets[name].exchange())
    added = statistics.median(b - a for a, b in zip(times["/invocations"], times["InvokeEndpoint"], strict=True)) / 1000
    p50 = {name: statistics.median(t) / 1000 for name, t in times.items()}
    print(
        f"{target}: c1, {args.pairs} pairs: p50 /invocations {p50['/invocations']:.0f} µs, InvokeEndpoint "
        f"{p50['InvokeEndpoint']:.0f} µs; the runtime API adds {added:.0f} µs (median of paired differences)"
    )
    shares = []
    for _ in range(args.rounds):
        plain = wrk(stack.url + "/invocations", lua, 8, args.duration)
        runtime = wrk(stack.url + RUNTIME_PATH, lua, 8, args.duration)
        assert plain["non_2xx"] == runtime["non_2xx"] == 0, (plain, runtime)
        shares.append(runtime["requests_per_s"] / plain["requests_per_s"])
        print(
            f"{target}: c8 round: /invocations {plain['requests_per_s']} req/s, InvokeEndpoint "
            f"{runtime['requests_per_s']} req/s"
        )
    print(
        f"{target}: c8: InvokeEndpoint at {statistics.median(shares):.2f}x /invocations' rate (median of {args.rounds})"
    )


if __name__ == "__main__":
    sys.exit(main())
