"""What `serve` checks during start-up, none of which waits behind client requests: the model servers' status
API, the gunicorn workers' ready files (runtime_dir.py), and nginx's listening socket."""

from __future__ import annotations

import http.client
import json
import os


def http_get(port: int, path: str, timeout: float = 2.0) -> tuple[int, bytes] | None:
    """GET http://127.0.0.1:port/path; None when nothing answers."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()


def version_states(rest_port: int, model: str) -> dict[int, tuple[str, str]] | None:
    """{version: (state, error message)} from the model server's status API; None if it does not answer."""
    answer = http_get(rest_port, f"/v1/models/{model}")
    if answer is None or answer[0] not in (200, 404):
        return None
    if answer[0] == 404:
        return {}
    states = {}
    for entry in json.loads(answer[1]).get("model_version_status", []):
        status = entry.get("status", {})
        states[int(entry["version"])] = (entry.get("state", ""), status.get("error_message", ""))
    return states


def _listening_inodes(port: int) -> set[str]:
    """Inodes of the TCP sockets listening on port (IPv4 or IPv6, any address), from /proc/net."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as file:
                lines = file.read().splitlines()[1:]
        except FileNotFoundError:  # no IPv6
            continue
        for line in lines:
            fields = line.split()
            # fields: sl, local address:port (hex), remote address, state (0A: LISTEN), ..., inode (10th)
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def listens(pid: int, port: int) -> bool:
    """Whether process pid itself holds a socket listening on TCP port (not another process that took it)."""
    inodes = _listening_inodes(port)
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
