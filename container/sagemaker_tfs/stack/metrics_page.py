"""`serve`'s Prometheus page (SAGEMAKER_METRICS=true): on 127.0.0.1:SAGEMAKER_METRICS_PORT, never through nginx.

It adds up the files gunicorn's processes write to the metrics folder of the runtime folder (their format is
shared/metrics_files.py): each worker's totals (web/metrics.py: requests by route and status with their duration,
stages, requests in flight; a worker gone keeps counting, its in-flight requests do not), and each gunicorn
master's count of worker restarts (wsgi_server/gunicorn_settings.py). It adds what `serve` knows at scrape time:
its children's restarts and its state. The text is prometheus_client's.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ..shared import runtime_dir
from ..shared.metrics_files import APP_FILE, BUCKETS, GUNICORN_FILE, Cells, add_histograms, folder, pid_of, read_json
from ..shared.sockets import HOST
from ..shared.str_enum import StrEnum

if TYPE_CHECKING:  # prometheus_client is imported when the page starts: serve without metrics never loads it
    from wsgiref.simple_server import WSGIServer

    from prometheus_client.core import HistogramMetricFamily, Metric
    from prometheus_client.registry import Collector

log = logging.getLogger("serve")


class ServeState(StrEnum):
    """serve's own state, in its order (the metrics page reports the current one)."""

    STARTING = "starting"
    READY = "ready"
    STOPPING = "stopping"


# The model servers' own Prometheus page (TFS's metrics, on their REST ports) when the metrics are on.
MODEL_SERVER_MONITORING = 'prometheus_config { enable: true path: "/monitoring/prometheus/metrics" }\n'


def prepare_folder(runtime: Path) -> Path:
    """A fresh metrics folder: values of an earlier run must not be added up."""
    return runtime_dir.fresh_folder(folder(runtime))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def histogram_family(
    name: str, doc: str, labels: tuple[str, ...], histograms: Mapping[tuple[str, ...], Cells]
) -> HistogramMetricFamily:
    """A Prometheus histogram family of the metrics files' histograms (shared/metrics_files.py), by label values."""
    from prometheus_client.core import HistogramMetricFamily

    family = HistogramMetricFamily(name, doc, labels=labels)
    bounds = [str(b) for b in BUCKETS] + ["+Inf"]
    for key, cells in sorted(histograms.items()):
        cumulative: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip(bounds, cells[:-1], strict=True):
            running += count
            cumulative.append((bound, running))
        family.add_metric(list(key), cumulative, cells[-1])
    return family


class StackCollector:
    """The page's metrics, read when it is scraped."""

    def __init__(
        self, metrics_folder: Path, restarts: Callable[[], Iterable[tuple[str, int]]], state: Callable[[], ServeState]
    ):
        self._folder, self._restarts, self._state = metrics_folder, restarts, state

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        requests: dict[tuple[str, ...], Cells] = {}
        stages: dict[tuple[str, ...], Cells] = {}
        in_flight = 0
        for path in self._folder.glob(APP_FILE.format(pid="*")):
            data = read_json(path)
            for merged, rows in ((requests, data.get("requests", ())), (stages, data.get("stages", ()))):
                add_histograms(merged, [(tuple(key), cells) for *key, cells in rows])
            if _alive(pid_of(path)):
                in_flight += data.get("in_flight", 0)
        yield histogram_family(
            "sagemaker_tfs_request_duration_seconds",
            "Requests answered by the app and their duration, by route and status.",
            ("route", "status"),
            requests,
        )
        yield histogram_family(
            "sagemaker_tfs_stage_duration_seconds", "Time spent in each stage of a request.", ("route", "stage"), stages
        )
        yield GaugeMetricFamily(
            "sagemaker_tfs_requests_in_flight", "Requests being handled by the app.", value=in_flight
        )
        worker_restarts = sum(
            read_json(path).get("worker_restarts", 0) for path in self._folder.glob(GUNICORN_FILE.format(pid="*"))
        )
        yield CounterMetricFamily(
            "sagemaker_tfs_worker_restarts", "gunicorn workers that exited and were replaced.", value=worker_restarts
        )
        restarts = CounterMetricFamily(
            "sagemaker_tfs_process_restarts",
            "Times serve restarted a child that died (model servers, gunicorn, nginx).",
            labels=("process",),
        )
        for name, count in self._restarts():
            restarts.add_metric((name,), count)
        yield restarts
        state = GaugeMetricFamily(
            "sagemaker_tfs_serve_state", "serve's state: 1 for the current one.", labels=("state",)
        )
        current = self._state()
        for name in ServeState:
            state.add_metric((name.value,), 1.0 if name == current else 0.0)
        yield state


def start(port: int, collector: StackCollector, *more_collectors: Collector) -> WSGIServer:
    """Serve the page from a thread of `serve`; returns the server (shutdown() stops it). Raises OSError if the
    port is taken."""
    from prometheus_client import CollectorRegistry, start_http_server

    registry = CollectorRegistry()
    for one in (collector, *more_collectors):
        registry.register(one)
    server, _thread = start_http_server(port, addr=HOST, registry=registry)
    log.info("metrics: Prometheus page on http://127.0.0.1:%d/metrics", port)
    return server
