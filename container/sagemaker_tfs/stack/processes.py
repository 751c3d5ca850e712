"""The machine's processes as /proc lists them: what serve's supervision and its reaper look for, and what
`sagemaker-tfs tune` adds up (tune/usage.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import NamedTuple


class Process(NamedTuple):
    pid: int
    state: str  # R, S, D, Z (a zombie)...
    group: int  # its process group id
    session: int  # its session id
    parent: int
    cpu_ticks: int  # user and system CPU so far, its threads included, in clock ticks (SC_CLK_TCK)
    resident_pages: int


def processes() -> Iterator[Process]:
    """Every process still listed (one that ends meanwhile is skipped)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (found := process(entry)) is not None:
            yield found


def process(pid: int | str) -> Process | None:
    """One process (`pid`: a number, or "self"), None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            # after "pid (comm) ", whose comm may hold spaces and parentheses: proc(5)'s fields from the state on
            head, _, rest = stat.read().rpartition(b")")
    except OSError:
        return None
    fields = rest.split()
    number = int(head.split(b" (", 1)[0])
    return Process(
        number,
        fields[0].decode(),
        int(fields[2]),
        int(fields[3]),
        int(fields[1]),
        int(fields[11]) + int(fields[12]),
        int(fields[21]),
    )
