"""What `serve` checks during start-up, none of which waits behind client requests: nginx's listening socket (here),
the model servers' status API (model_client/model_servers.py's model_status) and the gunicorn workers' ready files
(shared/runtime_dir.py)."""

from __future__ import annotations

import os
import socket


def listening_sockets(port: int) -> list[tuple[str, str]]:
    """(local address, inode) of each TCP socket listening on port, IPv4 or IPv6, from /proc/net; an IPv4-mapped
    address of a dual-stack socket is given as IPv4."""
    found = []
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        try:
            with open(table) as file:
                lines = file.read().splitlines()[1:]
        except FileNotFoundError:  # no IPv6
            continue
        for line in lines:
            fields = line.split()
            # fields: sl, local address:port (hex), remote address, state (0A: LISTEN), ..., inode (10th)
            address, _, port_hex = fields[1].partition(":")
            if fields[3] != "0A" or int(port_hex, 16) != port:
                continue
            raw = bytes.fromhex(address)  # 32-bit words in the host's (little-endian) order
            raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            found.append((socket.inet_ntop(family, raw).removeprefix("::ffff:"), fields[9]))
    return found


def listens(pid: int, port: int) -> bool:
    """Whether process pid itself holds a socket listening on TCP port (not another process that took it)."""
    inodes = {inode for _, inode in listening_sockets(port)}
    if not inodes:
        return False
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except (FileNotFoundError, PermissionError):
        return False
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in inodes:
            return True
    return False
