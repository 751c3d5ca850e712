"""The machine's processes as /proc lists them: what serve's supervision and its reaper look for."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import NamedTuple


class Process(NamedTuple):
    pid: int
    state: str  # R, S, D, Z (a zombie)...
    group: int  # its process group id
    session: int  # its session id


def processes() -> Iterator[Process]:
    """Every process still listed (one that ends meanwhile is skipped)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as stat:
                    # after "pid (comm) ", whose comm may hold spaces and parentheses: state, ppid, pgrp, session
                    fields = stat.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            yield Process(int(entry), fields[0].decode(), int(fields[2]), int(fields[3]))
