"""The cores this process may run on: what every worker and thread count defaults to."""

from __future__ import annotations

import os


def cpu_count() -> int:
    """Cores this process may run on (honours CPU affinity, as in a container with a CPU set)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)
