#!/usr/bin/env python3
"""Benchmark of the serving stack: requests/s, p50 and p99 at concurrency 1, 8 and 32, in one run.

Targets (the names --targets takes), each but the reference measured through the real `serve` (nginx -> gunicorn ->
Falcon app -> model server, default settings):
  reference           stand-in backend only: a bare nginx (access log on, keep-alive upstream, its own config in the
                      temporary folder) proxying POST /invocations straight to a stand-in of its own; the upper bound
                      of any proxy
  no script           POST /invocations, no script: plain TFS JSON takes the direct route (nginx -> model server)
                      (also measures `direct`: the model server's REST :predict, without the proxy); and, on the
                      same stack, `no script: named model` (tfs-model-name in the custom attributes, as
                      TensorFlowPredictor(model_name=...) sends it: the direct route too), `no script: CSV` (through
                      the app), `no script: flat list` (nginx sends it to
                      the app by its body: model server backend only, to compare with the route off) and `no script:
                      1 MB` / `10 MB` (an {"instances": ...} body, at c1)
  no script (app)     the same rows with SAGEMAKER_NGINX_DIRECT_INVOCATIONS=false: every request through the app
  pair                POST /invocations, pass-through input_handler/output_handler
  handler (requests)  POST /invocations, a handler() that posts to context.rest_uri with a requests.Session
  handler (session)   POST /invocations, a handler() that posts to context.rest_uri with context.session, the pooled
                      client the container offers
  toolkit             POST /invocations, a pass-through inference toolkit script: input_fn returns the body,
                      predict_fn calls the served model (ServedModel.request), output_fn returns its answer
A target whose first request does not get the expected answer is reported as "failed: <reason>"; the others run on.
Backends:
  model server  the real one (the embedded tfs-model-server, or tensorflow_model_server when on PATH) running
                half_plus_three
  stand-in      a near-zero-cost TFS: nginx answering a canned TFS status and predict body, installed as
                `tensorflow_model_server` on serve's PATH, so serve starts it exactly as it would the real binary;
                it isolates the proxy's own cost
Headlines, against the stand-in, each with its target and a check mark or a cross: requests/s at concurrency 8 of
no script, no script: named model, no script (app), pair, handler (session) and toolkit as a ratio of the
reference's (targets: no script and named model >= 0.85x, pair >= 0.25x); the p50 the no-script path and the named
model add at concurrency 1 over what the reference adds (each over the stand-in called directly; target <= 0.015
ms); CSV, flat list and large bodies with the direct route on vs off (no target; the flat list and
CSV never reach the model server on the direct route: they should stay close to the route off);
handler (session) vs pair at concurrency 8 (target >= 90%); the pair's requests/s at concurrency 8 (target >=
2,500 on 2 cores) and the p50 it adds at concurrency 1 (target < 1 ms); toolkit vs pair at concurrency 8 (target
>= 90%).

  .venv/bin/python scripts/benchmark_proxy.py [--duration 5] [--json results.json]
  .venv/bin/python scripts/benchmark_proxy.py --metrics-overhead --paired-rounds 7 --duration 3   # only: the pair
        vs the stand-in at c8, SAGEMAKER_METRICS off and on, two stacks side by side measured in alternating
        rounds; the median of the requests/s lost (target <= 5%)
  .venv/bin/python scripts/benchmark_proxy.py --backends stand-in --targets pair,toolkit --concurrency 8
  .venv/bin/python scripts/benchmark_proxy.py --backends stand-in --targets "reference,no script,handler (session)"
  .venv/bin/python scripts/benchmark_proxy.py --paired-rounds 5 --duration 3   # toolkit vs pair only, alternating
  .venv/bin/python scripts/benchmark_proxy.py --direct-rounds 5 --duration 3   # only: no script (direct route),
        plain and named model, vs the reference at c8 and c1, alternating on a loaded machine; the medians of the c8
        ratios (target >= 0.85x) and of the p50 added at c1 over what the reference adds (target <= 0.015 ms)
  .venv/bin/python scripts/benchmark_proxy.py --latency-pairs 20000   # only: the c1 latency no script (plain, named
        model, with a client's request id) adds over the reference, as the median of paired differences (one
        request to each target in turn on keep-alive connections: drift cancels); target <= 15 µs
  .venv/bin/python scripts/benchmark_proxy.py --fallback-rounds 5 --duration 2   # only: a flat list (nginx sends it
        to the app by its body) against the real model server at c8, route off vs on, alternating rounds
  .venv/bin/python scripts/benchmark_proxy.py --before fa3611f [--rounds 3] [--duration 5]   # only: this tree against
        the code of a commit (a git worktree of it, its package first on serve's PYTHONPATH), side by side on the
        stand-in, in alternating rounds (the order turning each round): no script, named model and pair (--targets
        picks among them) at each --concurrency, and the reference (a bare nginx in front of the tree's stand-in);
        medians of the per-round ratios; at c1 also the latency each adds over its own stand-in, in 5,000 paired
        turns (one request to each in turn), against what the reference adds over the same stand-in. Targets
        (issue "The default path back at the limit"): no script and named model >= 0.95x the commit's at every
        level, >= 0.85x the reference at c8, p50 at c1 within 20 µs of the reference's; the pair >= 0.95x the
        commit's. With --guard F, no reference, and exit 1 when a median ratio to the commit is below 1 - F
        (scripts/bench-guard.sh)

Needs nginx and wrk (scripts/install.sh installs both). Timings on a shared machine are noisy: compare figures
of one run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import operator
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "test"))
import paths  # noqa: E402
import ports  # noqa: E402
import processes  # noqa: E402
import serve_stack  # noqa: E402
from sagemaker_tfs.config import Settings  # noqa: E402
from sagemaker_tfs.stack import nginx  # noqa: E402  (the product's nginx settings, which the reference mirrors)

MODEL = "half_plus_three"
VERSION = 123
REQUEST_BODY = '{"instances": [1.0, 2.0, 5.0]}'
CONCURRENCY = (1, 8, 32)
SCRIPTS = {
    "no script": None,
    "no script (app)": None,
    "pair": """\
def input_handler(data, context):
    return data.read()


def output_handler(response, context):
    return response.content, "application/json"
""",
    "handler (requests)": """\
import requests

session = requests.Session()  # keep-alive to the model server, per worker


def handler(data, context):
    response = session.post(context.rest_uri, data=data.read(), timeout=context.timeout)
    return response.content, "application/json"
""",
    "handler (session)": """\
def handler(data, context):
    response = context.session.post(context.rest_uri, data=data.read(), timeout=context.timeout)
    return response.content, "application/json"
""",
    "toolkit": """\
def input_fn(input_data, content_type):
    return input_data


def predict_fn(data, model):
    return model.request(data)


def output_fn(prediction, accept):
    return prediction
""",
}
REFERENCE = "reference"
APP_ONLY = {"no script (app)": {"SAGEMAKER_NGINX_DIRECT_INVOCATIONS": "false"}}  # extra settings of a target
# More requests on the no-script stacks: label suffix -> (body, Content-Type, expected predictions or None (any 200),
# backends, concurrency levels or None (the run's), other headers).
MB_INSTANCES = 1_000_000 // len("1.0, ")
NAMED = {"X-Amzn-SageMaker-Custom-Attributes": f"tfs-model-name={MODEL}"}  # TensorFlowPredictor(model_name=...)
NO_SCRIPT_BODIES = {
    "named model": (REQUEST_BODY, "application/json", [3.5, 4.0, 5.5], ("stand-in", "model server"), None, NAMED),
    "CSV": ("1.0\n2.0\n5.0", "text/csv", [3.5, 4.0, 5.5], ("stand-in", "model server"), None, {}),
    "flat list": ("[1.0, 2.0, 5.0]", "application/json", [[3.5, 4.0, 5.5]], ("model server",), None, {}),
    "1 MB": (
        '{"instances": [' + ", ".join(["1.0"] * MB_INSTANCES) + "]}",
        "application/json",
        None,
        ("stand-in", "model server"),
        (1,),
        {},
    ),
    "10 MB": (
        '{"instances": [' + ", ".join(["1.0"] * (10 * MB_INSTANCES)) + "]}",
        "application/json",
        None,
        ("stand-in", "model server"),
        (1,),
        {},
    ),
}
TARGETS = (REFERENCE, *SCRIPTS)

STANDIN_STATUS = json.dumps(
    {
        "model_version_status": [
            {"version": str(VERSION), "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}
        ]
    },
    indent=1,
)
STANDIN_PREDICTIONS = '{\n    "predictions": [3.5, 4.0, 5.5\n    ]\n}'
STANDIN_BINARY = """\
#!/bin/sh
# A near-zero-cost stand-in for tensorflow_model_server: nginx answering canned bodies on --rest_api_port, and on
# --port a gRPC server answering HandleReloadConfigRequest (a multi-model endpoint's loads) with an empty success.
for arg; do case "$arg" in --rest_api_port=*) port="${arg#*=}";; --port=*) grpc_port="${arg#*=}";; esac; done
[ -z "$grpc_port" ] || "$STANDIN_PYTHON" "$STANDIN_DIR/grpc_standin.py" "$grpc_port" &
conf="$STANDIN_DIR/standin-$port.conf"
mkdir -p "$STANDIN_DIR/temp-$port"
sed -e "s/@PORT@/$port/g" -e "s|@TEMP@|$STANDIN_DIR/temp-$port|g" "$STANDIN_DIR/standin.conf.in" > "$conf"
exec nginx -c "$conf" -e stderr
"""


GRPC_STANDIN = """\
import sys
from concurrent.futures import ThreadPoolExecutor

import grpc

reload = grpc.unary_unary_rpc_method_handler(lambda request, context: b"")  # ReloadConfigResponse{}: success
server = grpc.server(ThreadPoolExecutor(2))
server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
    "tensorflow.serving.ModelService", {"HandleReloadConfigRequest": reload}),))
server.add_insecure_port(f"127.0.0.1:{sys.argv[1]}")
server.start()
server.wait_for_termination()
"""


def make_standin(root: Path) -> dict[str, str]:
    """The stand-in installed as `tensorflow_model_server` in root/standin/bin; returns the environment that puts
    it first on PATH (for serve, or anything that starts tensorflow_model_server)."""
    standin = root / "standin"
    (standin / "bin").mkdir(parents=True)
    (standin / "standin.conf.in").write_text(standin_template())
    (standin / "grpc_standin.py").write_text(GRPC_STANDIN)
    binary = standin / "bin" / "tensorflow_model_server"
    binary.write_text(STANDIN_BINARY)
    binary.chmod(0o755)
    return {
        "PATH": f"{standin / 'bin'}:{os.environ['PATH']}",
        "STANDIN_DIR": str(standin),
        "STANDIN_PYTHON": sys.executable,
    }


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
    client_max_body_size 0;
    server {{
        listen 127.0.0.1:@PORT@;
        default_type application/json;
        location ~ ^/v1/models/[^/:]+$ {{ return 200 {quoted(STANDIN_STATUS)}; }}
        location / {{ return 200 {quoted(STANDIN_PREDICTIONS)}; }}
    }}
}}
"""


def reference_config(folder: Path, port: int, backend_port: int) -> str:
    """A bare nginx with the product's front settings (worker_processes, the access log's format and buffer,
    keep-alive upstream) proxying POST /invocations straight to the stand-in's :predict: what any proxy costs at the
    least."""
    template = nginx.TEMPLATE.read_text()
    timed = re.search(r"^\s*(log_format timed .*?;)$", template, re.M | re.S)
    logged_id = re.search(r"^\s*(map \$\$sent_http_x_amzn_requestid .*?\})$", template, re.M | re.S)
    logged = re.search(r"^\s*access_log /dev/stdout timed( [^;]*)?;$", template, re.M)
    if timed is None or logged_id is None or logged is None:
        raise SystemExit(f"no log_format timed, its id map or access_log in {nginx.TEMPLATE}: update reference_config")
    temp = " ".join(f"{kind}_temp_path {folder}/{kind};" for kind in nginx.TEMP_FOLDERS)
    return f"""daemon off;
{nginx.user_directive(None)}worker_processes auto;
pid {folder}/nginx.pid;
error_log stderr error;
events {{ worker_connections 4096; }}
http {{
    {timed.group(1).replace("$$", "$")}
    {logged_id.group(1).replace("$$", "$")}
    access_log {folder}/access.log timed{logged.group(1) or ""};
    {temp}
    client_body_buffer_size 1m;
    keepalive_timeout 75s;
    sendfile on;
    tcp_nodelay on;
    upstream standin {{
        server 127.0.0.1:{backend_port};
        keepalive 64;
    }}
    server {{
        listen 127.0.0.1:{port};
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        proxy_set_header Host $host;
        location = /invocations {{ proxy_pass http://standin/v1/models/{MODEL}:predict; }}
    }}
}}
"""


@contextlib.contextmanager
def reference_proxy(root: Path, standin: Path, backend: int | None = None) -> Iterator[str]:
    """The reference nginx and a stand-in of its own (started as serve starts one), each on a free loopback port, or
    in front of the stand-in listening on `backend` (a stack's: the same backend process for both); yields the
    reference's /invocations URL. What it started is stopped and its logs removed on the way out, error or not
    (their other files are in `root`)."""
    folder = root / "reference"
    folder.mkdir()
    port, backend_port = ports.free_port_range(2)
    config = folder / "nginx.conf"
    config.write_text(reference_config(folder, port, backend or backend_port))
    own_standin = (
        [standin / "bin" / "tensorflow_model_server", f"--rest_api_port={backend_port}"],
        {"STANDIN_DIR": str(standin)},
        backend_port,
    )
    with contextlib.ExitStack() as started:
        for args, env, listening in (
            *((own_standin,) if backend is None else ()),
            (nginx.command(config, nginx.version()), {}, port),
        ):
            process = processes.Background(args, env=env, stop_timeout=10)
            started.callback(process.log_path.unlink, missing_ok=True)
            started.enter_context(process)
            process.wait_until(
                lambda port=listening: ports.port_is_open(port), timeout=30, what=f"listening on {listening}"
            )
        yield f"http://127.0.0.1:{port}/invocations"


_UNIT = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def wrk(url: str, lua: Path, connections: int, duration: int) -> dict:
    out = subprocess.run(
        ["wrk", f"-t{min(2, connections)}", f"-c{connections}", f"-d{duration}s", "--latency", "-s", str(lua), url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    result = {
        "requests_per_s": round(float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))),
        "requests": int(re.search(r"(\d+) requests in", out).group(1)),
    }
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
    shutil.copytree(paths.HALF_PLUS_THREE / f"{VERSION:08d}", folder / MODEL / str(VERSION))
    if script:
        (folder / "code").mkdir()
        (folder / "code" / "inference.py").write_text(script)
    return folder


class WrongAnswer(Exception):
    """A target's first request did not get the expected answer: the target is reported failed, not measured."""


def check_answer(
    url: str,
    body: str = REQUEST_BODY,
    content_type: str = "application/json",
    expected: tuple | None = (3.5, 4.0, 5.5),
    headers: dict[str, str] | None = None,
) -> None:
    """The first request's answer is 200 with the `expected` predictions (None: any 200); else WrongAnswer."""
    request = urllib.request.Request(url, body.encode(), {"Content-Type": content_type, **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
    except urllib.error.HTTPError as exc:
        raise WrongAnswer(f"{exc.code} {exc.read()[:300].decode(errors='replace')}") from None
    except OSError as exc:
        raise WrongAnswer(str(exc)) from None
    try:
        answer = json.loads(body)
    except ValueError:
        answer = None
    if expected is not None and answer != {"predictions": list(expected)}:
        raise WrongAnswer(f"answered {body[:300].decode(errors='replace')}")


def run_backend(
    name: str,
    env: dict[str, str],
    root: Path,
    lua: Path,
    duration: int,
    table: list,
    targets: list[str],
    concurrency: list[int],
) -> None:
    for target in (t for t in targets if t in SCRIPTS):
        script = SCRIPTS[target]
        stack = serve_stack.Stack(model_folder(root, script), env={**env, **APP_ONLY.get(target, {})})
        try:
            measure(stack, name, target, lua, duration, table, concurrency)
        finally:  # the stack's log holds nginx's access log: megabytes per stack
            stack.log_path.unlink(missing_ok=True)
            shutil.rmtree(stack.runtime_dir, ignore_errors=True)


def paired_rounds(
    root: Path, lua: Path, duration: int, rounds: int, variants: dict[str, tuple[str, dict[str, str]]]
) -> list[float]:
    """Requests/s at c8 of two variants ({label: (target, environment)}), measured alternately on two stacks up
    side by side, so that the machine's changing load weighs on both alike; per round, the second's rate over the
    first's."""
    stacks = {
        label: serve_stack.Stack(
            model_folder(root / label.replace(" ", "-"), SCRIPTS[target]), env={**env, **APP_ONLY.get(target, {})}
        )
        for label, (target, env) in variants.items()
    }
    first, second = stacks
    ratios = []
    try:
        for label, stack in stacks.items():
            stack.start()
            try:
                check_answer(f"{stack.url}/invocations")
            except WrongAnswer as exc:
                raise SystemExit(f"{label} failed: {exc}") from None
        for number in range(1, rounds + 1):
            rates = {
                label: wrk(f"{stack.url}/invocations", lua, 8, duration)["requests_per_s"]
                for label, stack in stacks.items()
            }
            ratios.append(rates[second] / rates[first])
            print(
                f"round {number}: {first} {rates[first]} req/s, {second} {rates[second]} req/s: {ratios[-1]:.0%}",
                flush=True,
            )
    finally:
        for stack in stacks.values():
            stack.stop()
            stack.log_path.unlink(missing_ok=True)
            shutil.rmtree(stack.runtime_dir, ignore_errors=True)
    return sorted(ratios)


def direct_rounds(root: Path, lua: Path, standin: Path, env: dict[str, str], duration: int, rounds: int) -> None:
    """No script (the direct route), plain and naming its model, vs the reference, all against the stand-in,
    measured alternately so that the machine's changing load weighs on all alike: per round the c8 rate ratios and
    the p50 each adds at c1 over what the reference adds (both over the stand-in called directly); prints each
    round and the medians with their targets."""
    named = wrk_script(root, REQUEST_BODY, "application/json", NAMED)
    ratios: dict[str, list[float]] = {"no script": [], "named model": []}
    added: dict[str, list[float]] = {"no script": [], "named model": []}
    with reference_proxy(root, standin) as reference, serve_stack.Stack(model_folder(root, None), env=env) as stack:
        low = int(stack.env["SAGEMAKER_SAFE_PORT_RANGE"].split("-")[0])
        urls = {
            "reference": (reference, lua),
            "no script": (f"{stack.url}/invocations", lua),
            "named model": (f"{stack.url}/invocations", named),
            "stand-in": (f"http://127.0.0.1:{low + 1}/v1/models/{MODEL}:predict", lua),
        }
        for url, _ in urls.values():
            check_answer(url)
        check_answer(urls["named model"][0], headers=NAMED)
        for number in range(1, rounds + 1):
            c8 = {
                label: wrk(url, script, 8, duration)["requests_per_s"]
                for label, (url, script) in urls.items()
                if label != "stand-in"
            }
            c1 = {label: wrk(url, script, 1, duration)["p50_ms"] for label, (url, script) in urls.items()}
            for label in ratios:
                ratios[label].append(c8[label] / c8["reference"])
                added[label].append(c1[label] - c1["reference"])
            print(
                f"round {number}: c8 req/s "
                + ", ".join(f"{label} {rate}" for label, rate in c8.items())
                + "; c1 p50 ms "
                + ", ".join(f"{label} {p50:.3f}" for label, p50 in c1.items()),
                flush=True,
            )
    for label in ratios:
        ratio, p50 = sorted(ratios[label])[rounds // 2], sorted(added[label])[rounds // 2]
        print(
            f"\n{label} (direct route) vs the reference at c8, median of {rounds} rounds: {ratio:.2f}x (target >= "
            f"0.85x) {'✓' if ratio >= 0.85 else '✗'}"
        )
        print(
            f"p50 {label} adds at c1 over what the reference adds, median: {p50:.3f} ms (target <= 0.015 ms) "
            f"{'✓' if p50 <= 0.015 else '✗'}"
        )


@contextlib.contextmanager
def before_tree(root: Path, revision: str | None) -> Iterator[dict[str, str] | None]:
    """The settings of a stack running `revision`'s code (a git worktree of it under `root`), or None."""
    if revision is None:
        yield None
        return
    tree = root / "before-tree"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "--quiet", str(tree), revision], check=True)
    try:
        yield {"PYTHONPATH": str(tree / "container")}
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=False)


# --before: what each target sends (wrk's script) and the stack it goes to
BEFORE_TARGETS = {"no script": (None, {}), "named model": (None, NAMED), "pair": ("pair", {})}
BEFORE_BOUNDS = {"no script": 0.95, "named model": 0.95, "pair": 0.95}  # of the commit's rate, at every level
STANDIN = "stand-in"
DIRECT_TARGETS = ("no script", "named model")  # also held to the reference: >= 0.85x at c8, p50 +20 µs at c1


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


Latencies = dict[tuple[str, str], list[int]]


def paired_latencies(
    urls: dict[tuple[str, str], str], headers: dict[tuple[str, str], dict[str, str]], turns: int, connections: int = 4
) -> Latencies:
    """c1 latency in paired turns: one request to each URL in turn, `turns` times; nanoseconds per request. The p50s
    of separate wrk runs drift with the machine by more than the differences measured; within a turn the drift is
    the same for all. The order is shuffled at each turn (seeded): in an order that only turned, each URL always
    followed the same one, and the first of a stack's targets, called after another stack's, measured 15 to 28 µs
    slower than the second, which found the same nginx warm. Each URL has `connections` keep-alive connections,
    used in turn, so that it is measured through every nginx worker."""
    clients: dict[tuple[str, str], list[KeptAlive]] = {}
    for key, url in urls.items():
        port, path = int(url.split(":")[2].split("/")[0]), "/" + url.split("/", 3)[3]
        clients[key] = [KeptAlive(port, path, headers.get(key)) for _ in range(connections)]
    for kept in clients.values():
        for client in kept:
            for _ in range(50):  # warm-up
                client.exchange()
    times: Latencies = {key: [] for key in clients}
    order = list(clients)
    shuffled = random.Random(turns)
    for turn in range(turns):
        shuffled.shuffle(order)
        for key in order:
            times[key].append(clients[key][turn % connections].exchange())
    return times


def _paired(times: Latencies, plus: tuple[str, str], minus: tuple[str, str], *more: tuple[str, str]) -> float:
    """The median over the turns of plus - minus (+ more[0] - more[1]...: alternately added and taken), in µs."""
    signed = [(plus, 1), (minus, -1), *((key, -1 if i % 2 == 0 else 1) for i, key in enumerate(more))]
    return _median([sum(sign * times[key][i] for key, sign in signed) / 1000 for i in range(len(times[plus]))])


def before_rounds(
    root: Path,
    standin: Path,
    env: dict[str, str],
    revision: str,
    targets: list[str],
    concurrency: list[int],
    duration: int,
    rounds: int,
    guard: float | None,
    turns: int = 5000,
) -> bool:
    """This tree's stacks against `revision`'s, on the stand-in, in alternating rounds (the order turning each
    round, so that neither side always runs first); the reference too, unless `guard`. Prints each round and the
    medians of the per-round ratios with their targets; True when all are met (with `guard`: no ratio to the
    commit below 1 - guard)."""
    scripts = {
        target: wrk_script(root, REQUEST_BODY, "application/json", BEFORE_TARGETS[target][1]) for target in targets
    }
    scripts[REFERENCE] = scripts[STANDIN] = wrk_script(root, REQUEST_BODY, "application/json")
    sides = ("tree", revision)
    rates: dict[tuple[str, str, int], list[float]] = {}
    paired = 1 in concurrency and guard is None  # the c1 latency in paired turns, over each side's stand-in
    with contextlib.ExitStack() as started:
        before = started.enter_context(before_tree(root, revision))
        assert before is not None
        stacks: dict[tuple[str, str | None], serve_stack.Stack] = {}
        for side, side_env in zip(sides, ({}, before), strict=True):
            for script in dict.fromkeys(BEFORE_TARGETS[target][0] for target in targets):
                folder = model_folder(root / f"{side}-{script}", SCRIPTS[script] if script else None)
                stack = serve_stack.Stack(folder, env={**env, **side_env})
                started.callback(shutil.rmtree, stack.runtime_dir, ignore_errors=True)
                started.callback(stack.log_path.unlink, missing_ok=True)
                stacks[side, script] = started.enter_context(stack)
        urls = {
            (side, target): f"{stacks[side, BEFORE_TARGETS[target][0]].url}/invocations"
            for side in sides
            for target in targets
        }
        # each side's stand-in (its first REST port), which the reference calls too: both sides of a comparison call
        # one backend process. A stack's stand-in answers tens of µs slower or faster than another's for the stack's
        # lifetime (where its processes landed), so a c1 latency is compared as what it adds over the one behind it.
        backends = {
            side: next(stack for (s, _), stack in stacks.items() if s == side).model_server_ports[1] for side in sides
        }
        if paired:
            for side, port in backends.items():
                urls[side, STANDIN] = f"http://127.0.0.1:{port}/v1/models/{MODEL}:predict"
        if guard is None:
            urls["reference", REFERENCE] = started.enter_context(reference_proxy(root, standin, backends["tree"]))
        for (side, target), url in urls.items():
            try:
                check_answer(url, headers=BEFORE_TARGETS.get(target, (None, {}))[1])
            except WrongAnswer as exc:
                raise SystemExit(f"{target} ({side}) failed: {exc}") from None
        order = list(urls)
        for number in range(1, rounds + 1):
            shown = []
            for connections in concurrency:
                for side, target in order:
                    if target == STANDIN and connections != 1:
                        continue
                    row = wrk(urls[side, target], scripts[target], connections, duration)
                    if row["non_2xx"] or row["socket_errors"]:
                        raise SystemExit(f"{target} ({side}) at c{connections}: {row}")
                    rates.setdefault((side, target, connections), []).append(row["requests_per_s"])
                    shown.append(f"{target} ({side}) c{connections} {row['requests_per_s']}/s p50 {row['p50_ms']:.3f}")
            print(f"round {number}: " + "; ".join(shown), flush=True)
            order = order[1:] + order[:1]
        if paired:
            latencies = paired_latencies(urls, {key: BEFORE_TARGETS.get(key[1], (None, {}))[1] for key in urls}, turns)
    met = True

    def line(text: str, value: float, bound: float, higher: bool = True) -> None:
        nonlocal met
        ok = value >= bound if higher else value <= bound
        met = met and ok
        print(f"{text} {'✓' if ok else '✗'}")

    print(f"\nmedians of {rounds} rounds, {duration} s each, against {revision}:")
    for target in targets:
        for connections in concurrency:
            ratio = _median(
                [
                    tree / then
                    for tree, then in zip(
                        rates["tree", target, connections], rates[revision, target, connections], strict=True
                    )
                ]
            )
            bound = 1 - guard if guard is not None else BEFORE_BOUNDS[target]
            line(
                f"{target} at c{connections}: {ratio:.2f}x {revision}'s requests/s "
                f"({_median(rates['tree', target, connections]):.0f} vs "
                f"{_median(rates[revision, target, connections]):.0f}; target >= {bound:.2f}x)",
                ratio,
                bound,
            )
    if guard is not None:
        return met
    for target in (t for t in targets if t in DIRECT_TARGETS):
        for side in sides:
            if 8 in concurrency:
                ratio = _median(
                    [a / b for a, b in zip(rates[side, target, 8], rates["reference", REFERENCE, 8], strict=True)]
                )
                bound = 0.85 if side == "tree" else 0.0  # the commit's are shown, not held to the targets
                line(f"{target} ({side}) at c8: {ratio:.2f}x the reference (target >= 0.85x)", ratio, bound)
            if paired:  # what each adds over the stand-in behind it, less what the reference adds
                own = _paired(latencies, (side, target), (side, STANDIN))
                reference = _paired(latencies, ("reference", REFERENCE), ("tree", STANDIN))
                added = _paired(latencies, (side, target), (side, STANDIN), ("reference", REFERENCE), ("tree", STANDIN))
                line(
                    f"{target} ({side}) at c1: adds {own:.1f} µs to its stand-in's latency, the reference "
                    f"{reference:.1f} µs: {added:+.1f} µs more, median of {turns} paired turns (target <= 20 µs)",
                    added,
                    20 if side == "tree" else float("inf"),
                    higher=False,
                )
    return met


class KeptAlive:
    """One keep-alive connection sending one prepared POST again and again (reopened when the server closes it)."""

    def __init__(self, port: int, path: str, headers: dict[str, str] | None = None):
        self.port = port
        head = "".join(
            f"{name}: {value}\r\n"
            for name, value in {
                "Host": "x",
                "Content-Type": "application/json",
                **(headers or {}),
                "Content-Length": str(len(REQUEST_BODY)),
            }.items()
        )
        self.request = f"POST {path} HTTP/1.1\r\n{head}\r\n{REQUEST_BODY}".encode()
        self.sock: socket.socket | None = None

    def exchange(self) -> int:
        """Nanoseconds from sending the request to the last byte of its answer."""
        if self.sock is None:
            self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        started = time.perf_counter_ns()
        self.sock.sendall(self.request)
        data = b""
        while b"\r\n\r\n" not in data or len(data) < self._length(data):
            got = self.sock.recv(65536)
            if not got:  # closed (nginx's keepalive_requests): again on a new connection, untimed
                self.sock = None
                return self.exchange()
            data += got
        return time.perf_counter_ns() - started

    @staticmethod
    def _length(data: bytes) -> int:
        head, _, _ = data.partition(b"\r\n\r\n")
        found = re.search(rb"(?im)^content-length:\s*(\d+)", head)
        return len(head) + 4 + (int(found.group(1)) if found else 0)


def latency_pairs(root: Path, standin: Path, env: dict[str, str], count: int) -> None:
    """c1 latency as paired differences: one request to each target in turn (the order rotating), each on its own
    keep-alive connection, `count` times; the median of (target - reference) per turn is what the target adds
    over the reference, with the machine's drift cancelled (the p50s of separate wrk runs drift by more than the
    differences measured). Also the stack's stand-in against the reference's own, which should be 0."""
    with reference_proxy(root, standin) as reference, serve_stack.Stack(model_folder(root, None), env=env) as stack:
        low = int(stack.env["SAGEMAKER_SAFE_PORT_RANGE"].split("-")[0])
        backend = int(re.search(r"server 127\.0\.0\.1:(\d+);", (root / "reference" / "nginx.conf").read_text())[1])
        targets = {
            "reference": KeptAlive(int(reference.rsplit(":", 1)[1].split("/")[0]), "/invocations"),
            "no script": KeptAlive(stack.port, "/invocations"),
            "named model": KeptAlive(stack.port, "/invocations", NAMED),
            "no script, with a client's request id": KeptAlive(
                stack.port, "/invocations", {"X-Amzn-RequestId": "benchmark"}
            ),
            "reference's stand-in": KeptAlive(backend, f"/v1/models/{MODEL}:predict"),
            "stack's stand-in": KeptAlive(low + 1, f"/v1/models/{MODEL}:predict"),
        }
        for target in targets.values():
            for _ in range(200):  # warm-up
                target.exchange()
        times: dict[str, list[int]] = {name: [] for name in targets}
        order = list(targets)
        for _ in range(count):
            order = order[1:] + order[:1]
            for name in order:
                times[name].append(targets[name].exchange())
    print(
        f"c1 latency, {count} turns: p50 "
        + ", ".join(f"{name} {sorted(t)[count // 2] / 1000:.1f} µs" for name, t in times.items())
    )
    for name, base in (
        ("no script", "reference"),
        ("named model", "reference"),
        ("no script, with a client's request id", "reference"),
        ("stack's stand-in", "reference's stand-in"),
    ):
        added = sorted(b - a for a, b in zip(times[base], times[name], strict=True))[count // 2] / 1000
        target = " (target <= 15 µs) " + ("✓" if added <= 15 else "✗") if base == "reference" else ""
        print(f"{name} over {base}, median of the paired differences: {added:.1f} µs{target}")


def measure(
    stack: serve_stack.Stack, name: str, target: str, lua: Path, duration: int, table: list, concurrency: list[int]
) -> None:
    """The rows of one stack: its target at each concurrency (and the model server directly, once per backend)."""
    with stack:
        low = int(stack.env["SAGEMAKER_SAFE_PORT_RANGE"].split("-")[0])
        urls = {target: f"{stack.url}/invocations"}
        if target == "no script":  # the model server directly, once per backend
            urls = {"direct": f"http://127.0.0.1:{low + 1}/v1/models/{MODEL}:predict", **urls}
        workers = worker_pids(stack.pid_of("gunicorn-supervised"))
        for label, url in urls.items():
            measure_url(url, name, label, lua, duration, table, concurrency, workers=workers if label == target else [])
        if target in ("no script", "no script (app)"):
            for suffix, (body, content_type, expected, backends, levels, headers) in NO_SCRIPT_BODIES.items():
                if name in backends:
                    measure_url(
                        urls[target],
                        name,
                        f"{target}: {suffix}",
                        wrk_script(lua.parent, body, content_type, headers),
                        duration,
                        table,
                        list(levels or concurrency),
                        (body, content_type, expected, headers),
                        workers,
                    )


def wrk_script(folder: Path, body: str, content_type: str, headers: dict[str, str] | None = None) -> Path:
    """wrk's Lua script posting `body` (text without `]==]`) as `content_type`, with other `headers`."""
    headers = {"Content-Type": content_type, **(headers or {})}
    path = folder / f"post-{abs(hash((body, tuple(headers.items()))))}.lua"
    path.write_text(
        f"wrk.method = 'POST'\nwrk.body = [==[{body}]==]\n"
        + "".join(f"wrk.headers['{name}'] = '{value}'\n" for name, value in headers.items())
    )
    return path


def worker_pids(master: int) -> list[int]:
    """The app's gunicorn workers: the children of its master."""
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == master:
                children.append(int(entry.name))
    return children


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds these processes used so far (their threads included)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return total / os.sysconf("SC_CLK_TCK")


def measure_url(
    url: str,
    name: str,
    label: str,
    lua: Path,
    duration: int,
    table: list,
    concurrency: list[int],
    check: tuple = (),
    workers: list[int] = (),
) -> None:
    """The rows of one URL, one per concurrency; or, when its first answer is wrong, one row saying why. With the
    app's worker pids, the row also has their CPU per request (`worker_us`, user + system, from /proc)."""
    try:
        check_answer(url, *check)
    except WrongAnswer as exc:
        table.append({"backend": name, "target": label, "failed": str(exc)})
        print(f"{name:12} {label:30} failed: {exc}", flush=True)
        return
    for connections in concurrency:
        before = cpu_seconds(workers)
        row = {"backend": name, "target": label, "concurrency": connections, **wrk(url, lua, connections, duration)}
        if workers:
            row["worker_us"] = round((cpu_seconds(workers) - before) / max(1, row["requests"]) * 1e6, 1)
        table.append(row)
        print(
            f"{name:12} {label:30} c{connections:<3} {row['requests_per_s']:7} req/s  "
            f"p50 {row['p50_ms']:7.3f} ms  p99 {row['p99_ms']:7.3f} ms"
            + (f"  worker CPU {row['worker_us']:6.1f} µs/req" if workers else "")
            + (f"  ({row['non_2xx']} not 2xx)" if row["non_2xx"] else "")
            + (f"  ({row['socket_errors']} socket errors)" if row["socket_errors"] else ""),
            flush=True,
        )


def figure(table: list[dict], backend: str, target: str, connections: int, key: str) -> float | None:
    return next(
        (r[key] for r in table if (r["backend"], r["target"], r.get("concurrency")) == (backend, target, connections)),
        None,
    )


COMPARE = {">=": operator.ge, "<=": operator.le, "<": operator.lt}


def headlines(table: list[dict]) -> dict:
    """The headline figures against the stand-in, each printed with its target and a check mark or a cross (or the
    reason it is missing: a failed target); returns them by name, and under "targets_met" whether each target
    holds. A headline needing a target that was not measured is left out."""
    rows = [r for r in table if r["backend"] == "stand-in"]
    tried = {r["target"] for r in rows}
    failed = {r["target"]: r["failed"] for r in rows if "failed" in r}

    def rate_c8(target: str) -> float | None:
        return figure(rows, "stand-in", target, 8, "requests_per_s")

    def ratio_c8(target: str, base: str) -> tuple[float, str] | None:
        top, bottom = rate_c8(target), rate_c8(base)
        return (top / bottom, f"{top} / {bottom} req/s") if top and bottom else None

    def added_p50_c1(target: str) -> tuple[float, str] | None:
        p50, direct = (figure(rows, "stand-in", label, 1, "p50_ms") for label in (target, "direct"))
        return None if None in (p50, direct) else (p50 - direct, f"{p50:.3f} - {direct:.3f} ms")

    found: dict = {"targets_met": {}}

    def headline(
        key: str,
        what: str,
        needs: tuple[str, ...],
        value: tuple[float, str] | None,
        shown: str,
        target: tuple[str, float] | None = None,
    ) -> None:
        if not set(needs) <= tried:
            return
        broken = "; ".join(f"{name} failed: {failed[name]}" for name in needs if name in failed)
        if not broken and value is None:  # a concurrency not measured
            return
        limit = "" if target is None else f"target {target[0]} {shown.format(target[1])}"
        met = value is not None and target is not None and COMPARE[target[0]](value[0], target[1])
        if value is None:
            text = "not measured (" + "; ".join(filter(None, (broken, limit))) + ")"
        else:
            found[key] = round(value[0], 3)
            detail = "; ".join(filter(None, (value[1], limit)))
            text = shown.format(value[0]) + (f" ({detail})" if detail else "")
        if target is not None:
            found["targets_met"][key] = met
            text += " ✓" if met else " ✗"
        print(f"{what}: {text}", flush=True)

    def slug(target: str) -> str:
        return re.sub(r"\W+", "_", target).strip("_")

    print()
    reference = rate_c8(REFERENCE)
    headline(
        "reference_standin_c8",
        "reference (nginx -> stand-in) at c8",
        (REFERENCE,),
        None if reference is None else (reference, ""),
        "{:.0f} req/s",
    )
    for target, least in (
        ("no script", 0.85),
        ("no script: named model", 0.85),
        ("no script (app)", None),
        ("no script (app): named model", None),
        ("pair", 0.25),
        ("handler (session)", None),
        ("toolkit", None),
    ):
        headline(
            f"{slug(target)}_vs_reference_c8",
            f"{target} vs the reference at c8",
            (target, REFERENCE),
            ratio_c8(target, REFERENCE),
            "{:.2f}x",
            None if least is None else (">=", least),
        )
    headline(
        "no_script_added_p50_c1_ms",
        "p50 added at c1 by no script over the stand-in called directly",
        ("no script", "direct"),
        added_p50_c1("no script"),
        "{:.3f} ms",
    )
    reference_p50 = added_p50_c1(REFERENCE)
    for target in ("no script", "no script: named model"):
        added = added_p50_c1(target)
        headline(
            f"{slug(target)}_added_p50_c1_over_reference_ms",
            f"p50 added at c1 by {target} over what the reference adds",
            (target, REFERENCE, "direct"),
            None if None in (added, reference_p50) else (added[0] - reference_p50[0], ""),
            "{:.3f} ms",
            ("<=", 0.015),
        )
    headline(
        "no_script_app_added_p50_c1_ms",
        "p50 added at c1 by no script (app) over the stand-in called directly",
        ("no script (app)", "direct"),
        added_p50_c1("no script (app)"),
        "{:.3f} ms",
    )
    for target in ("handler (session)", "toolkit"):
        headline(
            f"{slug(target)}_vs_pair_standin_c8",
            f"{target} vs pair at c8",
            (target, "pair"),
            ratio_c8(target, "pair"),
            "{:.0%}",
            (">=", 0.90),
        )
    pair = rate_c8("pair")
    headline(
        "pair_standin_c8", "pair at c8", ("pair",), None if pair is None else (pair, ""), "{:.0f} req/s", (">=", 2500)
    )
    headline(
        "added_p50_c1_ms",
        "p50 added at c1 by the pair over the stand-in called directly",
        ("pair", "direct"),
        added_p50_c1("pair"),
        "{:.3f} ms",
        ("<", 1.0),
    )
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=int, default=5, help="seconds per measurement")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument(
        "--metrics-overhead",
        action="store_true",
        help="only the cost of SAGEMAKER_METRICS: the pair vs the stand-in at c8, off and on, in "
        "alternating rounds (--paired-rounds, default 5)",
    )
    parser.add_argument("--backends", default="stand-in,model server", help="comma-separated (default: both)")
    parser.add_argument(
        "--targets",
        help=f"comma-separated among: {', '.join(TARGETS)} (default: all; quote the argument); with --before, "
        f"among {', '.join(BEFORE_TARGETS)}",
    )
    parser.add_argument("--concurrency", default=",".join(map(str, CONCURRENCY)), help="comma-separated levels")
    parser.add_argument(
        "--paired-rounds",
        type=int,
        default=0,
        help="only toolkit vs pair against the stand-in at c8, in this many alternating rounds "
        "(with --metrics-overhead: metrics off vs on)",
    )
    parser.add_argument(
        "--direct-rounds",
        type=int,
        default=0,
        help="only no script (the direct route) vs the reference against the stand-in, in this many "
        "alternating rounds at c8 and c1",
    )
    parser.add_argument(
        "--latency-pairs",
        type=int,
        default=0,
        help="only: c1 latency of no script (plain, named model) against the reference as the median "
        "of this many paired differences (one request to each in turn)",
    )
    parser.add_argument(
        "--fallback-rounds",
        type=int,
        default=0,
        help="only a flat list against the real model server at c8, the direct route off vs on (nginx "
        "sends it to the app by its body), in this many alternating rounds",
    )
    parser.add_argument("--before", metavar="REV", help="only: this tree against the code of REV (see above)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds, with --before")
    parser.add_argument(
        "--guard",
        type=float,
        metavar="F",
        help="with --before: no reference, and exit 1 on a median ratio to REV below 1 - F",
    )
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))  # stop what was started, as on ^C
    backends = args.backends.split(",")
    named = (args.targets or ",".join(BEFORE_TARGETS if args.before else TARGETS)).split(",")
    unknown = set(named) - set(BEFORE_TARGETS if args.before else TARGETS)
    if unknown:
        choices = ", ".join(BEFORE_TARGETS if args.before else TARGETS)
        parser.error(f"unknown targets {', '.join(sorted(unknown))}: choose among {choices}")
    targets = [t for t in TARGETS if t in named]
    concurrency = [int(c) for c in args.concurrency.split(",")]
    for tool in ("nginx", "wrk"):
        if not shutil.which(tool):
            raise SystemExit(f"{tool} is not installed (scripts/install.sh installs it)")
    root = Path(tempfile.mkdtemp(prefix="benchmark-proxy-"))
    lua = root / "post.lua"
    lua.write_text(
        f"wrk.method = 'POST'\nwrk.body = '{REQUEST_BODY}'\nwrk.headers['Content-Type'] = 'application/json'\n"
    )
    standin_env = make_standin(root)
    standin = Path(standin_env["STANDIN_DIR"])
    settings = Settings.from_env()  # what serve will use: its defaults unless SAGEMAKER_* variables are set here
    print(
        f"{os.cpu_count()} cores; gunicorn: {settings.gunicorn_workers} {settings.gunicorn_worker_class} worker(s) "
        f"x {settings.gunicorn_threads} thread(s); body {REQUEST_BODY}; wrk {args.duration} s per row",
        flush=True,
    )
    table: list[dict] = []
    if args.before:
        chosen = [t for t in BEFORE_TARGETS if t in named]
        try:
            met = before_rounds(
                root, standin, standin_env, args.before, chosen, concurrency, args.duration, args.rounds, args.guard
            )
        finally:
            shutil.rmtree(root, ignore_errors=True)
        return 0 if met or args.guard is None else 1
    if args.direct_rounds:
        try:
            direct_rounds(root, lua, standin, standin_env, args.duration, args.direct_rounds)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        return 0
    if args.latency_pairs:
        try:
            latency_pairs(root, standin, standin_env, args.latency_pairs)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        return 0
    if args.fallback_rounds:
        try:
            ratios = paired_rounds(
                root,
                wrk_script(root, NO_SCRIPT_BODIES["flat list"][0], "application/json"),
                args.duration,
                args.fallback_rounds,
                {"route off": ("no script (app)", {}), "route on": ("no script", {})},
            )
        finally:
            shutil.rmtree(root, ignore_errors=True)
        print(
            f"\nflat list against the model server at c8, route on vs off, median of {len(ratios)} rounds: "
            f"{ratios[len(ratios) // 2]:.0%} (rounds {', '.join(f'{r:.0%}' for r in ratios)})"
        )
        return 0
    if args.metrics_overhead or args.paired_rounds:
        # the pass-through pair with SAGEMAKER_METRICS off and on, or the pair and the toolkit script
        if args.metrics_overhead:
            metrics_env = {**standin_env, **Settings.env_of(metrics=True, metrics_port=ports.free_port())}
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
            print(
                f"\nmetrics on vs off, pair vs the stand-in at c8, median of {len(ratios)} rounds: {1 - median:.1%} "
                f"of the requests/s lost (target <= 5%; on/off per round {rounds})"
            )
        else:
            print(
                f"\ntoolkit vs pair against the stand-in at c8, median of {len(ratios)} rounds: {median:.0%} "
                f"(target >= 90%; rounds {rounds})"
            )
        return 0
    try:
        if "stand-in" in backends and REFERENCE in targets:
            with reference_proxy(root, standin) as url:
                measure_url(url, "stand-in", REFERENCE, lua, args.duration, table, concurrency)
        if "stand-in" in backends:
            run_backend("stand-in", standin_env, root, lua, args.duration, table, targets, concurrency)
        if "model server" in backends:
            run_backend("model server", {}, root, lua, args.duration, table, targets, concurrency)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    found = headlines(table)
    for backend in ("stand-in", "model server"):  # the direct route on vs off, for the bodies it does not take too
        for suffix in NO_SCRIPT_BODIES:
            for connections in (8, 1):
                on, off = (
                    figure(table, backend, f"{target}: {suffix}", connections, "requests_per_s")
                    for target in ("no script", "no script (app)")
                )
                p50s = [
                    figure(table, backend, f"{target}: {suffix}", connections, "p50_ms")
                    for target in ("no script", "no script (app)")
                ]
                if on and off:
                    print(
                        f"{backend}: {suffix} at c{connections}, direct route on vs off: {on} / {off} req/s "
                        f"({on / off:.2f}x), p50 {p50s[0]:.3f} / {p50s[1]:.3f} ms"
                    )
                    key = re.sub(r"\W+", "_", f"{backend} {suffix} c{connections} on vs off")
                    found[key] = round(on / off, 3)
                    break
    for target in SCRIPTS:
        rate, direct = (
            figure(table, "model server", target, 8, "requests_per_s"),
            figure(table, "model server", "direct", 8, "requests_per_s"),
        )
        p50, direct_p50 = (figure(table, "model server", label, 1, "p50_ms") for label in (target, "direct"))
        if None not in (rate, direct, p50, direct_p50):
            print(
                f"model server: {target} reaches {rate / direct:.0%} of the direct rate at c8 and adds "
                f"{p50 - direct_p50:.3f} ms to the p50 at c1"
            )
    if args.json:
        args.json.write_text(
            json.dumps(
                {"cores": os.cpu_count(), "duration_s": args.duration, "body": REQUEST_BODY, "rows": table, **found},
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
