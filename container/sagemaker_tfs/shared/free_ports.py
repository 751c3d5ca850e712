"""Free loopback ports chosen at run time, below the kernel's ephemeral range: for the servers that
sagemaker_tfs.testing starts, and the project's own tests."""

from __future__ import annotations

import os
import random
import socket
from pathlib import Path

LOWEST_PORT = 1024  # below are the privileged ports


def ephemeral_port_range() -> tuple[int, int]:
    """The kernel's range for ports of outgoing connections and of binds to port 0."""
    low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
    return int(low), int(high)


def _bindable(port: int) -> bool:
    """Whether port is free on every IPv4 address (nginx listens on all of them)."""
    with socket.socket() as sock:
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
        return True


def _share(low: int, high: int) -> tuple[int, int]:
    """This process's share of the ports [low, high): under pytest-xdist, each process (gw0, gw1...) hands out
    ports from its own slice, so that two never give the same port to servers that start at the same time."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER", ""), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if not worker.startswith("gw") or count < 2:
        return low, high
    width = (high - low) // count
    index = int(worker[2:])
    return low + index * width, low + (index + 1) * width


_handed_out: set[int] = set()  # ports this process gave before: free until their server binds them, not after


def free_port_range(size: int) -> tuple[int, int]:
    """`size` consecutive loopback ports free right now, as (low, high) inclusive, chosen at random below the
    kernel's ephemeral range: a server there can find its port taken by an outgoing connection (even one that
    connected to itself), which a port below it never is. Never one handed out before in this process (a caller
    that picks a port for a setting and then starts a stack, which picks its own, must not get the same twice)."""
    floor, ceiling = _share(LOWEST_PORT, ephemeral_port_range()[0])
    ceiling -= size
    for _ in range(500):
        low = random.randint(floor, ceiling)
        ports = range(low, low + size)
        if _handed_out.isdisjoint(ports) and all(_bindable(port) for port in ports):
            _handed_out.update(ports)
            return low, low + size - 1
    raise RuntimeError(f"no {size} consecutive free ports found below {ceiling + size}")


def free_port() -> int:
    """A TCP port free on the loopback interface right now, below the kernel's ephemeral range."""
    return free_port_range(1)[0]
