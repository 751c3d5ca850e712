"""The REST API with TFS's monitoring: its request metrics, and the Prometheus page on its path.

TFS counts every request its REST dispatcher handles (paths under /v1/) by model name and status, and records
the latency of successful ones by model name, verb (`predict`, `classify`, `regress`; empty for status and
metadata) and entrypoint `REST`. Its exporter answers any method on the configured path, ahead of the API.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .http_server import Pending, Response
from .metrics import ModelServerMetrics
from .rest import RestApi, Verb

_VERBS = {verb: verb.value for verb in (Verb.PREDICT, Verb.CLASSIFY, Verb.REGRESS)}


class _Recorded(Pending):
    """A pending response whose metrics are recorded when the connection takes its answer."""

    __slots__ = ("inner", "record")

    def __init__(self, inner: Pending, record: Callable[[Response], None]):
        self.future, self.inner, self.record = inner.future, inner, record

    def response(self) -> Response:
        response = self.inner.response()
        self.record(response)
        return response


class MonitoredApi:
    """An http_server Application: the RestApi, its requests measured, plus the metrics page at `path`."""

    def __init__(self, api: RestApi, metrics: ModelServerMetrics, path: str):
        self.api, self.metrics, self.path = api, metrics, path
        self.extra_headers = api.extra_headers
        self.preflight = api.preflight
        self.bad_request = api.bad_request
        self.refuse = api.refuse

    def handle(self, method: str, path: str, body: bytes) -> Response | Pending:
        if path.partition("?")[0] == self.path:
            return Response(200, self.metrics.page(), b"text/plain")
        started = time.perf_counter()
        result = self.api.handle(method, path, body)
        route = self.api.route_of(method, path)
        if (
            route is not None
            and route.verb is None
            and route.fixed is not None
            and route.fixed.content_type == b"text/html"
        ):
            return result  # outside /v1/: not a model request
        name = route.name if route is not None else ""
        api = _VERBS.get(route.verb, "") if route is not None and route.verb is not None else ""

        def record(response: Response) -> None:
            self.metrics.request(name, api, "REST", response.code, started)

        if isinstance(result, Pending):
            return _Recorded(result, record)
        record(result)
        return result
