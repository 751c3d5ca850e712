"""gunicorn's settings file for the gunicorn `serve` starts (`--config python:sagemaker_tfs.gunicorn_settings`).

gunicorn reads the names below that are its settings and ignores the others, so this file suits gunicorn
versions with and without a control socket. Imports are private names: a public one could be taken for a setting.
"""

import json as _json
from pathlib import Path as _Path

from gunicorn import util as _util

# gunicorn >= 25.1 opens a control socket (status, kill workers, reload, shutdown) at $XDG_RUNTIME_DIR/gunicorn.ctl
# or $HOME/.gunicorn/gunicorn.ctl, one path for every stack of the user; serve supervises gunicorn itself.
control_socket_disable = True


def _write_json_error(sock, status_int: int, reason: str, mesg: str) -> None:
    """gunicorn.util.write_error's contract, with a JSON body."""
    body = _json.dumps({"error": f"{reason}: {mesg}" if mesg else reason}).encode()
    head = (f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n")
    _util.write_nonblock(sock, head.encode("latin-1") + body)


def on_starting(server) -> None:
    """Requests gunicorn refuses itself, before the app sees them (two Content-Type headers, more header fields
    than its limit, a malformed chunk...), are answered by gunicorn.util.write_error, which writes HTML. Every
    error of the stack is JSON: the writer is replaced in the master, before any worker is forked, so that every
    worker class (sync, gthread, gevent) writes JSON with gunicorn's status and message."""
    _util.write_error = _write_json_error


def post_worker_init(worker) -> None:
    """The worker has created the app: say so in the runtime folder, where serve's start-up check looks (a
    check that never queues behind client requests, as a /ping would)."""
    from .config import Settings
    from .runtime_dir import mark_worker_ready

    mark_worker_ready(_Path(Settings.from_env().runtime_dir), worker.pid)
