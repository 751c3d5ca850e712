"""The 507s a load gets before anything starts (docs/multi-model.md §8): too many models, or too much memory in use.

Memory in use is `1 - MemAvailable/MemTotal` of the host, or under a cgroup limit `memory.current/memory.max`
(v2; `memory.usage_in_bytes/memory.limit_in_bytes` on v1), whichever is higher: a container's limit is usually
far below the host's memory, and the OOM killer acts on the cgroup's.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

PROC = Path("/proc")
CGROUP_ROOT = Path("/sys/fs/cgroup")


def _meminfo_fraction(proc: Path) -> float:
    values = {}
    for line in (proc / "meminfo").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("MemTotal", "MemAvailable"):
            values[key] = int(rest.split()[0])
    total = values.get("MemTotal", 0)
    return 1 - values.get("MemAvailable", total) / total if total else 0.0


def _cgroup_folders(proc: Path, root: Path) -> list[Path]:
    """Where this process's memory cgroup files may be: its own cgroup (v2, or v1's memory controller, also in
    a hybrid layout), then the namespace roots (inside a container the visible root is the container's)."""
    folders = []
    try:
        lines = (proc / "self" / "cgroup").read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        path = path.lstrip("/")
        if controllers == "":
            folders += [root / path, root / "unified" / path]
        elif "memory" in controllers.split(","):
            folders.append(root / "memory" / path)
    return folders + [root, root / "unified", root / "memory"]


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # v2's "max" means no limit


def _cgroup_fraction(proc: Path, root: Path) -> float:
    for base in _cgroup_folders(proc, root):
        for used_name, limit_name in (
            ("memory.current", "memory.max"),
            ("memory.usage_in_bytes", "memory.limit_in_bytes"),
        ):
            used, limit = _read_int(base / used_name), _read_int(base / limit_name)
            if used is not None and limit and limit < 1 << 60:  # v1 writes a huge number for "no limit"
                return used / limit
    return 0.0


def memory_in_use_percent(proc: Path = PROC, cgroup_root: Path = CGROUP_ROOT) -> int:
    """The share of memory in use, in whole percent rounded down."""
    return int(100 * max(_meminfo_fraction(proc), _cgroup_fraction(proc, cgroup_root)))


def refusal(loaded: int, max_models: int, limit_percent: int, in_use_percent: Callable[[], int]) -> str | None:
    """The 507 text for a load when `loaded` models are loaded (or loading), else None. `in_use_percent` is
    called only when the model count allows the load."""
    if max_models > 0 and loaded >= max_models:
        return f"Memory exhausted: {loaded} models are loaded and SAGEMAKER_MULTI_MODEL_MAX_MODELS is {max_models}."
    percent = in_use_percent()
    if percent >= limit_percent:
        return (
            f"Memory exhausted: {percent}% of memory is in use and SAGEMAKER_MULTI_MODEL_MEMORY_LIMIT_PERCENT "
            f"is {limit_percent}."
        )
    return None
