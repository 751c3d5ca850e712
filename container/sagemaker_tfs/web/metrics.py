"""Where a request's time goes: per-stage timings for the Prometheus page (SAGEMAKER_METRICS) and the
Server-Timing header (SAGEMAKER_SERVER_TIMING).

Stages, in seconds: `handler` (a script's handler), `input_handler` / `output_handler` (a script's pair),
`default_input_handler` / `default_output_handler` (the default codecs, without a script), `model_server` (the
call between them); a request records only the stages it ran, and its total.

The gunicorn workers are separate processes, whose values `serve`'s page adds up (stack/metrics_page.py; the files'
format is shared/metrics_files.py). Writing each observation to a shared file (prometheus_client's multi-process
mode) cost ~15 us per request (measured: the pair lost ~7% of its requests/s); here the request path only adds to
its own thread's totals (2.7 us, no lock, no file), and a thread of the worker writes the worker's totals to its
file in the metrics folder twice a second and when the worker exits. The page can therefore lag the requests by up
to FLUSH_SECONDS.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from pathlib import Path

from ..shared.metrics_files import APP_FILE, add_histograms, observe, write_json

FLUSH_SECONDS = 0.5


class Timings:
    """The stages of one request, in the order they ran."""

    __slots__ = ("started", "stages")

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.stages: list[tuple[str, float]] = []

    def add(self, stage: str, since: float) -> float:
        """Record `stage` as having run from `since` (a time.perf_counter()) until now; returns now."""
        now = time.perf_counter()
        self.stages.append((stage, now - since))
        return now

    def server_timing(self, total: float) -> str:
        """The Server-Timing header value: each stage's duration in milliseconds, then the total."""
        return ", ".join(f"{stage};dur={seconds * 1000:.3f}" for stage, seconds in (*self.stages, ("total", total)))


class _Totals:
    """One thread's totals since the worker started (only that thread writes them)."""

    __slots__ = ("requests", "stages", "started", "finished")

    def __init__(self) -> None:
        self.requests: dict[tuple[str, str], list] = {}  # (route, status) -> histogram of the total duration
        self.stages: dict[tuple[str, str], list] = {}  # (route, stage) -> histogram
        self.started = self.finished = 0


class AppMetrics:
    """The app's metrics in one gunicorn worker: requests by route and status with their duration, each stage's
    duration, requests in flight."""

    def __init__(self, folder: Path) -> None:
        self._path = folder / APP_FILE.format(pid=os.getpid())
        self._local = threading.local()
        self._threads: list[_Totals] = []  # list.append is atomic: no lock
        self._written = -1
        threading.Thread(target=self._flush_forever, name="metrics-flush", daemon=True).start()
        atexit.register(self.flush)

    def _totals(self) -> _Totals:
        totals = getattr(self._local, "totals", None)
        if totals is None:
            totals = self._local.totals = _Totals()
            self._threads.append(totals)
        return totals

    def started(self) -> None:
        self._totals().started += 1

    def finished(self, route: str | None, status: int, timings: Timings, total: float) -> None:
        """Count a request of `route` (its URI template, e.g. `/models/{name}/invoke`; None for a path no route
        matched, labelled "other", so that the labels are as few as the routes)."""
        totals = self._totals()
        route = route or "other"
        observe(totals.requests, (route, str(status)), total)
        for stage, seconds in timings.stages:
            observe(totals.stages, (route, stage), seconds)
        totals.finished += 1

    # ------------------------------------------------------------------------------------ the worker's file

    def _flush_forever(self) -> None:
        while True:
            time.sleep(FLUSH_SECONDS)
            self.flush()

    def flush(self) -> None:
        """Write the worker's totals (all threads added up) to its file, if they changed."""
        threads = list(self._threads)
        seen = sum(t.started + t.finished for t in threads)
        if seen == self._written:
            return
        requests: dict[tuple[str, str], list] = {}
        stages: dict[tuple[str, str], list] = {}
        for totals in threads:  # copies made by C code under the GIL: consistent per dictionary and per list
            add_histograms(requests, [(key, list(cells)) for key, cells in dict(totals.requests).items()])
            add_histograms(stages, [(key, list(cells)) for key, cells in dict(totals.stages).items()])
        snapshot = {
            "in_flight": sum(t.started - t.finished for t in threads),
            "requests": [[*key, cells] for key, cells in requests.items()],
            "stages": [[*key, cells] for key, cells in stages.items()],
        }
        write_json(self._path, snapshot)
        self._written = seen
