#!/usr/bin/env python3
"""What TensorFlow Lite serving and warm-up files cost in the embedded model server, in one run.

    .venv/bin/python scripts/benchmark_tflite_warmup.py [--seconds 5] [--rounds 5] [--load-rounds 10]

Measures:
- REST predict requests/s at concurrency 8 (wrk, as benchmark_model_server.py) of TFS's half_plus_two as a
  TensorFlow Lite model (--prefer_tflite_model) against its SavedModel (the same function, y = 0.5x + 2), both
  served by one model server, in alternating rounds: the medians, and the median of the rounds' ratios;
- the load of half_plus_three (in-process, as the server loads a version) without a warm-up file and with one of
  100 predict records, in alternating rounds: the medians, and the median of the rounds' differences (the time
  warm-up adds to the load). Target: under one second.
Figures are noisy on a shared machine: compare ratios and differences of one run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from benchmark_model_server import MODEL, REPO, Server, wrk

TESTDATA = REPO / "test" / "data" / "tfs-reference-models"
RECORDS = 100


def write_warmup_file(version: Path, records: int) -> None:
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2, prediction_log_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name = "half_plus_three"
    request.inputs["x"].CopyFrom(tf.make_tensor_proto([1.0, 2.0, 5.0], tf.float32))
    log = prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request))
    (version / "assets.extra").mkdir(exist_ok=True)
    with tf.io.TFRecordWriter(str(version / "assets.extra" / "tf_serving_warmup_requests")) as writer:
        for _ in range(records):
            writer.write(log.SerializeToString())


def load_rounds(workdir: Path, rounds: int) -> tuple[list[float], list[float]]:
    """(seconds to load without warm-up, seconds to load and replay 100 records), per round."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from sagemaker_tfs.model_server import servable, warmup

    plain = MODEL / "00000123"
    warmed = workdir / "warmed" / "00000123"
    shutil.copytree(plain, warmed)
    write_warmup_file(warmed, RECORDS)

    def load(path: Path) -> float:
        start = time.perf_counter()
        loaded = servable.load("half_plus_three", 123, path)
        warmup.replay(loaded, path, 1, None)  # no file at `plain`: a look for it, as the server does
        seconds = time.perf_counter() - start
        loaded.close()
        return seconds

    load(plain)  # TensorFlow's first load in a process does one-time work
    without, with_file = [], []
    for _ in range(rounds):
        without.append(load(plain))
        with_file.append(load(warmed))
    return without, with_file


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--load-rounds", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-tflite-") as tmp:
        workdir = Path(tmp)
        server = Server(
            workdir,
            batching=False,
            extra=("--prefer_tflite_model",),
            models={
                "tflite": TESTDATA / "saved_model_half_plus_two_tflite",
                "saved_model": TESTDATA / "saved_model_half_plus_two_cpu",
            },
        )
        try:
            rounds = [
                (
                    wrk(server.rest_port, 8, args.seconds, workdir, "tflite"),
                    wrk(server.rest_port, 8, args.seconds, workdir, "saved_model"),
                )
                for _ in range(args.rounds)
            ]
        finally:
            server.stop()
        without, with_file = load_rounds(workdir, args.load_rounds)
    lite, saved = zip(*rounds, strict=True)
    print(f"REST predict at concurrency 8, half_plus_two ({args.rounds} alternating rounds of {args.seconds:g} s):")
    print(f"  TensorFlow Lite   {statistics.median(lite):10.0f} req/s (median)")
    print(f"  SavedModel        {statistics.median(saved):10.0f} req/s (median)")
    print(f"  TFLite/SavedModel {statistics.median(a / b for a, b in rounds):10.2f}x (median of the rounds' ratios)")
    added = statistics.median(w - p for p, w in zip(without, with_file, strict=True))
    print(f"Load of half_plus_three ({args.load_rounds} alternating rounds):")
    print(f"  without a warm-up file           {statistics.median(without) * 1000:8.1f} ms (median)")
    print(f"  with {RECORDS} warm-up records       {statistics.median(with_file) * 1000:8.1f} ms (median)")
    print(
        f"  added by warm-up                 {added * 1000:8.1f} ms (median of the rounds' differences); "
        f"target < 1000 ms: {'met' if added < 1 else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
