"""gunicorn's settings file for the gunicorn `serve` starts (`--config python:sagemaker_tfs.gunicorn_settings`).

gunicorn reads the names below that are its settings and ignores the others, so this file suits gunicorn
versions with and without a control socket. Imports are private names: a public one could be taken for a setting.
"""

from pathlib import Path as _Path

# gunicorn >= 25.1 opens a control socket (status, kill workers, reload, shutdown) at $XDG_RUNTIME_DIR/gunicorn.ctl
# or $HOME/.gunicorn/gunicorn.ctl, one path for every stack of the user; serve supervises gunicorn itself.
control_socket_disable = True


def post_worker_init(worker) -> None:
    """The worker has created the app: say so in the runtime folder, where serve's start-up check looks (a
    check that never queues behind client requests, as a /ping would)."""
    from .config import Settings
    from .runtime_dir import mark_worker_ready

    mark_worker_ready(_Path(Settings.from_env().runtime_dir), worker.pid)
