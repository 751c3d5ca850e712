#!/usr/bin/env python3
"""Throughput of the embedded model server on half_plus_three with 3-value instances, in one run.

    .venv/bin/python scripts/benchmark_model_server.py [--seconds 5] [--rounds 5] [--grpc-rounds 5]

Measures:
- the in-process signature call rate: TensorFlow's (Session.run of the signature's tensors by name, as TFS runs
  a signature; tf.saved_model.load cannot load this TF1 model), and our engine's (Servable.run, the C session
  call the server makes without Session.run's Python layers);
- REST predict requests/s at concurrency 1, 8 and 32 (wrk, C, one client thread, 8 keep-alive connections at
  concurrency 8);
- gRPC Predict requests/s at concurrency 8 with h2load (nghttp2's HTTP/2 load generator, C, one client thread):
  one connection carrying 8 concurrent calls, as a gRPC channel does, each a PredictRequest with a 30 s deadline
  (the `grpc-timeout` header), the same body as a Python stub sends. h2load does not read gRPC statuses (an
  error is an HTTP 200 whose trailers say so), so the answers' bytes are checked against successful ones';
- gRPC Predict requests/s from tensorflow-serving-api's Python stub with 8 threads, for reference: that client
  is bound by its own GIL, about a fifth of what the server answers, so it is no measure of the server;
- gRPC (h2load) against REST (wrk) at concurrency 8 on the same server, in alternating rounds, so that both see
  the same machine: the medians, and the median of the rounds' ratios;
- REST at concurrency 32 with and without batching, in alternating rounds against two servers running side by
  side: the medians, and the median of the rounds' ratios.
Prints a table and three targets: REST at concurrency 8 >= 40% of the in-process signature call rate; gRPC
>= 1.0x REST at concurrency 8; batching at concurrency 32 >= 2x no batching. Figures are noisy on a shared
machine: run it on an idle one, and compare ratios of one run.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MODEL = REPO / "test" / "data" / "tfs-reference-models" / "saved_model_half_plus_three"
BODY = '{"instances": [1.0, 2.0, 5.0]}'
BATCHING = (
    "max_batch_size { value: 64 }\nbatch_timeout_micros { value: 0 }\n"
    "max_enqueued_batches { value: 1000 }\nnum_batch_threads { value: 1 }\n"
)


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
    """A model server serving `models` (name: base path; default half_plus_three), with `extra` flags."""

    def __init__(self, workdir: Path, batching: bool, models: dict[str, Path] | None = None, extra: tuple = ()):
        self.rest_port, self.grpc_port = free_port(), free_port()
        config = workdir / "models.config"
        config.write_text(
            "model_config_list {{ {} }}".format(
                " ".join(
                    f'config {{ name: "{name}" base_path: "{path}" model_platform: "tensorflow" }}'
                    for name, path in (models or {"half_plus_three": MODEL}).items()
                )
            )
        )
        args = [
            sys.executable,
            "-m",
            "sagemaker_tfs.model_server",
            f"--port={self.grpc_port}",
            f"--rest_api_port={self.rest_port}",
            f"--model_config_file={config}",
            "--max_num_load_retries=0",
            "--file_system_poll_wait_seconds=0",
            *extra,
        ]
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


def wrk(port: int, connections: int, seconds: float, workdir: Path, model: str = "half_plus_three") -> float:
    script = workdir / "post.lua"
    script.write_text(f"wrk.method = 'POST'\nwrk.body = '{BODY}'\nwrk.headers['Content-Type'] = 'application/json'\n")
    url = f"http://127.0.0.1:{port}/v1/models/{model}:predict"
    subprocess.run(["wrk", "-t1", f"-c{connections}", "-d1s", "-s", str(script), url], capture_output=True)  # warm
    out = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{seconds:g}s", "-s", str(script), url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    if "Non-2xx" in out:
        raise SystemExit(f"wrk saw errors:\n{out}")
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))


def predict_request():
    import numpy as np
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name = "half_plus_three"
    request.inputs["x"].CopyFrom(tf.make_tensor_proto(np.array([1.0, 2.0, 5.0], np.float32)))
    return request


def grpc_frame(message: bytes) -> bytes:
    """A gRPC length-prefixed message: uncompressed flag, 4-byte big-endian length, the message."""
    return b"\0" + struct.pack(">I", len(message)) + message


class H2load:
    """gRPC Predict calls from h2load: one connection, `streams` concurrent calls."""

    def __init__(self, port: int, workdir: Path):
        import grpc
        from tensorflow_serving.apis import prediction_service_pb2_grpc

        request = predict_request()
        self.body = workdir / "predict.grpc"
        self.body.write_bytes(grpc_frame(request.SerializeToString()))
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:  # the answer every call must get
            response = prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(request, timeout=30)
        self.answer_bytes = len(grpc_frame(response.SerializeToString()))
        self.url = f"http://127.0.0.1:{port}/tensorflow.serving.PredictionService/Predict"

    def rate(self, streams: int, seconds: float) -> float:
        self._run(streams, 1)  # warm-up, as wrk's
        return self._run(streams, seconds)

    def _run(self, streams: int, seconds: float) -> float:
        out = subprocess.run(
            [
                "h2load",
                "-t1",
                "-c1",
                f"-m{streams}",
                f"-D{seconds:g}",
                "-d",
                str(self.body),
                "-H",
                "content-type: application/grpc",
                "-H",
                "te: trailers",
                "-H",
                "grpc-timeout: 30S",
                self.url,
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        done = int(re.search(r"(\d+) done, \d+ succeeded, 0 failed, 0 errored", out).group(1))
        data = int(re.search(r"\((\d+)\) data", out).group(1))
        # An error answer has no message: short of bytes (calls cut at the end may add up to `streams` answers)
        if not done or not 0 <= data - done * self.answer_bytes <= streams * self.answer_bytes:
            raise SystemExit(
                f"h2load saw gRPC errors ({data} bytes of answers for {done} calls of {self.answer_bytes}):\n{out}"
            )
        return float(re.search(r"finished in [\d.]+s, ([\d.]+) req/s", out).group(1))


def grpc_stub_rate(port: int, threads: int, seconds: float) -> float:
    import grpc
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    request = predict_request()
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
    parser.add_argument("--grpc-rounds", type=int, default=5, help="alternating rounds of gRPC against REST")
    args = parser.parse_args()
    for tool, package in (("wrk", "wrk"), ("h2load", "nghttp2-client")):
        if not shutil.which(tool):
            raise SystemExit(f"{tool} is not installed (scripts/install.sh installs it: apt package {package})")
    workdir = Path(tempfile.mkdtemp(prefix="benchmark-model-server-"))
    results: dict[str, float] = {}
    ours, reference = in_process_rates(args.seconds)
    results["in-process signature call, TensorFlow Session.run (calls/s)"] = reference
    results["in-process signature call, our engine Servable.run (calls/s)"] = ours
    plain, batching = Server(workdir, batching=False), None
    try:
        batching = Server(workdir, batching=True)
        for connections in (1, 8, 32):
            results[f"REST predict, concurrency {connections} (req/s)"] = wrk(
                plain.rest_port, connections, args.seconds, workdir
            )
        h2load = H2load(plain.grpc_port, workdir)
        results["gRPC Predict, concurrency 8, h2load (req/s)"] = h2load.rate(8, args.seconds)
        results["gRPC Predict, Python stub, 8 threads: client-bound (req/s)"] = grpc_stub_rate(
            plain.grpc_port, 8, args.seconds
        )
        grpc_rounds = [
            (wrk(plain.rest_port, 8, args.seconds, workdir), h2load.rate(8, args.seconds))
            for _ in range(args.grpc_rounds)
        ]
        rounds = [
            (wrk(plain.rest_port, 32, args.seconds, workdir), wrk(batching.rest_port, 32, args.seconds, workdir))
            for _ in range(args.rounds)
        ]
    finally:
        plain.stop()
        if batching is not None:
            batching.stop()
    rest8_median, grpc8_median = (statistics.median(column) for column in zip(*grpc_rounds, strict=True))
    results["REST predict, concurrency 8, alternating rounds with gRPC, median (req/s)"] = rest8_median
    results["gRPC Predict, concurrency 8, alternating rounds with REST, median (req/s)"] = grpc8_median
    unbatched, batched = (statistics.median(column) for column in zip(*rounds, strict=True))
    results["REST predict, concurrency 32, alternating rounds, median (req/s)"] = unbatched
    results["REST predict with batching, concurrency 32, alternating rounds, median (req/s)"] = batched
    width = max(map(len, results))
    for name, value in results.items():
        print(f"{name:<{width}}  {value:>10,.0f}")
    rest8 = results["REST predict, concurrency 8 (req/s)"]
    print(
        f"REST c8 / in-process signature call (TensorFlow): {rest8 / reference:.0%}  (target >= 40%); "
        f"/ our engine's C call: {rest8 / ours:.0%}"
    )
    grpc_ratios = [g / r for r, g in grpc_rounds]
    print(
        f"gRPC c8 / REST c8, median of the rounds' ratios: {statistics.median(grpc_ratios):.2f}x (target >= 1.0x; "
        f"rounds: {', '.join(f'{r:.2f}x' for r in grpc_ratios)}; ratio of the medians: "
        f"{grpc8_median / rest8_median:.2f}x)"
    )
    ratios = [b / u for u, b in rounds]  # each round measures both back to back: the machine's drift cancels
    print(
        f"batching c32 / no batching c32, median of the rounds' ratios: {statistics.median(ratios):.2f}x "
        f"(target >= 2x; rounds: {', '.join(f'{r:.2f}x' for r in ratios)}; ratio of the medians: "
        f"{batched / unbatched:.2f}x)"
    )
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
