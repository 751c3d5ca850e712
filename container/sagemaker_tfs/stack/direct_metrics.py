"""The direct route's requests on `serve`'s Prometheus page (SAGEMAKER_METRICS with the direct route on).

Requests nginx answers straight from the model servers never reach the app, so the app's metrics cannot count them.
nginx sends one access log line per such request (`<status> <request time>`) as a syslog datagram to a unix socket
in the runtime folder; a thread of `serve` reads them and adds each to its histogram. A datagram costs nginx one
non-blocking send and the request path nothing else; a line that finds the socket's buffer full is dropped, not
waited for. The direct route's fallbacks are answered by the app and counted there.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ..shared import runtime_dir
from ..shared.metrics_files import Cells, observe
from .metrics_page import histogram_family

if TYPE_CHECKING:
    from prometheus_client.core import Metric

log = logging.getLogger("serve")

SOCKET = runtime_dir.DIRECT_LOG_SOCKET
LOG_FORMAT = "$status $request_time"  # nginx's, after the syslog header


class DirectRouteLog:
    """Counts the direct route's requests from nginx's datagrams; collect() is its part of the page."""

    def __init__(self, path: Path):
        runtime_dir.remove(path)
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._socket.bind(str(path))
        os.chmod(path, 0o666)  # nginx's workers send, as another user when serve is root (see stack/nginx.py)
        self._requests: dict[tuple[str, str], Cells] = {}  # (route, status) -> histogram cells
        threading.Thread(target=self._receive, name="direct-route-log", daemon=True).start()

    def _receive(self) -> None:
        while True:
            try:
                line = self._socket.recv(4096).decode("utf-8", "replace")
            except OSError:
                return  # closed
            self.count(line)

    def count(self, line: str) -> None:
        """One syslog line of nginx's: `<190>Nov 26 23:00:00 direct: 200 0.002`."""
        try:
            status, seconds = line.rsplit(" ", 2)[-2:]
            observe(self._requests, ("/invocations", status), float(seconds))
        except ValueError:
            log.debug("direct route log: unexpected line %r", line)

    def collect(self) -> Iterator[Metric]:
        yield histogram_family(
            "sagemaker_tfs_direct_request_duration_seconds",
            "Requests nginx answered straight "
            "from the model servers (the direct route) and their duration in nginx, by route and "
            "status.",
            ("route", "status"),
            {key: list(cells) for key, cells in dict(self._requests).items()},
        )

    def close(self) -> None:
        self._socket.close()
