"""`serve`'s Prometheus page (SAGEMAKER_METRICS=true): on 127.0.0.1:SAGEMAKER_METRICS_PORT, never through nginx.

It adds up what the gunicorn processes wrote to prometheus_client's multi-process folder (the app's request
metrics, from every worker alive or gone; gunicorn's worker restarts, counted by its master: gunicorn_settings.py),
and adds what `serve` itself knows at scrape time: its children's restarts and its state.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable, Iterable

from . import runtime_dir

log = logging.getLogger("serve")

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"  # prometheus_client's own variable: where each process writes its values
STATES = ("starting", "ready", "stopping")
# The model servers' own Prometheus page (TFS's metrics, on their REST ports) when the metrics are on.
MODEL_SERVER_MONITORING = 'prometheus_config { enable: true path: "/monitoring/prometheus/metrics" }\n'


def prepare_folder(runtime: Path) -> Path:
    """A fresh multi-process folder in the runtime folder: values of an earlier run must not be added up."""
    folder = runtime / "metrics"
    runtime_dir.fresh_folder(folder)
    return folder


def forget_live_values(folder: Path) -> None:
    """Drop the live gauges (requests in flight) of gunicorn processes that died with their master: only
    gunicorn's processes write to the folder, and a new gunicorn starts with none in flight."""
    for path in folder.glob("gauge_live*.db"):
        path.unlink(missing_ok=True)


class StackCollector:
    """`serve`'s own metrics, read when the page is scraped."""

    def __init__(self, restarts: Callable[[], Iterable[tuple[str, int]]], state: Callable[[], str]):
        self._restarts, self._state = restarts, state

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        restarts = CounterMetricFamily("sagemaker_tfs_process_restarts",
                                       "Times serve restarted a child that died (model servers, gunicorn, nginx).",
                                       labels=("process",))
        for name, count in self._restarts():
            restarts.add_metric((name,), count)
        yield restarts
        state = GaugeMetricFamily("sagemaker_tfs_serve_state", "serve's state: 1 for the current one.",
                                  labels=("state",))
        current = self._state()
        for name in STATES:
            state.add_metric((name,), 1.0 if name == current else 0.0)
        yield state


def start(port: int, folder: Path, collector: StackCollector):
    """Serve the page from a thread of `serve`; returns the server (shutdown() stops it). Raises OSError if the
    port is taken."""
    from prometheus_client import CollectorRegistry, start_http_server
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(folder))
    registry.register(collector)
    server, _thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    log.info("metrics: Prometheus page on http://127.0.0.1:%d/metrics", port)
    return server
