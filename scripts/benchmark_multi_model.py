#!/usr/bin/env python3
"""Benchmark of a multi-model endpoint (SAGEMAKER_MULTI_MODEL=true) through the real `serve`, in one run:

  load latency     p50/p99 of POST /models over --loads loads of a small SavedModel (half_plus_two; each load
                   followed by its unload), answered once every gunicorn worker routes the model
  spread vs one    invocations/s at concurrency 8 spread round-robin over 20 loaded models, against the same
                   stack invoking one model (target: >= 90%)
  during a load    p99 of invocations of model A at concurrency 8 while model B loads, against A's idle p99
                   (target: no more than 2x): B a load that lasts the whole row at little CPU (a model whose load
                   waits at a gate, test/multi_model/gated_model.py), then B loaded and unloaded in a loop (each
                   load's TensorFlow work competing with A for the CPU)
  memory           resident memory per loaded model: the model server's and the gunicorn workers' growth over
                   the 20 models, divided by 20

  .venv/bin/python scripts/benchmark_multi_model.py [--duration 5] [--loads 50] [--json results.json]
  .venv/bin/python scripts/benchmark_multi_model.py --versus-original GIT_DIR [--rounds 5] [--duration 5]   # only:
        POST /models/<name>/invoke of one loaded model at c8 and c1, ours vs the original AWS container's
        multi-model path, both up side by side against the same stand-in model server (benchmark_proxy.py's:
        near-zero cost), measured in alternating rounds; the medians

The original: a clone or git directory of the public aws/sagemaker-tensorflow-serving-container repository, read at
run time (nothing of it is kept in this one). Its python_service.py, tfs_utils.py and multi_model_utils.py run as its
image runs them: in /sagemaker (bind-mounted from a temporary folder in a mount namespace of their own, so nothing is
written to the machine's /sagemaker), under gunicorn with one gevent worker, behind an nginx with its /models
location (no keep-alive to gunicorn); its loads start the stand-in as `tensorflow_model_server`, as they would the
real one. Their packages (falcon 3, which still has falcon.API, gevent, gunicorn, requests, grpcio) go into
.venv-original at the repo root. Needs root (unshare, mount).

Needs nginx and wrk (scripts/install.sh installs both). The default run takes about a minute. Timings on a
shared machine are noisy: compare figures of one run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "test"))
sys.path.insert(0, str(REPO / "test" / "multi_model"))
sys.path.insert(0, str(REPO / "scripts"))
import clients  # noqa: E402
import gated_model  # noqa: E402  (a model whose load waits until a file exists)
import model_dirs  # noqa: E402
import paths  # noqa: E402
import ports  # noqa: E402
import processes  # noqa: E402
import serve_stack  # noqa: E402
from benchmark_proxy import make_standin, wrk  # noqa: E402

SPREAD = 20
BODY = '{"instances": [1.0, 2.0, 5.0]}'


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def worker_pids(master: int) -> list[int]:
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    return [int(pid) for pid in children]


def post(stack: serve_stack.Stack, path: str, body: object) -> clients.Answer:
    return clients.http_call(stack.port, "POST", path, json.dumps(body), {"Content-Type": "application/json"})


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(pct / 100 * (len(ordered) - 1))))]


def lua_script(folder: Path, routes: list[str]) -> Path:
    """A wrk script posting BODY to each path in turn (one counter per wrk thread)."""
    listed = ", ".join(f'"{p}"' for p in routes)
    script = folder / f"paths-{len(routes)}.lua"
    script.write_text(f"""
paths = {{{listed}}}
i = 0
wrk.method = "POST"
wrk.body = '{BODY}'
wrk.headers["Content-Type"] = "application/json"
request = function()
  i = i % #paths + 1
  return wrk.format(nil, paths[i])
end
""")
    return script


ORIGINAL_FILES = ("python_service.py", "tfs_utils.py", "multi_model_utils.py")
ORIGINAL_PACKAGES = ("falcon>=3,<4", "gevent", "gunicorn", "packaging", "requests", "grpcio")
ORIGINAL_NGINX = """daemon off;
worker_processes auto;
pid {folder}/nginx.pid;
error_log stderr error;
events {{ worker_connections 2048; }}
http {{
    access_log {folder}/access.log combined;
    client_body_temp_path {folder}/client_body;
    proxy_temp_path {folder}/proxy;
    upstream gunicorn_upstream {{
        server unix:{folder}/gunicorn.sock fail_timeout=1;
    }}
    server {{
        listen 127.0.0.1:{port};
        client_max_body_size 0;
        location /models {{
            proxy_pass http://gunicorn_upstream/models;
        }}
        keepalive_timeout 3;
    }}
}}
"""


def original_environment() -> Path:
    """.venv-original with the original's packages; its python."""
    venv = REPO / ".venv-original"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", *ORIGINAL_PACKAGES], check=True
    )
    return python


def check_invoke(port: int) -> None:
    answer = clients.http_call(port, "POST", "/models/hp/invoke", BODY, {"Content-Type": "application/json"})
    assert answer.status == 200 and json.loads(answer.body) == {"predictions": [3.5, 4.0, 5.5]}, answer.body[:300]


def load(port: int, model: Path) -> None:
    answer = clients.http_call(
        port,
        "POST",
        "/models",
        json.dumps({"model_name": "hp", "url": str(model)}),
        {"Content-Type": "application/json"},
    )
    assert answer.status == 200, answer.body[:300]


@contextlib.contextmanager
def original_service(original: Path, python: Path, work: Path, env: dict[str, str]) -> Iterator[int]:
    """The original's multi-model service as its image runs it (see the docstring); yields its nginx's port."""
    folder = work / "original"
    for sub in ("sagemaker", "client_body", "proxy"):
        (folder / sub).mkdir(parents=True)
    work.chmod(0o755)  # nginx's workers (nobody, under root) reach gunicorn's socket, as in the original's image
    for name in ORIGINAL_FILES:
        (folder / "sagemaker" / name).write_bytes(
            subprocess.run(
                ["git", "--git-dir", original, "show", f"HEAD:docker/build_artifacts/sagemaker/{name}"],
                check=True,
                capture_output=True,
            ).stdout
        )
    low, high = ports.free_port_range(20)
    port = ports.free_port()
    (folder / "nginx.conf").write_text(ORIGINAL_NGINX.format(folder=folder, port=port))
    gunicorn = (
        f"{python.parent / 'gunicorn'} -b unix:{folder}/gunicorn.sock -k gevent --chdir /sagemaker "
        f"--workers 1 --threads 1 --log-level warning --timeout 60 -e SAGEMAKER_MULTI_MODEL=true "
        f"-e SAGEMAKER_SAFE_PORT_RANGE={low}-{high} -e SAGEMAKER_TFS_WAIT_TIME_SECONDS=60 "
        "python_service:app"
    )
    made = not Path("/sagemaker").exists()  # a mount point for the namespace's bind mount, removed after
    Path("/sagemaker").mkdir(exist_ok=True)
    try:
        with (
            processes.Background(
                [
                    "unshare",
                    "--mount",
                    "--propagation",
                    "private",
                    "sh",
                    "-c",
                    f"mount --bind {folder / 'sagemaker'} /sagemaker && exec {gunicorn}",
                ],
                env=env,
                stop_timeout=10,
            ) as service,
            processes.Background(["nginx", "-c", folder / "nginx.conf", "-e", "stderr"], stop_timeout=10),
        ):
            service.wait_until(lambda: (folder / "gunicorn.sock").exists(), timeout=60, what="listening")
            processes.wait_for(lambda: ports.port_is_open(port), what="the original's nginx listening")
            yield port
    finally:
        if made:
            Path("/sagemaker").rmdir()


def versus_original(original: Path, duration: int, rounds: int) -> dict:
    """Ours and the original's POST /models/hp/invoke against the same stand-in, both up side by side and measured
    in alternating rounds (so that the machine's changing load weighs on both alike); the medians."""
    python = original_environment()
    work = Path(tempfile.mkdtemp(prefix="benchmark-mme-original-"))
    try:
        env = make_standin(work)
        model = model_dirs.copy_model(paths.HALF_PLUS_TWO, work / "models", "hp")
        lua = lua_script(work, ["/models/hp/invoke"])
        rows: dict[int, list[tuple[dict, dict]]] = {8: [], 1: []}
        with (
            serve_stack.Stack(work / "models", {**env, "SAGEMAKER_MULTI_MODEL": "true"}) as stack,
            original_service(original, python, work, env) as port,
        ):
            urls = {"ours": stack.url, "the original": f"http://127.0.0.1:{port}"}
            for url in urls.values():
                load(int(url.rsplit(":", 1)[1]), model)
                check_invoke(int(url.rsplit(":", 1)[1]))
            for number in range(1, rounds + 1):
                for connections in (8, 1):
                    ours, theirs = (wrk(url, lua, connections, duration) for url in urls.values())
                    rows[connections].append((ours, theirs))
                    print(
                        f"round {number} c{connections}: ours {ours['requests_per_s']} req/s (p50 "
                        f"{ours['p50_ms']} ms), the original {theirs['requests_per_s']} req/s (p50 "
                        f"{theirs['p50_ms']} ms): {ours['requests_per_s'] / theirs['requests_per_s']:.1f}x",
                        flush=True,
                    )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    medians = {
        connections: statistics.median(ours["requests_per_s"] / theirs["requests_per_s"] for ours, theirs in pairs)
        for connections, pairs in rows.items()
    }
    print(
        f"\nmulti-model invoke, ours vs the original, median of {rounds} rounds: c8 {medians[8]:.1f}x (target >= "
        f"10x) {'✓' if medians[8] >= 10 else '✗'}; c1 {medians[1]:.1f}x"
    )
    return {
        "versus_original": {f"c{c}": pairs for c, pairs in rows.items()},
        "invoke_vs_original": {f"c{c}": round(m, 2) for c, m in medians.items()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=int, default=5, help="seconds of each wrk row")
    parser.add_argument("--loads", type=int, default=50, help="loads measured for the load latency")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument(
        "--versus-original",
        type=Path,
        metavar="GIT_DIR",
        help="only: invocations, ours vs the original's, against the stand-in",
    )
    parser.add_argument("--rounds", type=int, default=5, help="with --versus-original: alternating rounds")
    args = parser.parse_args()
    for tool in ("nginx", "wrk"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is not installed (scripts/install.sh installs it)")
    if args.versus_original:
        results = versus_original(args.versus_original, args.duration, args.rounds)
        if args.json:
            args.json.write_text(json.dumps(results, indent=2) + "\n")
        return 0
    work = Path(tempfile.mkdtemp(prefix="benchmark-mme-"))
    root = work / "models"
    for i in range(SPREAD + 1):
        model_dirs.copy_model(paths.HALF_PLUS_TWO, root, f"m{i:02d}")
    gate = gated_model.Gate(work / "gate")
    gated_model.build(root / "gated", gate.path)
    results: dict[str, object] = {}
    stack = serve_stack.Stack(root, {"SAGEMAKER_MULTI_MODEL": "true"})
    try:
        stack.start()
        model_server = stack.pid_of("tfs-0")
        workers = worker_pids(stack.pid_of("gunicorn-supervised"))
        print(
            f"multi-model stack: {len(workers)} gunicorn worker(s), 1 model server; body {BODY}; "
            f"wrk {args.duration} s per row",
            flush=True,
        )

        # load latency: load and unload one small model, again and again
        seconds = []
        for _ in range(args.loads):
            started = time.perf_counter()
            answer = post(stack, "/models", {"model_name": "probe", "url": str(root / f"m{SPREAD:02d}")})
            seconds.append(time.perf_counter() - started)
            assert answer.status == 200, answer.text
            assert clients.http_call(stack.port, "DELETE", "/models/probe").status == 200
        results["load_ms"] = {
            "p50": round(1000 * statistics.median(seconds), 1),
            "p99": round(1000 * percentile(seconds, 99), 1),
            "loads": len(seconds),
        }
        print(
            f"load latency over {len(seconds)} loads: p50 {results['load_ms']['p50']} ms, "
            f"p99 {results['load_ms']['p99']} ms",
            flush=True,
        )

        # memory: 20 models loaded
        before = rss_kb(model_server), sum(map(rss_kb, workers))
        for i in range(SPREAD):
            assert post(stack, "/models", {"model_name": f"m{i:02d}", "url": str(root / f"m{i:02d}")}).status == 200
        after = rss_kb(model_server), sum(map(rss_kb, workers))
        results["rss_per_model_kb"] = {
            "model_server": round((after[0] - before[0]) / SPREAD),
            "gunicorn_workers": round((after[1] - before[1]) / SPREAD),
        }
        print(
            f"resident memory per loaded model: model server {results['rss_per_model_kb']['model_server']} kB, "
            f"gunicorn workers (all) {results['rss_per_model_kb']['gunicorn_workers']} kB",
            flush=True,
        )

        # throughput: spread over 20 models vs one model (after a warm-up: a model's first runs go to threads
        # until the model server knows their cost)
        for i in range(SPREAD):
            for _ in range(20):
                assert post(stack, f"/models/m{i:02d}/invoke", json.loads(BODY)).status == 200
        spread = wrk(stack.url, lua_script(work, [f"/models/m{i:02d}/invoke" for i in range(SPREAD)]), 8, args.duration)
        one = wrk(stack.url, lua_script(work, ["/models/m00/invoke"]), 8, args.duration)
        results["c8_spread_20_models"], results["c8_one_model"] = spread, one
        ratio = spread["requests_per_s"] / one["requests_per_s"]
        results["spread_vs_one"] = round(ratio, 3)
        print(
            f"c8 over {SPREAD} models: {spread['requests_per_s']} req/s (p50 {spread['p50_ms']} / p99 "
            f"{spread['p99_ms']} ms, errors {spread['non_2xx'] + spread['socket_errors']}); one model: "
            f"{one['requests_per_s']} req/s (p50 {one['p50_ms']} / p99 {one['p99_ms']} ms): {100 * ratio:.1f}% "
            "(target >= 90%)",
            flush=True,
        )

        # invocations of A while B's load waits at its gate for the whole row
        with ThreadPoolExecutor(1) as pool:
            gated = pool.submit(post, stack, "/models", {"model_name": "gated", "url": str(root / "gated")})
            rest_port = stack.model_server_ports[1]
            while clients.http_call(rest_port, "GET", "/v1/models/gated").status != 200:
                time.sleep(0.05)  # the load has reached the model server
            waiting = wrk(stack.url, lua_script(work, ["/models/m00/invoke"]), 8, args.duration)
            still_loading = not gated.done()
            gate.open()
            assert gated.result().status == 200
        results["c8_one_model_during_a_waiting_load"] = waiting
        print(
            f"c8 model A during one load of B that waited the whole row (still loading at its end: "
            f"{still_loading}): {waiting['requests_per_s']} req/s, p99 {waiting['p99_ms']} ms vs {one['p99_ms']} ms "
            f"idle: {waiting['p99_ms'] / one['p99_ms']:.2f}x (target <= 2x; errors "
            f"{waiting['non_2xx'] + waiting['socket_errors']})",
            flush=True,
        )

        # invocations of A while B loads and unloads in a loop, vs A idle
        stop = threading.Event()
        cycles = []

        def churn() -> None:
            while not stop.is_set():
                assert post(stack, "/models", {"model_name": "b", "url": str(root / f"m{SPREAD:02d}")}).status == 200
                assert clients.http_call(stack.port, "DELETE", "/models/b").status == 200
                cycles.append(1)

        loader = threading.Thread(target=churn)
        loader.start()
        try:
            busy = wrk(stack.url, lua_script(work, ["/models/m00/invoke"]), 8, args.duration)
        finally:
            stop.set()
            loader.join()
        results["c8_one_model_while_loading"] = busy
        results["p99_while_loading_vs_idle"] = round(busy["p99_ms"] / one["p99_ms"], 2)
        print(
            f"c8 model A while model B was loaded and unloaded {len(cycles)} times: {busy['requests_per_s']} req/s,"
            f" p50 {busy['p50_ms']} ms, p99 {busy['p99_ms']} ms vs {one['p99_ms']} ms idle:"
            f" {busy['p99_ms'] / one['p99_ms']:.2f}x "
            f"(target <= 2x; errors {busy['non_2xx'] + busy['socket_errors']})",
            flush=True,
        )
    finally:
        stack.stop()
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
