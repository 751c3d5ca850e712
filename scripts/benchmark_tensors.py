#!/usr/bin/env python3
"""Latency of large numeric tensors: REST predict against gRPC Predict, in one run.

    .venv/bin/python scripts/benchmark_tensors.py [--part all|model_server|invocations] [--calls 30] [--warmup 3]

Parts (--part, default all):
- model_server: the embedded model server (tfs-model-server) serving saved_model_half_plus_two_cpu (y = 0.5x + 2,
  any shape of float32), at concurrency 1, for (a) one 224x224x3 float32 image and (b) a batch of 32 of them.
  REST: `{"instances": [<224x224x3 nested lists>, ...]}` (about 3 MB of JSON an image, the floats as Python
  writes them) posted on one keep-alive connection, the answer's body read whole (about 1.8 MB an image).
  gRPC: a PredictRequest whose input is a TensorProto with tensor_content (tf.make_tensor_proto), through
  PredictionServiceStub, the answer turned into numpy (tf.make_ndarray). Both request bodies are built once,
  before the timing; each call is timed from send to the answer in hand. The two kinds of call alternate, so
  that both see the same machine; the medians of `--calls` calls each (after `--warmup` calls) are printed with
  their ratio and the target: REST <= 2x gRPC.
- invocations: `serve` (nginx, gunicorn with the app, the embedded model server) serving half_plus_two twice, with
  no script and with a handler that calls `context.predict_arrays` and answers the output as NPY. For one image and
  for a batch of 32, at concurrency 1 and 8 (each client thread its own keep-alive connection, the kinds of call one
  after the other): `POST /invocations` with NPY in and out (the default handler's binary path), NPY in and JSON out
  (the same, its answer written as JSON in the app), with the image as JSON in and out (one image only: a batch of 32
  is 100 MB of JSON), through the script, and the same model server's gRPC Predict as above, as the reference.
  Medians of every call of a kind; targets: NPY <= 1.5x gRPC, JSON <= 3x.
Figures are noisy on a shared machine: compare the ratios of one run.
"""

from __future__ import annotations

import argparse
import http.client
import io
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchmark_model_server import REPO, Server  # noqa: E402

MODEL = REPO / "test" / "data" / "tfs-reference-models" / "saved_model_half_plus_two_cpu"
MODEL_NAME = "half_plus_two"
IMAGE_SHAPE = (224, 224, 3)
TARGET_RATIO = 2.0
NPY = "application/x-npy"


def start_model_server(workdir: Path, extra: tuple = ()) -> Server:
    """The embedded model server serving half_plus_two, once its model answers."""
    server = Server(workdir, batching=False, models={MODEL_NAME: MODEL}, extra=extra)
    deadline = time.monotonic() + 120
    while True:  # the REST port may open before the model has loaded
        connection = http.client.HTTPConnection("127.0.0.1", server.rest_port, timeout=60)
        try:
            connection.request("POST", f"/v1/models/{MODEL_NAME}:predict", b'{"instances": [1.0]}')
            if connection.getresponse().status == 200:
                return server
        except OSError:
            pass
        finally:
            connection.close()
        if time.monotonic() > deadline:
            server.stop()
            raise SystemExit(f"model {MODEL_NAME} did not load; see {server.log.name}")
        time.sleep(0.5)


def images(count: int, seed: int = 0):
    """`count` float32 images of values in [0, 1), seeded."""
    import numpy as np

    return np.random.default_rng(seed).random((count, *IMAGE_SHAPE), dtype=np.float32)


class RestCaller:
    """POST one prepared body on a keep-alive connection; a call returns the answer's body."""

    def __init__(self, port: int, path: str, body: bytes):
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        self.path, self.body = path, body
        self.headers = {"Content-Type": "application/json"}

    def __call__(self) -> bytes:
        self.connection.request("POST", self.path, self.body, self.headers)
        response = self.connection.getresponse()
        answer = response.read()
        if response.status != 200:
            raise SystemExit(f"REST predict failed: {response.status} {answer[:300]!r}")
        return answer

    def close(self) -> None:
        self.connection.close()


class GrpcCaller:
    """Predict with one prepared request (tensor_content); a call returns the answer as numpy."""

    def __init__(self, port: int, model: str, inputs: dict):
        import grpc
        import tensorflow as tf
        from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

        self.tf = tf
        self.channel = grpc.insecure_channel(
            f"127.0.0.1:{port}", options=[("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
        )
        self.stub = prediction_service_pb2_grpc.PredictionServiceStub(self.channel)
        self.request = predict_pb2.PredictRequest()
        self.request.model_spec.name = model
        for name, array in inputs.items():
            self.request.inputs[name].CopyFrom(tf.make_tensor_proto(array))

    def __call__(self) -> dict:
        response = self.stub.Predict(self.request, timeout=600)
        return {name: self.tf.make_ndarray(proto) for name, proto in response.outputs.items()}

    def close(self) -> None:
        self.channel.close()


def alternating_medians(calls: dict[str, Callable[[], object]], count: int, warmup: int) -> dict[str, float]:
    """The median seconds of `count` timed calls of each callable, called in turn (after `warmup` of each)."""
    for _ in range(warmup):
        for call in calls.values():
            call()
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(count):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def check_same_answers(rest: RestCaller, grpc_call: GrpcCaller, expected) -> None:
    """Both APIs answer 0.5x + 2 (REST's floats as TFS writes them, parsed back to float32)."""
    import numpy as np

    predictions = np.array(json.loads(rest())["predictions"], np.float32)
    (answer,) = grpc_call().values()
    if not (np.array_equal(predictions, expected) and np.array_equal(answer, expected)):
        raise SystemExit("REST and gRPC answers differ from 0.5x + 2")


def model_server_part(args, workdir: Path) -> list[tuple[str, float, float]]:
    """(case, REST seconds, gRPC seconds) for one image and for a batch of 32."""
    import numpy as np

    server = start_model_server(workdir)
    rows = []
    try:
        for batch in (1, 32):
            x = images(batch)
            body = json.dumps({"instances": x.tolist()}).encode()
            rest = RestCaller(server.rest_port, f"/v1/models/{MODEL_NAME}:predict", body)
            grpc_call = GrpcCaller(server.grpc_port, MODEL_NAME, {"x": x})
            try:
                check_same_answers(rest, grpc_call, x * np.float32(0.5) + np.float32(2))
                medians = alternating_medians({"rest": rest, "grpc": grpc_call}, args.calls, args.warmup)
            finally:
                rest.close()
                grpc_call.close()
            label = f"{batch} image{'s' if batch > 1 else ''} 224x224x3 float32 ({len(body) / 1e6:.1f} MB of JSON)"
            rows.append((label, medians["rest"], medians["grpc"]))
    finally:
        server.stop()
    return rows


# ---- invocations: the whole container ----


def serve(workdir: Path, script: str | None = None):
    """`serve` (nginx, gunicorn with the app, the embedded model server) for half_plus_two on free ports, with
    `script` as code/inference.py; returns the started serve_stack.Stack (test/serve_stack.py)."""
    sys.path.insert(0, str(REPO / "test"))
    import serve_stack

    model_dir = workdir / ("scripted" if script else "default")
    shutil.copytree(MODEL, model_dir / "model")
    if script:
        (model_dir / "code").mkdir()
        (model_dir / "code" / "inference.py").write_text(script)
    return serve_stack.Stack(model_dir).start()


class InvocationsCaller(RestCaller):
    """POST /invocations with one prepared body, content type and Accept; a call returns the answer's body."""

    def __init__(self, port: int, body: bytes, content_type: str, accept: str):
        super().__init__(port, "/invocations", body)
        self.headers = {"Content-Type": content_type, "Accept": accept}


# a script's binary call: the NPY body's array through context.predict_arrays, the output array as NPY
PREDICT_ARRAYS_SCRIPT = """
import io

import numpy as np


def handler(data, context):
    outputs = context.predict_arrays(np.load(io.BytesIO(data.read()), allow_pickle=False))
    buffer = io.BytesIO()
    np.save(buffer, outputs["y"])
    return buffer.getvalue(), "application/x-npy"
"""


def concurrent_medians(
    calls: dict[str, Callable[[], Callable[[], object]]], clients: int, count: int, warmup: int
) -> dict[str, float]:
    """Per kind of call in turn, `clients` threads each making `count` calls (each thread its own caller, from the
    factory); the median seconds of all of a kind's calls."""
    import concurrent.futures

    medians = {}
    for name, factory in calls.items():
        callers = [factory() for _ in range(clients)]

        def run(caller) -> list[float]:
            for _ in range(warmup):
                caller()
            times = []
            for _ in range(count):
                start = time.perf_counter()
                caller()
                times.append(time.perf_counter() - start)
            return times

        try:
            with concurrent.futures.ThreadPoolExecutor(clients) as pool:
                medians[name] = statistics.median(t for times in pool.map(run, callers) for t in times)
        finally:
            for caller in callers:
                caller.close()
    return medians


def invocations_part(args, workdir: Path) -> list[tuple[str, dict[str, float]]]:
    """Per case and concurrency: the median seconds of /invocations (NPY in and out; JSON in and out; a script's
    context.predict_arrays) and of the model server's own gRPC Predict on the same server."""
    import numpy as np

    rows = []
    stacks = {"default": serve(workdir), "script": serve(workdir, PREDICT_ARRAYS_SCRIPT)}
    try:
        port = {name: stack.port for name, stack in stacks.items()}
        grpc_port = stacks["default"].model_server_ports[0]  # SAGEMAKER_SAFE_PORT_RANGE: gRPC first
        for batch in (1, 32):
            x = images(batch)
            npy_body = io.BytesIO()
            np.save(npy_body, x)
            npy_body = npy_body.getvalue()
            json_body = json.dumps({"instances": x.tolist()}).encode() if batch == 1 else b""
            kinds = {
                "grpc": lambda x=x: GrpcCaller(grpc_port, "model", {"x": x}),
                "npy": lambda body=npy_body: InvocationsCaller(port["default"], body, NPY, NPY),
                "npy_json": lambda body=npy_body: InvocationsCaller(port["default"], body, NPY, "application/json"),
                "script": lambda body=npy_body: InvocationsCaller(port["script"], body, NPY, NPY),
            }
            if batch == 1:  # 32 images are 100 MB of JSON: one image says what JSON costs
                kinds["json"] = lambda body=json_body: InvocationsCaller(
                    port["default"], body, "application/json", "application/json"
                )
            check = InvocationsCaller(port["default"], npy_body, NPY, NPY)
            answer = np.load(io.BytesIO(check()))
            check.close()
            if answer.dtype != np.float32 or not np.array_equal(answer, x * np.float32(0.5) + np.float32(2)):
                raise SystemExit("/invocations answered NPY other than 0.5x + 2 in float32")
            for clients in (1, 8):
                calls = max(3, args.calls // (4 if batch > 1 else 1))
                medians = concurrent_medians(kinds, clients, calls, args.warmup)
                label = f"{batch} image{'s' if batch > 1 else ''}, c={clients}"
                rows.append((label, medians))
    finally:
        for stack in stacks.values():
            stack.stop()
    return rows


def print_table(title: str, rows: list[tuple[str, float, float]]) -> None:
    print(f"{title}: c=1, medians")
    width = max(len(row[0]) for row in rows)
    print(f"{'case':<{width}}  {'REST ms':>9}  {'gRPC ms':>9}  {'REST/gRPC':>9}  target")
    for label, rest, grpc_seconds in rows:
        ratio = rest / grpc_seconds
        mark = "ok" if ratio <= TARGET_RATIO else "MISSED"
        print(
            f"{label:<{width}}  {rest * 1e3:>9.1f}  {grpc_seconds * 1e3:>9.1f}  {ratio:>8.2f}x  "
            f"<= {TARGET_RATIO:g}x {mark}"
        )


def print_invocations(title: str, rows: list[tuple[str, dict[str, float]]]) -> None:
    print(f"{title}: medians per call")
    kinds = (
        ("npy", "NPY in/out", 1.5),
        ("npy_json", "NPY in, JSON", None),
        ("json", "JSON in/out", 3.0),
        ("script", "predict_arrays", None),
    )
    print(f"{'case':<16}  {'gRPC ms':>8}  " + "  ".join(f"{name:>14} ms  x gRPC" for _, name, _ in kinds))
    for label, medians in rows:
        grpc_seconds = medians["grpc"]
        cells = []
        for key, _, target in kinds:
            if key not in medians:
                cells.append(f"{'-':>17}  {'':>6}")
                continue
            ratio = medians[key] / grpc_seconds
            mark = "" if target is None else (" ok" if ratio <= target else " MISSED")
            cells.append(f"{medians[key] * 1e3:>17.1f}  {ratio:>5.2f}x{mark}")
        print(f"{label:<16}  {grpc_seconds * 1e3:>8.1f}  " + "  ".join(cells))
    print("targets: NPY in/out <= 1.5x the model server's gRPC call, JSON <= 3x")


PARTS = {
    "model_server": ("embedded model server, REST predict vs gRPC Predict", model_server_part, print_table),
    "invocations": (
        "/invocations through serve (nginx, gunicorn, the app, the embedded model server) vs the "
        "model server's gRPC Predict",
        invocations_part,
        print_invocations,
    ),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=["all", *PARTS], default="all", help="what to measure (default: all)")
    parser.add_argument("--calls", type=int, default=30, help="timed calls of each kind per case")
    parser.add_argument("--warmup", type=int, default=3, help="untimed calls of each kind per case first")
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    workdir = Path(tempfile.mkdtemp(prefix="benchmark-tensors-"))
    try:
        for name, (title, measure, show) in PARTS.items():
            if args.part in ("all", name):
                show(f"{name}: {title}", measure(args, workdir))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
