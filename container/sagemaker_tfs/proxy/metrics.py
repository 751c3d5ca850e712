"""Where a request's time goes: per-stage timings for the Prometheus page (SAGEMAKER_METRICS) and the
Server-Timing header (SAGEMAKER_SERVER_TIMING).

Stages, in seconds: `handler` (a script's handler), `input_handler` / `output_handler` (a script's pair),
`default_input_handler` / `default_output_handler` (the default codecs, without a script), `model_server` (the
call between them), and `total` (the app's whole handling of the request). A request records only the stages it
ran.

The gunicorn workers are separate processes: their values go to prometheus_client's multi-process files
(PROMETHEUS_MULTIPROC_DIR, set by `serve`), which `serve`'s metrics page adds up. Imported only when metrics or
timings are on.
"""

from __future__ import annotations

import time

ROUTES = ("/ping", "/invocations", "/execution-parameters")  # any other path is labelled "other"
# Seconds: 0.5 ms to 60 s, finer where a proxy's stages fall (sub-millisecond to a few hundred milliseconds).
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
           float("inf"))


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


class ProxyMetrics:
    """The app's metrics in one worker (prometheus_client in multi-process mode)."""

    def __init__(self) -> None:
        import prometheus_client as prom

        self._requests = prom.Counter("sagemaker_tfs_requests", "Requests answered by the app, by route and status.",
                                      ("route", "status"))
        self._duration = prom.Histogram("sagemaker_tfs_request_duration_seconds",
                                        "Time spent in each stage of a request, and in total.", ("route", "stage"),
                                        buckets=BUCKETS)
        self._in_flight = prom.Gauge("sagemaker_tfs_requests_in_flight", "Requests being handled by the app.",
                                     multiprocess_mode="livesum")
        self._cells: dict[tuple, object] = {}  # labelled children by labels: no lookup on the request path

    def _cell(self, metric, *labels):
        key = (id(metric), *labels)
        cell = self._cells.get(key)
        if cell is None:
            cell = self._cells[key] = metric.labels(*labels)
        return cell

    def started(self) -> None:
        self._in_flight.inc()

    def finished(self, path: str, status: int, timings: Timings, total: float) -> None:
        route = path if path in ROUTES else "other"
        self._in_flight.dec()
        self._cell(self._requests, route, str(status)).inc()
        for stage, seconds in timings.stages:
            self._cell(self._duration, route, stage).observe(seconds)
        self._cell(self._duration, route, "total").observe(total)
