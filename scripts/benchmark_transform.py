#!/usr/bin/env python3
"""Benchmark of local Batch Transform (issue 4): the seed write-up's job, two files of 100,000 JSON lines each.

In one run, against one stack of our container (started by the transform package, half_plus_three, default
handler), at the same concurrency:
  1. plain POST /invocations requests, one record each, from as many threads with keep-alive connections;
  2. the job with SplitType=Line, BatchStrategy=SingleRecord;
  3. the job with SplitType=Line, BatchStrategy=MultiRecord, MaxPayloadInMB=6.
It prints records/s for each and checks the targets: the runner adds at most 20 % over plain requests
(SingleRecord time / plain time <= 1.2), and MultiRecord processes at least 20 times more records/s than
SingleRecord. Exit status 1 when a target is missed.

  .venv/bin/python scripts/benchmark_transform.py [--records 100000] [--concurrency 4] [--json results.json]
"""

from __future__ import annotations

import argparse
import http.client
import json
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MODEL = REPO / "test" / "data" / "tfs-reference-models" / "saved_model_half_plus_three"

from sagemaker_tfs.transform import transform  # noqa: E402
from sagemaker_tfs.transform.containers import container_environment, start_containers, stop_containers  # noqa: E402

CONTENT_TYPE = "application/jsonlines"


def write_inputs(folder: Path, records: int) -> list[bytes]:
    """testdata1.jsonl and testdata2.jsonl as in the seed write-up ({"x": n} per line); returns all lines."""
    folder.mkdir(parents=True)
    lines = []
    for number in (1, 2):
        chunk = [json.dumps({"x": (i * 7 + number) % 3001}).encode() for i in range(records)]
        (folder / f"testdata{number}.jsonl").write_bytes(b"\n".join(chunk) + b"\n")
        lines += chunk
    return lines


def plain_requests(url: str, bodies: list[bytes], concurrency: int) -> float:
    """Seconds to send every body as its own request from `concurrency` keep-alive connections."""
    port = int(url.rsplit(":", 1)[1])
    headers = {"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE}
    errors: list[str] = []

    def worker(share: list[bytes]) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        for body in share:
            connection.request("POST", "/invocations", body=body, headers=headers)
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                errors.append(f"status {response.status}")
                return
        connection.close()

    threads = [threading.Thread(target=worker, args=(bodies[i::concurrency],)) for i in range(concurrency)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise SystemExit(f"plain requests failed: {errors[0]}")
    return elapsed


def job(url: str, data: Path, out: Path, strategy: str, concurrency: int) -> dict:
    description = transform(
        url,
        data=str(data),
        output_path=str(out),
        content_type=CONTENT_TYPE,
        accept=CONTENT_TYPE,
        split_type="Line",
        strategy=strategy,
        max_payload=6,
        max_concurrent_transforms=concurrency,
    )
    if description["TransformJobStatus"] != "Completed":
        raise SystemExit(f"{strategy} job failed: {json.dumps(description['LocalRun']['Objects'], indent=2)}")
    return description["LocalRun"]["Summary"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000, help="JSON lines per file (2 files)")
    parser.add_argument("--concurrency", type=int, default=4, help="MaxConcurrentTransforms and plain threads")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="benchmark-transform-"))
    containers = []
    try:
        lines = write_inputs(work / "in", args.records)
        model = work / "model"
        shutil.copytree(MODEL, model)
        print(f"starting one stack of the container for {model.name} ...", file=sys.stderr)
        containers = start_containers(model, 1, container_environment({}, None, None, None), work / "stack", 300)
        url = containers[0].url
        total = len(lines)
        plain_requests(url, lines[:2000], args.concurrency)  # warm-up
        print(f"plain requests: {total:,} at concurrency {args.concurrency} ...", file=sys.stderr)
        plain_seconds = plain_requests(url, lines, args.concurrency)
        print("SingleRecord job ...", file=sys.stderr)
        single = job(url, work / "in", work / "out-single", "SingleRecord", args.concurrency)
        print("MultiRecord job ...", file=sys.stderr)
        multi = job(url, work / "in", work / "out-multi", "MultiRecord", args.concurrency)
        for name in ("testdata1.jsonl.out", "testdata2.jsonl.out"):  # one JSON line per record either way
            if (work / "out-single" / name).read_bytes() != (work / "out-multi" / name).read_bytes():
                raise SystemExit(f"SingleRecord and MultiRecord outputs differ ({name})")
    finally:
        stop_containers(containers)
        shutil.rmtree(work, ignore_errors=True)
    figures = {
        "records": total,
        "concurrency": args.concurrency,
        "plain_requests_per_second": round(total / plain_seconds, 1),
        "single_record_per_second": single["RecordsPerSecond"],
        "multi_record_per_second": multi["RecordsPerSecond"],
        "multi_record_requests": multi["Requests"],
        "runner_overhead_percent": round((single["Seconds"] / plain_seconds - 1) * 100, 1),
        "multi_over_single": round(multi["RecordsPerSecond"] / single["RecordsPerSecond"], 1),
    }
    print(f"plain /invocations      {figures['plain_requests_per_second']:>12,.0f} records/s")
    print(
        f"SingleRecord job        {figures['single_record_per_second']:>12,.0f} records/s "
        f"(runner overhead {figures['runner_overhead_percent']:+.1f} %, target <= +20 %)"
    )
    print(
        f"MultiRecord job (6 MB)  {figures['multi_record_per_second']:>12,.0f} records/s "
        f"in {figures['multi_record_requests']} requests ({figures['multi_over_single']:.1f}x SingleRecord, "
        f"target >= 20x)"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    met = figures["runner_overhead_percent"] <= 20 and figures["multi_over_single"] >= 20
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
