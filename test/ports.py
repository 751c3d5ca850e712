"""Loopback ports: free ones chosen at run time below the kernel's ephemeral range, and who listens where."""

from __future__ import annotations

import re
import socket
import subprocess

from sagemaker_tfs.shared.free_ports import LOWEST_PORT, ephemeral_port_range, free_port, free_port_range
from sagemaker_tfs.stack import readiness

__all__ = ["LOWEST_PORT", "ephemeral_port_range", "free_port", "free_port_range"]


def port_is_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def listening_pids(port: int) -> set[int] | None:
    """The pids holding a TCP socket listening on `port` (any address), per `ss`; None when nothing listens."""
    out = subprocess.run(["ss", "-ltnpH", f"sport = :{port}"], capture_output=True, text=True, check=True).stdout
    if not out.strip():
        return None
    return {int(pid) for pid in re.findall(r"pid=(\d+)", out)}


def listening_addresses(port: int) -> set[str]:
    """The local addresses with a TCP socket listening on `port`, e.g. {"127.0.0.1"} or {"0.0.0.0"} (IPv4-mapped
    IPv6 addresses as IPv4); empty when nothing listens."""
    return {address for address, _ in readiness.listening_sockets(port)}
