"""gunicorn's settings file for the gunicorn `serve` starts
(`--config python:sagemaker_tfs.wsgi_server.gunicorn_settings`).

gunicorn reads the names below that are its settings and ignores the others, so this file suits gunicorn
versions with and without a control socket. Imports are private names: a public one could be taken for a setting.
"""

import threading as _threading
import time as _time
from pathlib import Path as _Path
from typing import Any as _Any


def _logging() -> dict:
    """gunicorn's own lines through logs.py's formatters: JSON with SAGEMAKER_LOG_FORMAT=json, else gunicorn's text
    layout with control characters escaped (a request's path is client text). Its loggers do not propagate, so that
    the root logger has only the app's handler (app/routes.py) and no line is written twice. In text, no access log (as
    without a logging config: nginx's has every request)."""
    from ..shared.logs import format_from_env

    json_format = format_from_env() == "json"
    loggers = {
        name: {"level": "INFO", "handlers": [handler], "propagate": False, "qualname": name}
        for name, handler in (("gunicorn.error", "error_console"), ("gunicorn.access", "console"))
    }
    if json_format:
        generic = {"()": "sagemaker_tfs.shared.logs.JsonFormatter"}
    else:
        loggers["gunicorn.access"].update(level="WARNING", handlers=[])
        generic = {
            "class": "sagemaker_tfs.shared.logs.TextFormatter",
            "datefmt": "[%Y-%m-%d %H:%M:%S %z]",
            "format": "%(asctime)s [%(process)d] [%(levelname)s] %(message)s",
        }  # gunicorn's
    return {"root": {"level": "INFO", "handlers": []}, "loggers": loggers, "formatters": {"generic": generic}}


logconfig_dict = _logging()

# gunicorn >= 25.1 opens a control socket (status, kill workers, reload, shutdown) at $XDG_RUNTIME_DIR/gunicorn.ctl
# or $HOME/.gunicorn/gunicorn.ctl, one path for every stack of the user; serve supervises gunicorn itself.
control_socket_disable = True

# ps's name of the master, `gunicorn: master [sagemaker-tfs]` (gunicorn sets it with setproctitle), instead of the
# app factory's module path
proc_name = "sagemaker-tfs"


def pre_fork(server: _Any, worker: _Any) -> None:
    """In the master, before forking a worker: its slot, the lowest that no live worker holds (shared/gpus.py's
    free_slot). gunicorn removes a dead worker from server.WORKERS before it forks the one that replaces it, so the
    replacement takes the dead one's slot, hence its GPU (the toolkit's gpu_id is the slot mod the GPUs)."""
    from ..shared.gpus import free_slot

    worker.sagemaker_slot = free_slot(getattr(live, "sagemaker_slot", -1) for live in server.WORKERS.values())


def post_fork(server: _Any, worker: _Any) -> None:
    """In the worker: it takes its slot (pre_fork), before the app is built.

    gunicorn kills a worker silent for longer than its timeout, also while the worker creates the app, and
    creating it runs the script's start-up functions (the inference toolkit's pre_model_fn, model_fn,
    model_warmup_fn), which may take minutes. So a thread keeps the heartbeat until the app exists, for at most
    SAGEMAKER_TFS_WAIT_TIME_SECONDS (the start-up budget); the worker takes no request before then."""
    from ..config import Settings
    from ..shared.gpus import set_worker_slot
    from ..shared.process_title import set_title

    set_worker_slot(worker.sagemaker_slot)
    # gunicorn titled the worker `gunicorn: worker [NAME]` just before this hook; the slot tells workers apart
    set_title(f"gunicorn: worker {worker.sagemaker_slot} [{proc_name}]")

    created = worker.sagemaker_app_created = _threading.Event()
    interval = max(0.2, min(5.0, worker.cfg.timeout / 4))
    deadline = _time.monotonic() + Settings.from_env().tfs_wait_time_seconds

    def heartbeat() -> None:
        while not created.wait(interval) and _time.monotonic() < deadline:
            worker.notify()

    _threading.Thread(target=heartbeat, name="start-up heartbeat", daemon=True).start()


def post_worker_init(worker: _Any) -> None:
    """The worker has created the app: its heartbeat is gunicorn's again; it listens on a socket of its own too,
    where nginx sends the requests of the sessions it opens (web/sessions.py); and it says it is ready in the runtime
    folder, where serve's start-up check looks (a check that never queues behind client requests, as a /ping
    would)."""
    from ..config import Settings
    from ..shared.runtime_dir import mark_worker_ready, worker_socket
    from ..shared.sockets import unix_listener

    worker.sagemaker_app_created.set()
    runtime = _Path(Settings.from_env().runtime_dir)
    worker.sockets.append(unix_listener(worker_socket(runtime, worker.pid), worker.cfg.backlog))
    mark_worker_ready(runtime, worker.pid)


def child_exit(server: _Any, worker: _Any) -> None:
    """The worker's own socket is removed. With SAGEMAKER_METRICS, a worker that exits while gunicorn keeps running
    (gunicorn starts another) counts as a restart, in this master's file of the metrics folder
    (shared/metrics_files.py). During a stop, gunicorn has closed its listeners already."""
    global _worker_restarts
    from ..config import Settings
    from ..shared.runtime_dir import remove, worker_socket

    settings = Settings.from_env()
    remove(worker_socket(_Path(settings.runtime_dir), worker.pid))
    if not server.LISTENERS:
        return
    from ..shared.metrics_files import GUNICORN_FILE, folder, write_json

    if settings.metrics:
        _worker_restarts += 1
        write_json(
            folder(settings.runtime_dir) / GUNICORN_FILE.format(pid=server.pid), {"worker_restarts": _worker_restarts}
        )


_worker_restarts = 0
