#!/usr/bin/env python3
"""The serving half of scripts/gpu-check.sh (docs/gpu.md, "The GPU check"), run by it in the virtual environment it
made (sagemaker-tfs and PyTorch installed, nginx on PATH):

    scripts/gpu_check.py --work FOLDER

Writes a small PyTorch model (seeded weights) and an inference toolkit script whose model_fn loads it onto
cuda:{gpu_id} into FOLDER, starts `serve` on it with default settings (no worker count set), and checks:
  - serve's start-up line: one worker per GPU CUDA sees, gpu_ids 0..n-1;
  - every worker answers, each answer computed on cuda:{its gpu_id}, equal to the model run on the CPU here
    (float32, TF32 off; rtol 1e-4, atol 1e-5);
then prints the GPU memory each worker holds (nvidia-smi's per-process figure where it shows our processes, and
PyTorch's own allocation). Exits 1 naming what failed. This process never touches the GPU (the reference runs on
the CPU), so the memory figures are the workers' alone.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import http.client
import itertools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import torch

SCRIPT = r"""
import json
import os

import torch


def model_fn(model_dir, context):
    gpu_id = context.system_properties["gpu_id"]
    if gpu_id is None:
        raise RuntimeError("gpu_id is None: serve counted no GPU")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device(f"cuda:{gpu_id}")
    sizes = json.loads(open(os.path.join(model_dir, "sizes.json")).read())
    layers = []
    for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
        layers.append(torch.nn.Linear(n_in, n_out))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    module = torch.nn.Sequential(*layers)
    module.load_state_dict(torch.load(os.path.join(model_dir, "weights.pt"), map_location="cpu"))
    return module.to(device).eval(), device, gpu_id


def input_fn(data, content_type):
    return torch.tensor(json.loads(data), dtype=torch.float32)


def predict_fn(rows, model):
    module, device, gpu_id = model
    with torch.no_grad():
        out = module(rows.to(device))
    return {"outputs": out.cpu().tolist(), "device": str(out.device), "gpu_id": gpu_id, "pid": os.getpid(),
            "torch_reserved_mib": torch.cuda.memory_reserved(device) / 2**20}


def output_fn(prediction, accept):
    return json.dumps(prediction)
"""
SIZES = [256, 1024, 1024, 16]
ROWS, BATCH = 512, 16
LINE = re.compile(r"INFO serve: (GPUs: (\d+) seen by CUDA .*)$", re.M)
WORKER = re.compile(r"\[(\d+)\] \[INFO\] sagemaker_tfs\.toolkit: .*: gpu_id (\S+) \(worker slot (\d+)\)")


class CheckFailed(Exception):
    pass


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def gpu_memory_used() -> dict[str, int]:
    """{GPU index: MiB used}, per nvidia-smi."""
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=index,memory.used", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    return {index.strip(): int(used) for index, used in (line.split(",") for line in out.splitlines() if "," in line)}


def process_memory() -> dict[int, int]:
    """{pid: MiB} of the processes nvidia-smi sees on the GPUs (none in some containers, whose pids it cannot map)."""
    out = subprocess.run(
        ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    found = {}
    for line in out.splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            found[int(parts[0])] = int(parts[1])
    return found


def post(port: int, rows: list[list[float]]) -> dict:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        connection.request("POST", "/invocations", json.dumps(rows), {"Content-Type": "application/json"})
        answer = connection.getresponse()
        body = answer.read()
    finally:
        connection.close()
    if answer.status != 200:
        raise CheckFailed(f"/invocations answered {answer.status}: {body[:500]!r}")
    return json.loads(body)


def ping(port: int) -> int | None:
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        connection.request("GET", "/ping")
        status = connection.getresponse().status
        connection.close()
        return status
    except OSError:
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True, help="a private folder for the model and the logs")
    work = parser.parse_args().work
    model_dir = work / "model"
    (model_dir / "code").mkdir(parents=True)
    (model_dir / "code" / "inference.py").write_text(SCRIPT)
    (model_dir / "sizes.json").write_text(json.dumps(SIZES))
    torch.manual_seed(0)
    layers = []
    for i, (n_in, n_out) in enumerate(itertools.pairwise(SIZES)):
        layers.append(torch.nn.Linear(n_in, n_out))
        if i < len(SIZES) - 2:
            layers.append(torch.nn.ReLU())
    reference_model = torch.nn.Sequential(*layers).eval()
    torch.save(reference_model.state_dict(), model_dir / "weights.pt")
    inputs = torch.randn(ROWS, SIZES[0], generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        reference = reference_model(inputs)

    before = gpu_memory_used()
    port = free_port()
    env = {
        name: value
        for name, value in os.environ.items()  # default settings: none of ours is set
        if not name.startswith(("SAGEMAKER_", "TFS_"))
    }
    env.update(
        SAGEMAKER_BIND_TO_PORT=str(port),
        SAGEMAKER_MODEL_DIR=str(model_dir),
        SAGEMAKER_RUNTIME_DIR=str(work / "runtime"),
        PYTHONUNBUFFERED="1",
    )
    log_path = work / "serve.log"
    serve = Path(sys.executable).parent / "serve"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([str(serve)], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        return check(proc, port, log_path, inputs, reference, before)
    except CheckFailed as exc:
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-40:])
        print(f"gpu-check: FAILED: {exc}\n--- the end of serve's log ---\n{tail}", file=sys.stderr)
        return 1
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def check(
    proc: subprocess.Popen,
    port: int,
    log_path: Path,
    inputs: torch.Tensor,
    reference: torch.Tensor,
    before: dict[str, int],
) -> int:
    started = time.monotonic()
    while ping(port) != 200:
        if proc.poll() is not None:
            raise CheckFailed(f"serve exited with status {proc.returncode} before answering /ping")
        if time.monotonic() - started > 200:
            raise CheckFailed("serve did not answer /ping with 200 within 200 s")
        time.sleep(0.5)
    print(f"gpu-check: serve ready in {time.monotonic() - started:.1f} s")
    text = log_path.read_text(errors="replace")
    line = LINE.search(text)
    if line is None:
        raise CheckFailed("serve logged no `GPUs: ...` line")
    print(f"gpu-check: serve: {line.group(1)}")
    gpus = int(line.group(2))
    workers = {int(pid): (int(slot), gpu_id) for pid, gpu_id, slot in WORKER.findall(text)}
    cuda_count = torch.cuda.device_count()  # no CUDA context in this process: cuInit only
    if gpus != cuda_count:
        raise CheckFailed(f"serve counted {gpus} GPU(s), PyTorch counts {cuda_count}")
    if sorted(slot for slot, _ in workers.values()) != list(range(gpus)):
        raise CheckFailed(f"expected one worker per GPU, slots 0..{gpus - 1}; the workers: {workers}")
    if sorted(gpu_id for _, gpu_id in workers.values()) != [str(i) for i in range(gpus)]:
        raise CheckFailed(f"expected gpu_ids 0..{gpus - 1}, one each; the workers: {workers}")

    answered: dict[int, dict] = {}
    batches = [list(range(start, start + BATCH)) for start in range(0, ROWS, BATCH)]
    rounds = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=2 * gpus + 2) as pool:
        while set(answered) != set(workers):
            rounds += 1
            if rounds > 20:
                raise CheckFailed(
                    f"after {rounds - 1} rounds of requests, only workers {sorted(answered)} of "
                    f"{sorted(workers)} answered"
                )
            futures = {pool.submit(post, port, inputs[batch].tolist()): batch for batch in batches}
            for future, batch in futures.items():
                answer = future.result()
                if answer["pid"] not in workers:
                    raise CheckFailed(f"an answer came from pid {answer['pid']}, not one of the workers {workers}")
                expected = f"cuda:{workers[answer['pid']][1]}"
                if answer["device"] != expected or str(answer["gpu_id"]) != workers[answer["pid"]][1]:
                    raise CheckFailed(
                        f"worker {answer['pid']} computed on {answer['device']} with gpu_id "
                        f"{answer['gpu_id']}, expected {expected}"
                    )
                got = torch.tensor(answer["outputs"], dtype=torch.float32)
                if not torch.allclose(got, reference[batch], rtol=1e-4, atol=1e-5):
                    worst = (got - reference[batch]).abs().max().item()
                    raise CheckFailed(
                        f"worker {answer['pid']} on {answer['device']}: outputs differ from the CPU "
                        f"reference by up to {worst:g}"
                    )
                answered[answer["pid"]] = answer
    print(
        f"gpu-check: {len(batches) * rounds} requests of {BATCH} rows in {rounds} round(s): every answer computed "
        f"on its worker's GPU and equal to the CPU reference (rtol 1e-4, atol 1e-5)"
    )

    per_process = process_memory()
    after = gpu_memory_used()
    print("gpu-check: GPU memory per worker:")
    for pid, (slot, gpu_id) in sorted(workers.items(), key=lambda item: item[1][0]):
        smi = f"{per_process[pid]} MiB (nvidia-smi)" if pid in per_process else "n/a in nvidia-smi"
        print(
            f"    worker slot {slot}, pid {pid}, gpu_id {gpu_id}: {smi}, PyTorch reserved "
            f"{answered[pid]['torch_reserved_mib']:.1f} MiB"
        )
    for index in sorted(after):
        print(
            f"    GPU {index}: {after[index] - before.get(index, 0)} MiB more in use than before serve started "
            f"({after[index]} MiB in use)"
        )
    print(f"gpu-check: OK: {gpus} GPU(s), {len(workers)} worker(s), one per GPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
