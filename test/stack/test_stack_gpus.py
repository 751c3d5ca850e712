"""GPU machines through the real `serve` (docs/gpu.md), on a machine without a GPU: a stand-in `nvidia-smi`, first
on serve's PATH, lists the GPUs. An inference toolkit script whose model_fn loads the model gets one worker per GPU
by default, each worker a stable slot and gpu_id = slot mod GPUs (a replacement takes the dead worker's slot);
handler scripts keep one worker per core, and the model servers one instance per GPU, each pinned to its GPU."""

from __future__ import annotations

import os
import re
import shutil
import signal
import stat
from pathlib import Path

import model_dirs
import paths
import processes
import pytest
import serve_stack
from sagemaker_tfs.config import cpu_count
from stack_support import invoke

# Prints what the toolkit gave model_fn (the test reads it from the log), and answers it with the worker's pid.
SCRIPT = """
    import os
    import sys

    def model_fn(model_dir, context):
        sys.stdout.write(f"model_fn saw gpu_id={context.system_properties['gpu_id']} in pid {os.getpid()}\\n")
        return context.system_properties["gpu_id"]

    def predict_fn(data, model):
        return {"gpu_id": model, "pid": os.getpid()}
"""
SEEN = re.compile(r"model_fn saw gpu_id=(\w+) in pid (\d+)")
SCRIPT_LOADS = "one per GPU: the script's model_fn loads the model"


def listing(count: int) -> str:
    return "".join(
        f"GPU {i}: NVIDIA A10G (UUID: GPU-{i}{i}{i}{i}aaaa-bbbb-cccc-dddd-eeeeeeeeeeee)\n" for i in range(count)
    )


# GPU 0 in MIG mode with three MIG devices (a CUDA process enumerates one of them), GPU 1 whole: CUDA sees 2
MIG = (
    "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77)\n"
    "  MIG 1g.5gb      Device  0: (UUID: MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f)\n"
    "  MIG 1g.5gb      Device  1: (UUID: MIG-cba663e8-9bed-5b25-b243-5985ef7c9beb)\n"
    "  MIG 2g.10gb     Device  2: (UUID: MIG-1e3ea1d3-2f4f-5c1b-a8a6-3c0e4d87e5b7)\n"
    "GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-a4c07c49-9a32-7d7c-0c1c-2b4ef1d4c8a1)\n"
)


@pytest.fixture(autouse=True)
def no_gpu_variables(monkeypatch):
    """serve gets only the GPU variables a test gives it."""
    for name in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)


def stand_in(tmp_path: Path, body: str) -> dict[str, str]:
    """serve's PATH with a stand-in nvidia-smi first, a shell script running `body` when called with -L."""
    folder = tmp_path / "bin"
    folder.mkdir()
    program = folder / "nvidia-smi"
    program.write_text(f'#!/bin/sh\n[ "$1" = "-L" ] || exit 64\n{body}\n')
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    return {"PATH": f"{folder}:{os.environ['PATH']}"}


def listing_nvidia_smi(tmp_path: Path, text: str) -> dict[str, str]:
    return stand_in(tmp_path, f"cat <<'EOF'\n{text}EOF")


def toolkit_stack(tmp_path: Path, env: dict[str, str]) -> serve_stack.Stack:
    return serve_stack.Stack(model_dirs.write_code(tmp_path / "model", SCRIPT), env=env)


def gpu_line(stack: serve_stack.Stack) -> str:
    """serve's start-up line about the GPUs (logged before gunicorn starts, so there once the stack is ready)."""
    text = processes.wait_for_log(stack, " INFO serve: GPUs: ")
    lines = [line.split(" INFO serve: ", 1)[1] for line in text.splitlines() if " INFO serve: GPUs: " in line]
    assert len(lines) == 1, text
    return lines[0]


def seen(stack: serve_stack.Stack, workers: int) -> dict[int, str]:
    """{worker pid: the gpu_id its model_fn saw} once `workers` model_fns have run."""
    text = processes.wait_for_log(stack, "model_fn saw gpu_id=", count=workers)
    return {int(pid): gpu_id for gpu_id, pid in SEEN.findall(text)}


def test_four_gpus_one_worker_per_gpu_and_a_replacement_takes_the_dead_workers_gpu(tmp_path):
    with toolkit_stack(tmp_path, listing_nvidia_smi(tmp_path, listing(4))) as stack:
        assert gpu_line(stack) == (
            f"GPUs: 4 seen by CUDA (nvidia-smi -L lists 4 GPUs); gunicorn workers: 4 ({SCRIPT_LOADS}), toolkit gpu_id "
            "by worker slot: 0->0, 1->1, 2->2, 3->3; model servers: none"
        )
        by_pid = seen(stack, 4)
        assert sorted(by_pid.values()) == ["0", "1", "2", "3"]
        assert stack.gunicorn_workers() == set(by_pid)
        answer = invoke(stack, "[1]")
        assert answer.status == 200 and str(answer.json()["gpu_id"]) == by_pid[answer.json()["pid"]]

        victim = next(pid for pid, gpu_id in by_pid.items() if gpu_id == "2")
        os.kill(victim, signal.SIGKILL)
        after = seen(stack, 5)
        (replacement,) = set(after) - set(by_pid)
        assert after[replacement] == "2"
        processes.wait_for(
            lambda: stack.gunicorn_workers() == set(by_pid) - {victim} | {replacement},
            what="the replacement to be the only new worker",
        )


def test_the_toolkit_worker_count_overrides_the_gpu_default_and_spreads_over_every_gpu(tmp_path):
    env = {**listing_nvidia_smi(tmp_path, listing(4)), "SAGEMAKER_MODEL_SERVER_WORKERS": "6"}
    with toolkit_stack(tmp_path, env) as stack:
        assert gpu_line(stack) == (
            "GPUs: 4 seen by CUDA (nvidia-smi -L lists 4 GPUs); gunicorn workers: 6 (SAGEMAKER_MODEL_SERVER_WORKERS), "
            "toolkit gpu_id by worker slot: 0->0, 1->1, 2->2, 3->3, 4->0, 5->1; model servers: none"
        )
        assert sorted(seen(stack, 6).values()) == ["0", "0", "1", "1", "2", "3"]
        assert len(stack.gunicorn_workers()) == 6


def test_one_gpu_one_worker(tmp_path):
    with toolkit_stack(tmp_path, listing_nvidia_smi(tmp_path, listing(1))) as stack:
        assert gpu_line(stack) == (
            f"GPUs: 1 seen by CUDA (nvidia-smi -L lists 1 GPU); gunicorn workers: 1 ({SCRIPT_LOADS}), toolkit gpu_id "
            "by worker slot: 0->0; model servers: none"
        )
        assert list(seen(stack, 1).values()) == ["0"]
        assert len(stack.gunicorn_workers()) == 1


def test_mig_devices_count_as_cuda_enumerates_them(tmp_path):
    with toolkit_stack(tmp_path, listing_nvidia_smi(tmp_path, MIG)) as stack:
        assert gpu_line(stack) == (
            "GPUs: 2 seen by CUDA (nvidia-smi -L lists 2 GPUs, 3 MIG devices (a CUDA process sees one)); gunicorn "
            f"workers: 2 ({SCRIPT_LOADS}), toolkit gpu_id by worker slot: 0->0, 1->1; model servers: none"
        )
        assert sorted(seen(stack, 2).values()) == ["0", "1"]


def test_cuda_visible_devices_chooses_the_gpus_and_gpu_id_indexes_them(tmp_path):
    env = {**listing_nvidia_smi(tmp_path, listing(4)), "CUDA_VISIBLE_DEVICES": "3,1,7"}  # 7: none; CUDA stops there
    with toolkit_stack(tmp_path, env) as stack:
        assert gpu_line(stack) == (
            "GPUs: 2 seen by CUDA (nvidia-smi -L lists 4 GPUs, CUDA_VISIBLE_DEVICES=3,1,7); gunicorn workers: 2 "
            f"({SCRIPT_LOADS}), toolkit gpu_id by worker slot: 0->0, 1->1; model servers: none"
        )
        assert sorted(seen(stack, 2).values()) == ["0", "1"]


@pytest.mark.parametrize(
    "nvidia_smi, how",
    [
        ("echo 'No devices were found'; exit 6", "nvidia-smi -L failed (exit 6): No devices were found"),
        (
            "echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.'; exit 9",
            "nvidia-smi -L failed (exit 9): NVIDIA-SMI has failed because it could not communicate with the NVIDIA "
            "driver.",
        ),
        (None, "nvidia-smi not found"),
    ],
    ids=["no GPU listed", "no driver", "no nvidia-smi"],
)
def test_without_gpus_one_worker_per_core_and_gpu_id_none(tmp_path, nvidia_smi, how):
    env = stand_in(tmp_path, nvidia_smi) if nvidia_smi else {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    if shutil.which("nvidia-smi", path=env["PATH"]) and not nvidia_smi:
        pytest.skip("this machine has an nvidia-smi")
    with toolkit_stack(tmp_path, env) as stack:
        cores = cpu_count()
        assert gpu_line(stack) == (
            f"GPUs: 0 seen by CUDA ({how}); gunicorn workers: {cores} (one per core), toolkit "
            "gpu_id by worker slot: None; model servers: none"
        )
        assert list(seen(stack, cores).values()) == ["None"] * cores
        if nvidia_smi:
            processes.wait_for_log(stack, f"WARNING serve: {how}: counting no GPU")


def test_a_hanging_nvidia_smi_costs_its_timeout_then_counts_no_gpu(tmp_path):
    pid_file = tmp_path / "nvidia-smi.pid"
    env = {**stand_in(tmp_path, f"echo $$ > {pid_file}; exec sleep 600"), "SAGEMAKER_NVIDIA_SMI_TIMEOUT_SECONDS": "1"}
    with toolkit_stack(tmp_path, env) as stack:
        how = "nvidia-smi -L did not answer within 1 s"
        assert gpu_line(stack) == (
            f"GPUs: 0 seen by CUDA ({how}); gunicorn workers: {cpu_count()} (one per core), "
            "toolkit gpu_id by worker slot: None; model servers: none"
        )
        processes.wait_for_log(stack, f"WARNING serve: {how} (SAGEMAKER_NVIDIA_SMI_TIMEOUT_SECONDS): counting no GPU")
        hung = int(pid_file.read_text())
        processes.wait_for(lambda: not processes.pid_alive(hung), what="the hanging nvidia-smi to be killed")


def test_a_handler_script_keeps_a_worker_per_core_and_gets_a_model_server_per_gpu(tmp_path):
    """The model servers hold the model: workers per core; one instance per GPU CUDA sees (SAGEMAKER_TFS_INSTANCE_COUNT
    unset), each pinned to its GPU as serve's CUDA_VISIBLE_DEVICES names it, with the memory share rule."""
    folder = model_dirs.write_code(
        model_dirs.copy_model(paths.HALF_PLUS_THREE, tmp_path, "model"),
        "def handler(data, context):\n    return data.read(), 'application/json'\n",
    )
    env = {
        **listing_nvidia_smi(tmp_path, listing(4)),
        "CUDA_VISIBLE_DEVICES": "1,2,3",
        "SAGEMAKER_TFS_INSTANCE_COUNT": "",
    }  # unset
    with serve_stack.Stack(folder, env=env, instances=3) as stack:
        cores = cpu_count()
        slots = ", ".join(f"{slot}->{slot % 3}" for slot in range(cores))
        assert gpu_line(stack) == (
            f"GPUs: 3 seen by CUDA (nvidia-smi -L lists 4 GPUs, CUDA_VISIBLE_DEVICES=1,2,3); gunicorn workers: {cores} "
            f"(one per core), toolkit gpu_id by worker slot: {slots}; model servers: 3 (one per GPU), "
            "CUDA_VISIBLE_DEVICES by instance: 0->1, 1->2, 2->3, --per_process_gpu_memory_fraction=0.8"
        )
        pinned = [environ(stack.pid_of(f"tfs-{i}")).get("CUDA_VISIBLE_DEVICES") for i in range(3)]
        assert pinned == ["1", "2", "3"]
        assert len(stack.gunicorn_workers()) == cores
        assert invoke(stack, '{"instances": [1.0]}').text == '{"instances": [1.0]}'


def environ(pid: int) -> dict[str, str]:
    entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(entry.decode().split("=", 1) for entry in entries if b"=" in entry)
