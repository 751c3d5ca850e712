"""The GPU rules (docs/gpu.md), unit by unit: how many GPUs CUDA sees (shared/gpus.py), the default worker and
model server counts (config.py), the model servers' pinning and memory shares (stack/commands.py), and the worker
slots gunicorn's hooks give (wsgi_server/gunicorn_settings.py). test/stack/test_stack_gpus.py runs them through
`serve`."""

from __future__ import annotations

import stat
import time
from types import SimpleNamespace

import pytest
from sagemaker_tfs.config import ConfigError, Settings, default_worker_count
from sagemaker_tfs.shared import gpus, handler_contract, process_title
from sagemaker_tfs.shared.cpus import cpu_count
from sagemaker_tfs.shared.gpus import Gpu, cuda_devices, parse_listing
from sagemaker_tfs.stack import commands
from sagemaker_tfs.wsgi_server import gunicorn_settings

LISTING = """GPU 0: NVIDIA A10G (UUID: GPU-0aaaaaaa-1111-2222-3333-444444444444)
GPU 1: NVIDIA A10G (UUID: GPU-1bbbbbbb-1111-2222-3333-444444444444)
GPU 2: NVIDIA A10G (UUID: GPU-1bccccc0-1111-2222-3333-444444444444)
GPU 3: NVIDIA A10G (UUID: GPU-3ddddddd-1111-2222-3333-444444444444)
"""
MIG_LISTING = """GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77)
  MIG 3g.20gb     Device  0: (UUID: MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f)
  MIG 3g.20gb     Device  1: (UUID: MIG-cba663e8-9bed-5b25-b243-5985ef7c9beb)
GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-a4c07c49-9a32-7d7c-0c1c-2b4ef1d4c8a1)
  MIG 7g.40gb Device 0: (UUID: MIG-GPU-a4c07c49-9a32-7d7c-0c1c-2b4ef1d4c8a1/0/0)
GPU 2: Tesla T4 (UUID: GPU-77777777-9a32-7d7c-0c1c-2b4ef1d4c8a1)
"""
FOUR = parse_listing(LISTING)
MIG = parse_listing(MIG_LISTING)


def test_the_listing_gives_each_gpu_its_uuid_and_mig_devices():
    assert [gpu.uuid[:12] for gpu in FOUR] == ["GPU-0aaaaaaa", "GPU-1bbbbbbb", "GPU-1bccccc0", "GPU-3ddddddd"]
    assert MIG == [
        Gpu(
            "GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77",
            ("MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f", "MIG-cba663e8-9bed-5b25-b243-5985ef7c9beb"),
        ),
        Gpu("GPU-a4c07c49-9a32-7d7c-0c1c-2b4ef1d4c8a1", ("MIG-GPU-a4c07c49-9a32-7d7c-0c1c-2b4ef1d4c8a1/0/0",)),
        Gpu("GPU-77777777-9a32-7d7c-0c1c-2b4ef1d4c8a1"),
    ]
    assert parse_listing("GPU 0: Some GPU\nNo devices were found\n") == [Gpu("")]
    assert parse_listing("") == []


@pytest.mark.parametrize(
    "listed, env, devices",
    [
        (FOUR, {}, ("0", "1", "2", "3")),
        ([], {}, ()),
        # MIG: every MIG device of a GPU counts, and a process enumerates one of them; the T4 counts too
        (MIG, {}, ("0", "1")),
        (MIG[:1], {}, ("0",)),
        # CUDA_VISIBLE_DEVICES: in its order, up to the first entry naming no device; a repeat or an empty value: none
        (FOUR, {"CUDA_VISIBLE_DEVICES": "2,0"}, ("2", "0")),
        (FOUR, {"CUDA_VISIBLE_DEVICES": " 1 , 3 "}, ("1", "3")),
        (FOUR, {"CUDA_VISIBLE_DEVICES": "0,2,-1,1"}, ("0", "2")),
        (FOUR, {"CUDA_VISIBLE_DEVICES": "3,4,1"}, ("3",)),
        (FOUR, {"CUDA_VISIBLE_DEVICES": "1gpu,2"}, ("1gpu", "2")),  # CUDA reads indices as strtoul does
        (FOUR, {"CUDA_VISIBLE_DEVICES": "1,1"}, ()),
        (FOUR, {"CUDA_VISIBLE_DEVICES": ""}, ()),
        (FOUR, {"CUDA_VISIBLE_DEVICES": "-1"}, ()),
        (
            FOUR,
            {"CUDA_VISIBLE_DEVICES": "GPU-3ddddddd,GPU-0aaaaaaa-1111-2222-3333-444444444444"},
            ("GPU-3ddddddd", "GPU-0aaaaaaa-1111-2222-3333-444444444444"),
        ),
        (FOUR, {"CUDA_VISIBLE_DEVICES": "GPU-3,GPU-1b"}, ("GPU-3",)),  # GPU-1b is the prefix of two: it names none
        (FOUR, {"CUDA_VISIBLE_DEVICES": "GPU-ffff"}, ()),
        (FOUR, {"CUDA_VISIBLE_DEVICES": "1,GPU-3ddddddd"}, ("1", "GPU-3ddddddd")),
        (MIG, {"CUDA_VISIBLE_DEVICES": "MIG-cba663e8,GPU-77777777"}, ("MIG-cba663e8", "GPU-77777777")),
        (MIG, {"CUDA_VISIBLE_DEVICES": "MIG-c6d4,MIG-cba6,GPU-7777"}, ("MIG-c6d4", "GPU-7777")),  # one MIG device
        (
            MIG,
            {"CUDA_VISIBLE_DEVICES": "MIG-GPU-a4c07c49-9a32-7d7c-0c1c-2b4ef1d4c8a1/0/0"},
            ("MIG-GPU-a4c07c49-9a32-7d7c-0c1c-2b4ef1d4c8a1/0/0",),
        ),
        (MIG, {"CUDA_VISIBLE_DEVICES": "MIG-0000"}, ()),
        # NVIDIA_VISIBLE_DEVICES: the container runtime's choice
        (FOUR, {"NVIDIA_VISIBLE_DEVICES": "all"}, ("0", "1", "2", "3")),
        (FOUR, {"NVIDIA_VISIBLE_DEVICES": "none"}, ()),
        (FOUR, {"NVIDIA_VISIBLE_DEVICES": "void"}, ()),
        (FOUR, {"NVIDIA_VISIBLE_DEVICES": ""}, ()),
        (FOUR, {"NVIDIA_VISIBLE_DEVICES": "2,3"}, ("0", "1")),
        (FOUR, {"NVIDIA_VISIBLE_DEVICES": "none", "CUDA_VISIBLE_DEVICES": "0"}, ()),
    ],
)
def test_the_devices_cuda_sees(listed, env, devices):
    assert cuda_devices(listed, env) == devices


def nvidia_smi(tmp_path, monkeypatch, body: str) -> None:
    """A stand-in nvidia-smi first on PATH, running `body` (shell)."""
    program = tmp_path / "nvidia-smi"
    program.write_text(f"#!/bin/sh\n{body}\n")
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")


def test_find_reads_nvidia_smi_and_the_variables(tmp_path, monkeypatch):
    nvidia_smi(tmp_path, monkeypatch, f"cat <<'EOF'\n{LISTING}EOF")
    assert gpus.find(5, {}) == gpus.Found(("0", "1", "2", "3"), "nvidia-smi -L lists 4 GPUs")
    assert gpus.find(5, {"CUDA_VISIBLE_DEVICES": "3", "NVIDIA_VISIBLE_DEVICES": "all"}) == gpus.Found(
        ("3",), "nvidia-smi -L lists 4 GPUs, CUDA_VISIBLE_DEVICES=3"
    )


def test_a_failing_nvidia_smi_counts_no_gpu_and_says_why(tmp_path, monkeypatch, caplog):
    nvidia_smi(tmp_path, monkeypatch, "echo 'Failed to initialize NVML: Driver/library version mismatch'; exit 18")
    how = "nvidia-smi -L failed (exit 18): Failed to initialize NVML: Driver/library version mismatch"
    assert gpus.find(5, {}) == gpus.Found((), how)
    assert caplog.messages == [f"{how}: counting no GPU"]


def test_a_hanging_nvidia_smi_is_killed_after_the_timeout(tmp_path, monkeypatch, caplog):
    nvidia_smi(tmp_path, monkeypatch, f"echo $$ > {tmp_path}/pid; exec sleep 600")
    started = time.monotonic()
    assert gpus.find(0.5, {}) == gpus.Found((), "nvidia-smi -L did not answer within 0.5 s")
    assert time.monotonic() - started < 10  # bounded by the timeout (a guard, not a timing check)
    assert caplog.messages == [
        "nvidia-smi -L did not answer within 0.5 s (SAGEMAKER_NVIDIA_SMI_TIMEOUT_SECONDS): counting no GPU"
    ]


def test_without_nvidia_smi_no_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert gpus.find(5, {}) == gpus.Found((), "nvidia-smi not found")


def test_a_worker_takes_the_lowest_free_slot_and_its_gpu():
    assert gpus.free_slot([]) == 0
    assert gpus.free_slot([0, 1, 2]) == 3
    assert gpus.free_slot([0, 1, 3]) == 2  # the worker of slot 2 died: its replacement takes slot 2
    assert [gpus.gpu_id(4, slot) for slot in range(6)] == [0, 1, 2, 3, 0, 1]
    assert gpus.gpu_id(0, 3) is None


def test_gunicorns_hooks_give_each_worker_its_slot(monkeypatch):
    monkeypatch.setattr(gpus, "_slot", 0)
    live = {pid: SimpleNamespace(sagemaker_slot=slot) for pid, slot in ((11, 0), (12, 1), (14, 3))}
    server = SimpleNamespace(WORKERS=live)
    worker = SimpleNamespace()
    gunicorn_settings.pre_fork(server, worker)
    assert worker.sagemaker_slot == 2
    monkeypatch.setattr(gunicorn_settings._threading, "Thread", lambda **kwargs: SimpleNamespace(start=lambda: None))
    titles: list[str] = []
    monkeypatch.setattr(process_title, "set_title", titles.append)  # (not this test process's own title)
    gunicorn_settings.post_fork(server, SimpleNamespace(sagemaker_slot=2, cfg=SimpleNamespace(timeout=30)))
    assert (gpus.worker_slot(), gpus.gpu_id(4)) == (2, 2)
    assert titles == ["gunicorn: worker 2 [sagemaker-tfs]"]


@pytest.mark.parametrize(
    "msw, gpu_count, loads, expected",
    [
        (None, 0, True, (cpu_count(), "one per core")),
        (None, 4, True, (4, "one per GPU: the script's model_fn loads the model")),
        (None, 4, False, (cpu_count(), "one per core")),
        (6, 4, True, (6, "SAGEMAKER_MODEL_SERVER_WORKERS")),
    ],
)
def test_the_default_worker_count(msw, gpu_count, loads, expected):
    assert default_worker_count(msw, gpu_count, loads) == expected


FOUR_DEVICES = ("0", "1", "2", "3")


def test_serve_resolves_the_counts_left_unset_from_the_gpus_and_the_script():
    unset = Settings.from_env({})
    assert (unset.gunicorn_workers, unset.tfs_instance_count) == (cpu_count(), 1)  # before serve looks
    toolkit = unset.resolved("/m", None, FOUR_DEVICES, script_loads_model=True)
    assert (toolkit.gunicorn_workers, toolkit.tfs_instance_count, toolkit.cuda_devices) == (4, 4, FOUR_DEVICES)
    handler = unset.resolved("/m", "m", FOUR_DEVICES, script_loads_model=False)
    assert (handler.gunicorn_workers, handler.tfs_instance_count) == (cpu_count(), 4)
    cpu = unset.resolved("/m", None, (), script_loads_model=True)
    assert (cpu.gunicorn_workers, cpu.tfs_instance_count) == (cpu_count(), 1)
    explicit = Settings.from_env(
        {"SAGEMAKER_GUNICORN_WORKERS": "3", "SAGEMAKER_TFS_INSTANCE_COUNT": "2", "SAGEMAKER_MODEL_SERVER_WORKERS": "5"}
    ).resolved("/m", "m", FOUR_DEVICES, True)
    assert (explicit.gunicorn_workers, explicit.tfs_instance_count) == (3, 2)
    toolkit_name = Settings.from_env({"SAGEMAKER_MODEL_SERVER_WORKERS": "6"}).resolved("/m", None, FOUR_DEVICES, True)
    assert toolkit_name.gunicorn_workers == 6


def test_the_children_get_the_devices_and_the_counts_as_serve_resolved_them():
    resolved = Settings.from_env({}).resolved("/m", "m", FOUR_DEVICES, script_loads_model=True)
    env = resolved.to_env({})
    assert (env["TFS_CUDA_DEVICES"], env["SAGEMAKER_GUNICORN_WORKERS"], env["SAGEMAKER_TFS_INSTANCE_COUNT"]) == (
        "0,1,2,3",
        "4",
        "4",
    )
    assert Settings.from_env(env) == resolved
    assert Settings.from_env({}).to_env({})["TFS_CUDA_DEVICES"] == "none"
    assert Settings.from_env({"TFS_CUDA_DEVICES": "none"}).cuda_devices == ()


def test_a_port_range_too_small_for_one_instance_per_gpu_says_the_count_came_from_the_gpus():
    with pytest.raises(
        ConfigError,
        match=r"^not enough ports available in SAGEMAKER_SAFE_PORT_RANGE \(9000-9003\) "
        r"for SAGEMAKER_TFS_INSTANCE_COUNT=4 \(unset: one per GPU\): each instance "
        r"needs 2$",
    ):
        Settings.from_env({"SAGEMAKER_SAFE_PORT_RANGE": "9000-9003"}).resolved("/m", "m", FOUR_DEVICES)


def server_env(settings: Settings, monkeypatch) -> list[tuple[str | None, str | None]]:
    """(CUDA_VISIBLE_DEVICES, --per_process_gpu_memory_fraction) of each model server instance."""
    monkeypatch.setattr(commands, "model_server_base_command", lambda: ["tfs"])
    found = []
    for args, env in commands.model_server_commands(settings, "/config", None):
        fractions = [arg.split("=", 1)[1] for arg in args if arg.startswith("--per_process_gpu_memory_fraction=")]
        found.append((env.get("CUDA_VISIBLE_DEVICES"), fractions[0] if fractions else None))
        assert set(env) <= {"CUDA_VISIBLE_DEVICES"}
    return found


@pytest.mark.parametrize(
    "devices, env, expected",
    [
        ((), {}, [(None, None)]),
        # SAGEMAKER_TFS_INSTANCE_COUNT unset: one instance per GPU, each pinned to its own (the memory share rule:
        # (1 - 0.2) / one instance per GPU); one GPU: one instance, as before
        (("0",), {}, [(None, None)]),
        (("0", "1"), {}, [("0", "0.8"), ("1", "0.8")]),
        (FOUR_DEVICES, {}, [("0", "0.8"), ("1", "0.8"), ("2", "0.8"), ("3", "0.8")]),
        # serve's own CUDA_VISIBLE_DEVICES names the devices the instances are pinned to
        (("GPU-3dd", "1"), {}, [("GPU-3dd", "0.8"), ("1", "0.8")]),
        # set counts: the instances share the GPUs round-robin
        (("0",), {"SAGEMAKER_TFS_INSTANCE_COUNT": "3"}, [(None, "0.2667")] * 3),
        (("0", "1"), {"SAGEMAKER_TFS_INSTANCE_COUNT": "4"}, [("0", "0.4"), ("1", "0.4"), ("0", "0.4"), ("1", "0.4")]),
        (FOUR_DEVICES, {"SAGEMAKER_TFS_INSTANCE_COUNT": "1"}, [(None, None)]),
        (
            FOUR_DEVICES,
            {"SAGEMAKER_TFS_INSTANCE_COUNT": "2", "SAGEMAKER_TFS_FRACTIONAL_GPU_MEM_MARGIN": "0.5"},
            [("0", "0.5"), ("1", "0.5")],
        ),
    ],
)
def test_the_model_server_instances_and_their_gpus(monkeypatch, devices, env, expected):
    settings = Settings.from_env(env).resolved("/m", "m", devices)
    assert server_env(settings, monkeypatch) == expected


def test_the_start_up_line_says_which_gpu_each_worker_and_instance_uses():
    handler = Settings.from_env({"SAGEMAKER_GUNICORN_WORKERS": "3"}).resolved("/m", "m", ("0", "1"))
    assert commands.gpu_line(handler, "nvidia-smi -L lists 2 GPUs", False, model_servers=True) == (
        "GPUs: 2 seen by CUDA (nvidia-smi -L lists 2 GPUs); gunicorn workers: 3 (SAGEMAKER_GUNICORN_WORKERS), toolkit "
        "gpu_id by worker slot: 0->0, 1->1, 2->0; model servers: 2 (one per GPU), CUDA_VISIBLE_DEVICES by instance: "
        "0->0, 1->1, --per_process_gpu_memory_fraction=0.8"
    )
    one = Settings.from_env({"SAGEMAKER_GUNICORN_WORKERS": "1", "SAGEMAKER_TFS_INSTANCE_COUNT": "2"}).resolved(
        "/m", "m", ("0",)
    )
    assert commands.gpu_line(one, "nvidia-smi -L lists 1 GPU", False, model_servers=True) == (
        "GPUs: 1 seen by CUDA (nvidia-smi -L lists 1 GPU); gunicorn workers: 1 (SAGEMAKER_GUNICORN_WORKERS), toolkit "
        "gpu_id by worker slot: 0->0; model servers: 2 (SAGEMAKER_TFS_INSTANCE_COUNT), on the GPU CUDA sees, "
        "--per_process_gpu_memory_fraction=0.4"
    )
    cpu = Settings.from_env({"SAGEMAKER_GUNICORN_WORKERS": "2"}).resolved("/m", "m", ())
    assert commands.gpu_line(cpu, "nvidia-smi not found", False, model_servers=True) == (
        "GPUs: 0 seen by CUDA (nvidia-smi not found); gunicorn workers: 2 (SAGEMAKER_GUNICORN_WORKERS), toolkit "
        "gpu_id by worker slot: None; model servers: 1 (the default), on CPU"
    )


@pytest.mark.parametrize(
    "script, contract, loads",
    [
        ("def model_fn(model_dir):\n    return 1\n", "auto", True),
        ("from mymodel import model_fn\n", "auto", True),
        (
            "def input_fn(data, content_type):\n    return data\n",
            "auto",
            False,
        ),  # the default model_fn: the served model
        ("def handler(data, context):\n    return data\n", "auto", False),
        ("def handler(data, context):\n    return data\n\ndef model_fn(model_dir):\n    return 1\n", "tfs", False),
        ("def handler(data, context):\n    return data\n\ndef model_fn(model_dir):\n    return 1\n", "toolkit", True),
        ("def model_fn(model_dir:\n", "auto", False),  # does not compile: the app reports it
    ],
)
def test_which_scripts_load_the_model_themselves(tmp_path, script, contract, loads):
    path = tmp_path / "inference.py"
    path.write_text(script)
    assert handler_contract.script_loads_model(path, contract) is loads
