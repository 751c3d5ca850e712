"""Process titles: what `ps -eo args` and `top` show for serve, the model servers and gunicorn's workers (every one
would be `python ...` otherwise; docs/operations.md, "Processes by name")."""

from __future__ import annotations

import os


def set_title(title: str) -> None:
    """Shows `title` as this process's command line (/proc/PID/cmdline) and name (/proc/PID/comm).

    SPT_NOENV keeps setproctitle off the environment's memory, so /proc/PID/environ stays readable (a title is then
    at most as long as the original command line, which every title here is shorter than); it is set before the
    first import, when setproctitle reads it, and inherited by the children, whose gunicorn imports setproctitle
    itself. Without setproctitle (an environment installed before it was a dependency) the title stays as it is."""
    os.environ.setdefault("SPT_NOENV", "1")
    try:
        from setproctitle import setproctitle
    except ImportError:
        return
    setproctitle(title)
