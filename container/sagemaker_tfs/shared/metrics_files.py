"""The metrics folder's file format (SAGEMAKER_METRICS=true): what gunicorn's processes write and `serve`'s page
adds up (stack/metrics_page.py).

    app-<pid>.json       one worker's totals (web/metrics.py): {"in_flight": n, "requests": [[route, status, cells]],
                         "stages": [[route, stage, cells]]}; cells are a histogram over BUCKETS: a count per bucket
                         (not cumulative), the +Inf count, then the sum of the observed seconds
    gunicorn-<pid>.json  one gunicorn master's count of worker restarts (wsgi_server/gunicorn_settings.py):
                         {"worker_restarts": n}

Each file is replaced whole (write_json), so a reader never sees half of one.
"""

from __future__ import annotations

import bisect
import json
import os
from collections.abc import Iterable
from pathlib import Path

APP_FILE = "app-{pid}.json"
GUNICORN_FILE = "gunicorn-{pid}.json"
# Upper bounds in seconds (then +Inf): 0.5 ms to 60 s, finer where a proxy's stages fall.
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

Cells = list  # [count per bucket..., +Inf count, sum of seconds]


def folder(runtime: str | Path) -> Path:
    """The metrics folder of a runtime folder."""
    return Path(runtime) / "metrics"


def write_json(path: Path, value: object) -> None:
    """Replace path's content at once: the page never reads half a file."""
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(value))
    os.replace(temporary, path)


def read_json(path: Path) -> dict:
    """A file's content; {} when it was removed meanwhile or is not JSON (nothing to add)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def observe(histograms: dict[tuple, Cells], key: tuple, seconds: float) -> None:
    """Count `seconds` in its bucket of the histogram `key`."""
    cells = histograms.get(key)
    if cells is None:
        cells = histograms[key] = [0] * (len(BUCKETS) + 1) + [0.0]
    cells[bisect.bisect_left(BUCKETS, seconds)] += 1
    cells[-1] += seconds


def add_histograms(into: dict[tuple, Cells], histograms: Iterable[tuple[tuple, Cells]]) -> None:
    """Add each (key, cells) to `into`'s histogram of that key, cell by cell."""
    for key, cells in histograms:
        merged = into.setdefault(key, [0] * len(cells))
        for i, value in enumerate(cells):
            merged[i] += value


def pid_of(path: Path) -> int:
    """The process id in a file name of this folder (`app-<pid>.json`)."""
    return int(path.stem.rsplit("-", 1)[1])
