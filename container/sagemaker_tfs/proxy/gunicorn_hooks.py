"""gunicorn's settings module (`gunicorn -c python:sagemaker_tfs.proxy.gunicorn_hooks`): worker start-up that
gunicorn's worker timeout does not cut short.

gunicorn kills a worker that stays silent longer than its timeout, also while the worker builds the app, and
the app factory runs the script's start-up functions (the toolkit's pre_model_fn, model_fn, model_warmup_fn),
which may take minutes. So from fork until the app is built, a thread keeps the worker's heartbeat, for at
most SAGEMAKER_TFS_WAIT_TIME_SECONDS (then gunicorn's timeout applies again). The worker accepts no request
before its app is built. When it is, it leaves a marker in <runtime dir>/workers-ready/, by which `serve`
knows that every worker is ready.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from ..config import Settings

READY_FOLDER = "workers-ready"


def ready_folder(runtime_dir: str | Path) -> Path:
    return Path(runtime_dir) / READY_FOLDER


def post_fork(server, worker) -> None:
    settings = Settings.from_env()
    loaded = worker.sagemaker_app_loaded = threading.Event()
    interval = max(0.2, min(5.0, worker.cfg.timeout / 4))
    deadline = time.monotonic() + settings.tfs_wait_time_seconds

    def heartbeat() -> None:
        while not loaded.wait(interval) and time.monotonic() < deadline:
            worker.notify()

    threading.Thread(target=heartbeat, name="start-up heartbeat", daemon=True).start()


def post_worker_init(worker) -> None:
    worker.sagemaker_app_loaded.set()
    folder = ready_folder(Settings.from_env().runtime_dir)
    folder.mkdir(exist_ok=True)
    (folder / str(os.getpid())).touch()
