"""The GPUs CUDA sees, found once by `serve`, and the worker slots that spread gunicorn's workers over them
(docs/gpu.md).

`find()` runs `nvidia-smi -L` (bounded: a failing or hanging nvidia-smi counts no GPU, logged, and never holds
start-up back) and `cuda_devices()` applies CUDA's rules to its listing: the one answer to "how many GPUs does a
CUDA process of this machine see". `serve` hands the devices to its children (TFS_CUDA_DEVICES, config.py); the
model servers are pinned with them (stack/commands.py), and each gunicorn worker's `gpu_id` is its slot mod their
number (`gpu_id()`), the slot being given by `free_slot()` when gunicorn forks the worker
(wsgi_server/gunicorn_settings.py).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

log = logging.getLogger("serve")

_GPU_LINE = re.compile(r"^GPU \d+:.*?(?:\(UUID: ([^)\s]+)\))?\s*$")
_MIG_LINE = re.compile(r"^\s+MIG\b.*?\(UUID: ([^)\s]+)\)")
_INDEX = re.compile(r"^\+?\d+")  # CUDA reads an index as strtoul does: "1gpu" is 1


@dataclass(frozen=True)
class Gpu:
    """One GPU of `nvidia-smi -L`: its UUID ("" when not shown) and, in MIG mode, its MIG devices' UUIDs."""

    uuid: str
    mig: tuple[str, ...] = ()


@dataclass(frozen=True)
class Found:
    """What `serve` found: CUDA's devices, each as CUDA_VISIBLE_DEVICES names it (gpu_id i is the i-th), and how
    they were found, for the start-up line."""

    devices: tuple[str, ...]
    how: str


def parse_listing(text: str) -> list[Gpu]:
    """The GPUs of `nvidia-smi -L`'s output, each with the MIG devices listed under it."""
    gpus: list[Gpu] = []
    for line in text.splitlines():
        gpu, mig = _GPU_LINE.match(line), _MIG_LINE.match(line)
        if gpu:
            gpus.append(Gpu(gpu.group(1) or ""))
        elif mig and gpus:
            gpus[-1] = Gpu(gpus[-1].uuid, (*gpus[-1].mig, mig.group(1)))
    return gpus


def cuda_devices(listed: Sequence[Gpu], env: Mapping[str, str]) -> tuple[str, ...]:
    """The devices a CUDA process started with `env` enumerates, in its order, each as CUDA_VISIBLE_DEVICES names
    it. The one rule of how many GPUs CUDA sees here:

    - A GPU counts once; a GPU in MIG mode counts for its MIG devices, and a process enumerates one MIG device at
      most (NVIDIA's MIG user guide, "CUDA Device Enumeration"): 7 MIG devices of one GPU are 1 device here.
    - NVIDIA_VISIBLE_DEVICES (the container runtime's choice of GPUs), when set: `none`, `void` or empty hides
      them all; a list keeps at most that many (inside the container nvidia-smi lists those alone); `all` keeps all.
    - CUDA_VISIBLE_DEVICES, when set, as CUDA reads it: its entries in order (indices into the devices above, or
      UUIDs and unique UUID prefixes from the listing), up to the first that names no device (a negative or
      too-high index, an unknown or ambiguous UUID); a repeated entry, or an empty value, hides every device; a
      second MIG device is left out.
    Without CUDA_VISIBLE_DEVICES the devices are CUDA's indices "0" to "n-1".
    """
    runtime = env.get("NVIDIA_VISIBLE_DEVICES")
    if runtime is not None:
        value = runtime.strip().lower()
        if value in ("", "none", "void"):
            return ()
        if value != "all":
            listed = listed[: len(value.split(","))]
    count = sum(1 for gpu in listed if not gpu.mig) + (1 if any(gpu.mig for gpu in listed) else 0)
    chosen = env.get("CUDA_VISIBLE_DEVICES")
    if chosen is None:
        return tuple(str(index) for index in range(count))
    devices: list[str] = []
    named: set[tuple[str, str]] = set()
    mig_seen = False
    for entry in (part.strip() for part in chosen.split(",")):
        device = _named(entry, listed, count)
        if device is None:
            break
        if device in named:
            return ()
        named.add(device)
        if device[0] == "mig":
            if mig_seen:
                continue
            mig_seen = True
        devices.append(entry)
    return tuple(devices)


def _named(entry: str, listed: Sequence[Gpu], count: int) -> tuple[str, str] | None:
    """(kind, key) of the device a CUDA_VISIBLE_DEVICES entry names, or None when it names none."""
    lowered = entry.lower()
    if lowered.startswith("gpu-"):
        matches = [gpu for gpu in listed if gpu.uuid and gpu.uuid.lower().startswith(lowered)]
        if len(matches) != 1:
            return None
        return ("mig" if matches[0].mig else "gpu", matches[0].uuid)
    if lowered.startswith("mig-"):
        if lowered.startswith("mig-gpu-"):  # the older form MIG-<GPU UUID>/<GPU instance>/<compute instance>
            parent = lowered[4:].split("/")[0]
            found = [gpu.uuid for gpu in listed if gpu.mig and gpu.uuid.lower().startswith(parent)]
            return ("mig", lowered) if len(found) == 1 else None
        uuids = [uuid for gpu in listed for uuid in gpu.mig if uuid.lower().startswith(lowered)]
        return ("mig", uuids[0]) if len(uuids) == 1 else None
    index = _INDEX.match(entry)
    if index is None or int(index.group()) >= count:
        return None
    return ("index", str(int(index.group())))


def find(timeout: float, env: Mapping[str, str] | None = None) -> Found:
    """The GPUs CUDA sees on this machine, from `nvidia-smi -L` (waited for `timeout` seconds at most) and the
    variables of `env` (os.environ by default) that cuda_devices() reads. nvidia-smi missing counts no GPU; failing or
    not answering in time counts no GPU too, with a warning."""
    env = os.environ if env is None else env
    listing, how = _listing(timeout)
    if listing is None:
        return Found((), how)
    listed = parse_listing(listing)
    devices = cuda_devices(listed, env)
    migs = sum(len(gpu.mig) for gpu in listed)
    how = f"nvidia-smi -L lists {_count(len(listed), 'GPU')}" + (
        f", {_count(migs, 'MIG device')} (a CUDA process sees one)" if migs else ""
    )
    for name in ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        if env.get(name) is not None and not (name == "NVIDIA_VISIBLE_DEVICES" and env[name].strip() == "all"):
            how += f", {name}={env[name]}"
    return Found(devices, how)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _listing(timeout: float) -> tuple[str | None, str]:
    """(`nvidia-smi -L`'s output, or None when there is none to read; what happened). It runs in a thread of its
    own, in a process group of its own, so that a hanging nvidia-smi (even one stuck in the driver, which no
    signal ends) costs `timeout` seconds at most: its group is killed and the thread left behind."""
    program = shutil.which("nvidia-smi")
    if program is None:
        return None, "nvidia-smi not found"
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            proc = subprocess.Popen(
                [program, "-L"],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:
            outcome["error"] = exc
            return
        outcome["proc"] = proc
        out, _ = proc.communicate()
        outcome["result"] = (proc.returncode, out.decode(errors="replace"))

    thread = threading.Thread(target=run, name="nvidia-smi", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        proc = outcome.get("proc")
        if isinstance(proc, subprocess.Popen):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
        how = f"nvidia-smi -L did not answer within {timeout:g} s"
        log.warning("%s (SAGEMAKER_NVIDIA_SMI_TIMEOUT_SECONDS): counting no GPU", how)
        return None, how
    if "error" in outcome:
        how = f"nvidia-smi could not run: {outcome['error']}"
        log.warning("%s: counting no GPU", how)
        return None, how
    code, out = cast("tuple[int, str]", outcome["result"])
    if code != 0:
        first = next((line.strip() for line in out.splitlines() if line.strip()), "no output")
        how = f"nvidia-smi -L failed (exit {code}): {first}"
        log.warning("%s: counting no GPU", how)
        return None, how
    return out, ""


# ---- worker slots ----

_slot = 0  # this process's worker slot: set in each gunicorn worker before the app is built


def free_slot(taken: Iterable[int]) -> int:
    """The slot of a worker about to start: the lowest not held by a live worker. N workers hold slots 0 to N-1,
    and a worker that replaces a dead one takes its slot, hence its GPU."""
    held = set(taken)
    slot = 0
    while slot in held:
        slot += 1
    return slot


def set_worker_slot(slot: int) -> None:
    global _slot
    _slot = slot


def worker_slot() -> int:
    """This process's worker slot (0 outside gunicorn: an app built in-process)."""
    return _slot


def gpu_id(gpus: int, slot: int | None = None) -> int | None:
    """The inference toolkit's `gpu_id` of the worker in `slot` (this process's by default): the slot mod the
    GPUs CUDA sees, None without GPUs."""
    if not gpus:
        return None
    return (worker_slot() if slot is None else slot) % gpus
