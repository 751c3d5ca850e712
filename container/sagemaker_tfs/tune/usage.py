"""CPU and memory of a stack's processes, read from /proc, by group: nginx, gunicorn (master and workers), the
model servers, and serve itself (with its reaper). A stack's processes are `serve` and the processes below it, and
each names itself (docs/operations.md, "Processes by name")."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..stack.processes import process, processes

GROUPS = ("nginx", "gunicorn", "model servers", "serve")
_TICK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _group(pid: int) -> str:
    try:
        title = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "serve"
    if title.startswith("nginx"):
        return "nginx"
    if title.startswith("gunicorn"):
        return "gunicorn"
    if title.startswith(("tfs-model-server", "tensorflow_model_server")) or "tensorflow_model_server" in title:
        return "model servers"
    return "serve"


def cpu_seconds(pid: int | str) -> float:
    """User + system CPU seconds of a process so far, its threads included (0 when gone)."""
    found = process(pid)
    return 0.0 if found is None else found.cpu_ticks / _TICK


@dataclass(frozen=True)
class Snapshot:
    """CPU seconds so far and resident bytes now, per group, at one moment."""

    cpu: dict[str, float]
    rss: dict[str, int]


def snapshot(root: int) -> Snapshot:
    """The groups' readings now, over `root` (a stack's serve) and every process below it, or in its session."""
    stats = {found.pid: found for found in processes()}
    children: dict[int, list[int]] = {}
    for found in stats.values():
        children.setdefault(found.parent, []).append(found.pid)
    tree, queue = set(), [root]
    while queue:  # serve's children start sessions of their own: the tree, not the session, holds them all
        pid = queue.pop()
        if pid in stats and pid not in tree:
            tree.add(pid)
            queue += children.get(pid, [])
    tree.update(found.pid for found in stats.values() if found.session == root)
    cpu = dict.fromkeys(GROUPS, 0.0)
    rss = dict.fromkeys(GROUPS, 0)
    for pid in tree:
        group = _group(pid)
        cpu[group] += stats[pid].cpu_ticks / _TICK
        rss[group] += stats[pid].resident_pages * _PAGE
    return Snapshot(cpu, rss)


@dataclass(frozen=True)
class GroupUsage:
    """Over one measurement: each group's CPU in cores (1.0 = one core busy) and resident MB at its end."""

    cores: dict[str, float]
    rss_mb: dict[str, float]


def between(before: Snapshot, after: Snapshot, seconds: float) -> GroupUsage:
    # A process that exited in between takes its CPU with it: the groups' totals never go back.
    cores = {g: max(0.0, after.cpu[g] - before.cpu[g]) / seconds if seconds > 0 else 0.0 for g in GROUPS}
    return GroupUsage(cores, {g: after.rss[g] / 1e6 for g in GROUPS})
