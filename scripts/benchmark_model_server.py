#!/usr/bin/env python3
"""Throughput of the embedded model server on half_plus_three with 3-value instances, in one run.

    .venv/bin/python scripts/benchmark_model_server.py [--seconds 5] [--rounds 5]

Measures:
- the in-process signature call rate: TensorFlow's (Session.run of the signature's tensors by name, as TFS runs
  a signature; tf.saved_model.load cannot load this TF1 model), and our engine's (Servable.run, the C session
  call the server makes without Session.run's Python layers);
- REST predict requests/s at concurrency 1, 8 and 32 (wrk, one client thread, keep-alive);
- gRPC Predict requests/s (Python stub, 8 client threads);
- REST at concurrency 32 with and without batching, in alternating rounds against two servers running side by
  side, so that both see the same machine: the medians, and the median of the rounds' ratios.
Prints a table and the two targets: REST at concurrency 8 >= 40% of the in-process signature call rate;
batching at concurrency 32 >= 2x no batching. Figures are noisy on a shared machine: run it on an idle one.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MODEL = REPO / "test" / "data" / "tfs-reference-models" / "saved_model_half_plus_three"
BODY = '{"instances": [1.0, 2.0, 5.0]}'
BATCHING = ("max_batch_size { value: 64 }\nbatch_timeout_micros { value: 0 }\n"
            "max_enqueued_batches { value: 1000 }\nnum_batch_threads { value: 1 }\n")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def in_process_rates(seconds: float) -> tuple[float, float]:
    """(Servable.run calls/s, Session.run calls/s) on one thread."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf

    from sagemaker_tfs.model_server import servable

    model = servable.load("half_plus_three", 123, MODEL / "00000123")
    x = np.array([1.0, 2.0, 5.0], np.float32)
    options = servable.RunOptions(30000)

    def rate(call) -> float:
        for _ in range(200):
            call()
        count, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            for _ in range(500):
                call()
            count += 500
        return count / (time.perf_counter() - start)

    ours = rate(lambda: model.run({"x:0": x}, ["y:0"], options))
    graph = tf.Graph()
    with tf.compat.v1.Session(graph=graph) as session:
        tf.compat.v1.saved_model.loader.load(session, ["serve"], str(MODEL / "00000123"))
        call = session.make_callable(["y:0"], ["x:0"])
        x_column = x.reshape(3, 1)  # Session.run checks the placeholder's static shape [-1, 1]
        reference = rate(lambda: call(x_column))
    return ours, reference


class Server:
    def __init__(self, workdir: Path, batching: bool):
        self.rest_port, self.grpc_port = free_port(), free_port()
        config = workdir / "models.config"
        config.write_text('model_config_list { config { name: "half_plus_three" base_path: "%s" '
                          'model_platform: "tensorflow" } }' % MODEL)
        args = [sys.executable, "-m", "sagemaker_tfs.model_server", f"--port={self.grpc_port}",
                f"--rest_api_port={self.rest_port}", f"--model_config_file={config}", "--max_num_load_retries=0",
                "--file_system_poll_wait_seconds=0"]
        if batching:
            (workdir / "batching.txt").write_text(BATCHING)
            args += ["--enable_batching", f"--batching_parameters_file={workdir / 'batching.txt'}"]
        self.log = open(workdir / ("batching.log" if batching else "server.log"), "wb")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while True:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.rest_port)) == 0:
                    break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"model server did not start; see {self.log.name}")
            time.sleep(0.2)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def wrk(port: int, connections: int, seconds: float, workdir: Path) -> float:
    script = workdir / "post.lua"
    script.write_text(f"wrk.method = 'POST'\nwrk.body = '{BODY}'\nwrk.headers['Content-Type'] = 'application/json'\n")
    url = f"http://127.0.0.1:{port}/v1/models/half_plus_three:predict"
    subprocess.run(["wrk", "-t1", f"-c{connections}", "-d1s", "-s", str(script), url], capture_output=True)  # warm
    out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{seconds:g}s", "-s", str(script), url],
                         capture_output=True, text=True, check=True).stdout
    if "Non-2xx" in out:
        raise SystemExit(f"wrk saw errors:\n{out}")
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))


def grpc_rate(port: int, threads: int, seconds: float) -> float:
    import grpc
    import numpy as np
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    request = predict_pb2.PredictRequest()
    request.model_spec.name = "half_plus_three"
    request.inputs["x"].CopyFrom(tf.make_tensor_proto(np.array([1.0, 2.0, 5.0], np.float32)))
    counts = [0] * threads
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        stub.Predict(request, timeout=30)
        deadline = time.perf_counter() + seconds

        def client(i: int) -> None:
            while time.perf_counter() < deadline:
                stub.Predict(request, timeout=30)
                counts[i] += 1

        start = time.perf_counter()
        workers = [threading.Thread(target=client, args=(i,)) for i in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        return sum(counts) / (time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of each measurement")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds of batching against none")
    args = parser.parse_args()
    if not shutil.which("wrk"):
        raise SystemExit("wrk is not installed (scripts/install.sh installs it)")
    workdir = Path(tempfile.mkdtemp(prefix="benchmark-model-server-"))
    results: dict[str, float] = {}
    ours, reference = in_process_rates(args.seconds)
    results["in-process signature call, TensorFlow Session.run (calls/s)"] = reference
    results["in-process signature call, our engine Servable.run (calls/s)"] = ours
    plain, batching = Server(workdir, batching=False), None
    try:
        batching = Server(workdir, batching=True)
        for connections in (1, 8, 32):
            results[f"REST predict, concurrency {connections} (req/s)"] = wrk(plain.rest_port, connections,
                                                                            args.seconds, workdir)
        results["gRPC Predict, 8 client threads (req/s)"] = grpc_rate(plain.grpc_port, 8, args.seconds)
        rounds = [(wrk(plain.rest_port, 32, args.seconds, workdir), wrk(batching.rest_port, 32, args.seconds,
                                                                         workdir)) for _ in range(args.rounds)]
    finally:
        plain.stop()
        if batching is not None:
            batching.stop()
    unbatched, batched = (statistics.median(column) for column in zip(*rounds))
    results["REST predict, concurrency 32, alternating rounds, median (req/s)"] = unbatched
    results["REST predict with batching, concurrency 32, alternating rounds, median (req/s)"] = batched
    width = max(map(len, results))
    for name, value in results.items():
        print(f"{name:<{width}}  {value:>10,.0f}")
    rest8 = results["REST predict, concurrency 8 (req/s)"]
    print(f"REST c8 / in-process signature call (TensorFlow): {rest8 / reference:.0%}  (target >= 40%); "
          f"/ our engine's C call: {rest8 / ours:.0%}")
    ratios = [b / u for u, b in rounds]  # each round measures both back to back: the machine's drift cancels
    print(f"batching c32 / no batching c32, median of the rounds' ratios: {statistics.median(ratios):.2f}x "
          f"(target >= 2x; rounds: {', '.join(f'{r:.2f}x' for r in ratios)}; ratio of the medians: "
          f"{batched / unbatched:.2f}x)")
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
