#!/usr/bin/env python3
"""Benchmark of the serving stack: requests/s, p50 and p99 at concurrency 1, 8 and 32, in one run.

Targets, each measured through the real `serve` (nginx -> gunicorn -> Falcon app -> model server, default settings):
  direct        the model server's REST :predict, without the proxy
  no script     POST /invocations, default handler
  pair          POST /invocations, pass-through input_handler/output_handler
  handler       POST /invocations, a handler() that posts to context.rest_uri with a requests.Session
  toolkit       POST /invocations, a pass-through inference toolkit script: input_fn returns the body, predict_fn
                calls the served model (ServedModel.request), output_fn returns its answer
Backends:
  model server  the real one (the embedded tfs-model-server, or tensorflow_model_server when on PATH) running
                half_plus_three
  stand-in      a near-zero-cost TFS: nginx answering a canned TFS status and predict body, installed as
                `tensorflow_model_server` on serve's PATH, so serve starts it exactly as it would the real binary;
                it isolates the proxy's own cost
Headlines: pair vs the stand-in at concurrency 8 (target >= 2,500 req/s on 2 cores), and the p50 the proxy adds at
concurrency 1 (pair through nginx minus the stand-in called directly; target < 1 ms); toolkit vs pair against the
stand-in at concurrency 8 (target >= 90%).

  .venv/bin/python scripts/benchmark_proxy.py [--duration 5] [--json results.json]
  .venv/bin/python scripts/benchmark_proxy.py --metrics-overhead --paired-rounds 7 --duration 3   # only: the pair
        vs the stand-in at c8, SAGEMAKER_METRICS off and on, two stacks side by side measured in alternating
        rounds; the median of the requests/s lost (target <= 5%)
  .venv/bin/python scripts/benchmark_proxy.py --backends stand-in --targets pair,toolkit --concurrency 8
  .venv/bin/python scripts/benchmark_proxy.py --paired-rounds 5 --duration 3   # toolkit vs pair only, alternating

Needs nginx and wrk (scripts/install.sh installs both). Timings on a shared machine are noisy: compare figures
of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "test"))
import support  # noqa: E402  (free ports, Stack: serve on free ports)
from sagemaker_tfs.config import Settings  # noqa: E402

MODEL = "half_plus_three"
VERSION = 123
REQUEST_BODY = '{"instances": [1.0, 2.0, 5.0]}'
CONCURRENCY = (1, 8, 32)
SCRIPTS = {
    "no script": None,
    "pair": '''\
def input_handler(data, context):
    return data.read()


def output_handler(response, context):
    return response.content, "application/json"
''',
    "handler": '''\
import requests

session = requests.Session()  # keep-alive to the model server, per worker


def handler(data, context):
    response = session.post(context.rest_uri, data=data.read(), timeout=context.timeout)
    return response.content, "application/json"
''',
    "toolkit": '''\
def input_fn(input_data, content_type):
    return input_data


def predict_fn(data, model):
    return model.request(data)


def output_fn(prediction, accept):
    return prediction
''',
}

STANDIN_STATUS = json.dumps({"model_version_status": [{"version": str(VERSION), "state": "AVAILABLE", "status": {
    "error_code": "OK", "error_message": ""}}]}, indent=1)
STANDIN_PREDICTIONS = '{\n    "predictions": [3.5, 4.0, 5.5\n    ]\n}'
STANDIN_BINARY = '''\
#!/bin/sh
# A near-zero-cost stand-in for tensorflow_model_server: nginx answering canned bodies on --rest_api_port.
for arg; do case "$arg" in --rest_api_port=*) port="${arg#*=}";; esac; done
conf="$STANDIN_DIR/standin-$port.conf"
mkdir -p "$STANDIN_DIR/temp-$port"
sed -e "s/@PORT@/$port/g" -e "s|@TEMP@|$STANDIN_DIR/temp-$port|g" "$STANDIN_DIR/standin.conf.in" > "$conf"
exec nginx -c "$conf" -e stderr
'''


def standin_template() -> str:
    def quoted(text: str) -> str:
        return "'" + text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"

    temp = " ".join(f"{kind}_temp_path @TEMP@;" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    return f"""daemon off;
worker_processes 1;
pid @TEMP@/nginx.pid;
error_log stderr error;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    {temp}
    keepalive_requests 1000000;
    keepalive_timeout 75s;
    server {{
        listen 127.0.0.1:@PORT@;
        default_type application/json;
        location ~ ^/v1/models/[^/:]+$ {{ return 200 {quoted(STANDIN_STATUS)}; }}
        location / {{ return 200 {quoted(STANDIN_PREDICTIONS)}; }}
    }}
}}
"""


_UNIT = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def wrk(url: str, lua: Path, connections: int, duration: int) -> dict:
    out = subprocess.run(["wrk", f"-t{min(2, connections)}", f"-c{connections}", f"-d{duration}s", "--latency",
                          "-s", str(lua), url], capture_output=True, text=True, check=True).stdout
    result = {"requests_per_s": round(float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)))}
    for pct, value, unit in re.findall(r"^\s+(50|99)%\s+([\d.]+)(us|ms|s)\s*$", out, re.M):
        result[f"p{pct}_ms"] = round(float(value) * _UNIT[unit], 3)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    result["non_2xx"] = int(errors.group(1)) if errors else 0
    socket_errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    result["socket_errors"] = sum(map(int, socket_errors.groups())) if socket_errors else 0
    return result


def model_folder(root: Path, script: str | None) -> Path:
    folder = root / "model"
    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(support.HALF_PLUS_THREE / f"{VERSION:08d}", folder / MODEL / str(VERSION))
    if script:
        (folder / "code").mkdir()
        (folder / "code" / "inference.py").write_text(script)
    return folder


def check_answer(url: str) -> None:
    request = urllib.request.Request(url, REQUEST_BODY.encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        body = json.loads(response.read())
    if body != {"predictions": [3.5, 4.0, 5.5]}:
        raise SystemExit(f"{url} answered {body}")


def run_backend(name: str, env: dict[str, str], root: Path, lua: Path, duration: int, table: list,
                targets: list[str], concurrency: list[int]) -> None:
    for target in targets:
        script = SCRIPTS[target]
        stack = support.Stack(model_folder(root, script), env=env)
        try:
            measure(stack, name, target, lua, duration, table, concurrency)
        finally:  # the stack's log holds nginx's access log: megabytes per stack
            stack.log_path.unlink(missing_ok=True)
            shutil.rmtree(stack.runtime_dir, ignore_errors=True)


def paired_rounds(root: Path, lua: Path, duration: int, rounds: int,
                  variants: dict[str, tuple[str, dict[str, str]]]) -> list[float]:
    """Requests/s at c8 of two variants ({label: (target, environment)}), measured alternately on two stacks up
    side by side, so that the machine's changing load weighs on both alike; per round, the second's rate over the
    first's."""
    stacks = {label: support.Stack(model_folder(root / label.replace(" ", "-"), SCRIPTS[target]), env=env)
              for label, (target, env) in variants.items()}
    first, second = stacks
    ratios = []
    try:
        for stack in stacks.values():
            stack.start()
            check_answer(f"{stack.url}/invocations")
        for number in range(1, rounds + 1):
            rates = {label: wrk(f"{stack.url}/invocations", lua, 8, duration)["requests_per_s"]
                     for label, stack in stacks.items()}
            ratios.append(rates[second] / rates[first])
            print(f"round {number}: {first} {rates[first]} req/s, {second} {rates[second]} req/s: "
                  f"{ratios[-1]:.0%}", flush=True)
    finally:
        for stack in stacks.values():
            stack.stop()
            stack.log_path.unlink(missing_ok=True)
            shutil.rmtree(stack.runtime_dir, ignore_errors=True)
    return sorted(ratios)


def measure(stack: support.Stack, name: str, target: str, lua: Path, duration: int, table: list,
            concurrency: list[int]) -> None:
    """The rows of one stack: its target at each concurrency (and the model server directly, once per backend)."""
    with stack:
        low = int(stack.env["SAGEMAKER_SAFE_PORT_RANGE"].split("-")[0])
        urls = {target: f"{stack.url}/invocations"}
        if target == "no script":  # the model server directly, once per backend
            urls = {"direct": f"http://127.0.0.1:{low + 1}/v1/models/{MODEL}:predict", **urls}
        for label, url in urls.items():
            check_answer(url)
            for connections in concurrency:
                row = {"backend": name, "target": label, "concurrency": connections,
                       **wrk(url, lua, connections, duration)}
                table.append(row)
                print(f"{name:12} {label:10} c{connections:<3} {row['requests_per_s']:7} req/s  "
                      f"p50 {row['p50_ms']:7.3f} ms  p99 {row['p99_ms']:7.3f} ms"
                      + (f"  ({row['non_2xx']} not 2xx)" if row["non_2xx"] else "")
                      + (f"  ({row['socket_errors']} socket errors)" if row["socket_errors"] else ""), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=int, default=5, help="seconds per measurement")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--metrics-overhead", action="store_true",
                        help="only the cost of SAGEMAKER_METRICS: the pair vs the stand-in at c8, off and on, in "
                             "alternating rounds (--paired-rounds, default 5)")
    parser.add_argument("--backends", default="stand-in,model server", help="comma-separated (default: both)")
    parser.add_argument("--targets", default=",".join(SCRIPTS), help=f"comma-separated among {', '.join(SCRIPTS)}")
    parser.add_argument("--concurrency", default=",".join(map(str, CONCURRENCY)), help="comma-separated levels")
    parser.add_argument("--paired-rounds", type=int, default=0,
                        help="only toolkit vs pair against the stand-in at c8, in this many alternating rounds "
                             "(with --metrics-overhead: metrics off vs on)")
    args = parser.parse_args(argv)
    backends = args.backends.split(",")
    targets = [t for t in SCRIPTS if t in args.targets.split(",")]
    concurrency = [int(c) for c in args.concurrency.split(",")]
    for tool in ("nginx", "wrk"):
        if not shutil.which(tool):
            raise SystemExit(f"{tool} is not installed (scripts/install.sh installs it)")
    root = Path(tempfile.mkdtemp(prefix="benchmark-proxy-"))
    lua = root / "post.lua"
    lua.write_text(f"wrk.method = 'POST'\nwrk.body = '{REQUEST_BODY}'\nwrk.headers['Content-Type'] = 'application/json'\n")
    standin = root / "standin"
    (standin / "bin").mkdir(parents=True)
    (standin / "standin.conf.in").write_text(standin_template())
    binary = standin / "bin" / "tensorflow_model_server"
    binary.write_text(STANDIN_BINARY)
    binary.chmod(0o755)
    settings = Settings.from_env()  # what serve will use: its defaults unless SAGEMAKER_* variables are set here
    print(f"{os.cpu_count()} cores; gunicorn: {settings.gunicorn_workers} {settings.gunicorn_worker_class} worker(s) "
          f"x {settings.gunicorn_threads} thread(s); body {REQUEST_BODY}; wrk {args.duration} s per row", flush=True)
    table: list[dict] = []
    standin_env = {"PATH": f"{standin / 'bin'}:{os.environ['PATH']}", "STANDIN_DIR": str(standin)}
    if args.metrics_overhead or args.paired_rounds:
        # the pass-through pair with SAGEMAKER_METRICS off and on, or the pair and the toolkit script
        if args.metrics_overhead:
            metrics_env = {**standin_env, **Settings.env_of(metrics=True, metrics_port=support.free_port())}
            variants = {"metrics off": ("pair", standin_env), "metrics on": ("pair", metrics_env)}
        else:
            variants = {"pair": ("pair", standin_env), "toolkit": ("toolkit", standin_env)}
        try:
            ratios = paired_rounds(root, lua, args.duration, args.paired_rounds or 5, variants)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        median = ratios[len(ratios) // 2]
        rounds = ", ".join(f"{r:.0%}" for r in ratios)
        if args.metrics_overhead:
            print(f"\nmetrics on vs off, pair vs the stand-in at c8, median of {len(ratios)} rounds: {1 - median:.1%} "
                  f"of the requests/s lost (target <= 5%; on/off per round {rounds})")
        else:
            print(f"\ntoolkit vs pair against the stand-in at c8, median of {len(ratios)} rounds: {median:.0%} "
                  f"(target >= 90%; rounds {rounds})")
        return 0
    try:
        if "stand-in" in backends:
            run_backend("stand-in", standin_env, root, lua, args.duration, table, targets, concurrency)
        if "model server" in backends:
            run_backend("model server", {}, root, lua, args.duration, table, targets, concurrency)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    def figure(backend: str, target: str, connections: int, key: str) -> float | None:
        return next((r[key] for r in table if (r["backend"], r["target"], r["concurrency"]) == (backend, target,
                                                                                               connections)), None)

    headlines: dict[str, float] = {}
    pair_c8 = figure("stand-in", "pair", 8, "requests_per_s")
    direct_c1 = figure("stand-in", "direct", 1, "p50_ms")
    pair_c1 = figure("stand-in", "pair", 1, "p50_ms")
    print()
    if pair_c8 is not None:
        headlines["pair_standin_c8"] = pair_c8
        print(f"pair vs the stand-in at c8: {pair_c8} req/s (target >= 2500)")
    if pair_c1 is not None and direct_c1 is not None:
        headlines["added_p50_c1_ms"] = pair_c1 - direct_c1
        print(f"p50 added by the proxy at c1: {pair_c1 - direct_c1:.3f} ms (target < 1 ms)")
    toolkit_c8 = figure("stand-in", "toolkit", 8, "requests_per_s")
    if toolkit_c8 is not None and pair_c8:
        headlines["toolkit_vs_pair_standin_c8"] = round(toolkit_c8 / pair_c8, 3)
        print(f"toolkit vs pair against the stand-in at c8: {toolkit_c8} / {pair_c8} req/s = "
              f"{toolkit_c8 / pair_c8:.0%} (target >= 90%)")
    for target in ("no script", "pair", "handler", "toolkit"):
        rate, direct = figure("model server", target, 8, "requests_per_s"), figure("model server", "direct", 8,
                                                                                   "requests_per_s")
        p50, direct_p50 = figure("model server", target, 1, "p50_ms"), figure("model server", "direct", 1, "p50_ms")
        if None not in (rate, direct, p50, direct_p50):
            print(f"model server: {target} reaches {rate / direct:.0%} of the direct rate at c8 and adds "
                  f"{p50 - direct_p50:.3f} ms to the p50 at c1")
    if args.json:
        args.json.write_text(json.dumps({"cores": os.cpu_count(), "duration_s": args.duration, "body": REQUEST_BODY,
                                         "rows": table, **headlines}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
