"""TFS's Prometheus page (`--monitoring_config_file`): the metrics TensorFlow Serving exports, with its names,
types, labels, units (microseconds) and bucket limits, for what this server measures.

The values live in prometheus_client metrics (thread-safe) of a registry of our own; the page is printed as TFS's
exporter prints it: a TensorFlow monitoring metric `/a/b/c` is `:a:b:c`, metrics sorted by that TensorFlow name
and each one's label sets by their values; a `# TYPE` line per metric and no `# HELP`; a counter's samples carry
the bare name (no `_total`) and an integer; a histogram's are `_bucket` (cumulative integer counts, the bound
`le` a double printed with six significant digits as absl's StrCat does, the last `+Inf`), `_sum` (a double, the
same way) and `_count`; labels are always in braces, `{}` when there are none.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..shared.error_codes import ServingError
from . import protos

DEFAULT_PATH = "/monitoring/prometheus/metrics"

_MONITORING_MESSAGES = (
    ("PrometheusConfig", (("enable", 1, "TYPE_BOOL", None, False), ("path", 2, "TYPE_STRING", None, False))),
    ("MonitoringConfig", (("prometheus_config", 1, "TYPE_MESSAGE", ".tensorflow.serving.PrometheusConfig", False),)),
)


class MonitoringConfigError(ValueError):
    """The monitoring config file cannot be used; the message says why."""


@dataclass(frozen=True)
class MonitoringConfig:
    prometheus_path: str | None  # None: no Prometheus page


def load_monitoring_config(path: str) -> MonitoringConfig:
    """A --monitoring_config_file (TFS's MonitoringConfig text proto)."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise MonitoringConfigError(f"cannot read monitoring config file {path}: {exc.strerror}") from None
    cls = protos.message_class("sagemaker_tfs/monitoring_config.proto", _MONITORING_MESSAGES, "MonitoringConfig")
    prometheus = protos.parse_text(cls, text, path, MonitoringConfigError).prometheus_config
    return MonitoringConfig((prometheus.path or DEFAULT_PATH) if prometheus.enable else None)


def _double(value: float) -> str:
    """A double as absl's StrCat prints it (TFS's exporter): six significant digits, %g's form."""
    return f"{value:.6g}"


def _exponential(scale: float, growth: float, count: int) -> list[float]:
    """TensorFlow's Buckets::Exponential limits as TFS prints them (six significant digits), then +Inf."""
    return [float(_double(scale * growth**i)) for i in range(count)] + [float("inf")]


_LATENCY_BUCKETS = _exponential(10, 1.8, 33)  # microseconds, up to ~20 minutes
_QUEUEING_BUCKETS = _exponential(100, 1.2, 52)  # microseconds, up to ~1 second
_BATCH_SIZE_BUCKETS = _exponential(1, 2, 14)


class ModelServerMetrics:
    """Records what TFS records, where TFS records it; page() is the Prometheus page."""

    def __init__(self, thread_pool_name: str = "batch_threads"):
        import prometheus_client as prom

        prom.disable_created_metrics()  # TFS exports no *_created series
        self.registry = registry = prom.CollectorRegistry(auto_describe=True)

        def counter(name: str, doc: str, labels: tuple[str, ...] = ()) -> Any:
            return prom.Counter(name, doc, labels, registry=registry)

        def histogram(name: str, doc: str, labels: tuple[str, ...], buckets: list[float]) -> Any:
            return prom.Histogram(name, doc, labels, registry=registry, buckets=buckets)

        serving = ":tensorflow:serving:"
        self._request_count = counter(
            serving + "request_count", "The total number of requests.", ("model_name", "status")
        )
        self._request_latency = histogram(
            serving + "request_latency",
            "Distribution of wall time (in microseconds) for Tensorflow Serving request.",
            ("model_name", "API", "entrypoint"),
            _LATENCY_BUCKETS,
        )
        self._runtime_latency = histogram(
            serving + "runtime_latency",
            "Distribution of wall time (in microseconds) for Tensorflow runtime.",
            ("model_name", "API", "runtime"),
            _LATENCY_BUCKETS,
        )
        batching = serving + "batching_session:"
        self._queuing_latency = histogram(
            batching + "queuing_latency",
            "Distribution of wall time spent (in microseconds) in queuing",
            ("thread_pool_name",),
            _QUEUEING_BUCKETS,
        ).labels(thread_pool_name)
        self._wrapped_runs = counter(batching + "wrapped_run_count", "Total count of run calls on the wrapped session")
        self._input_batch_size = histogram(
            batching + "input_batch_size", "Tracks the batch size distribution on the inputs.", (), _BATCH_SIZE_BUCKETS
        )
        self._processed_batch_size = histogram(
            batching + "processed_batch_size",
            "Tracks the batch size distribution on processing.",
            (),
            _BATCH_SIZE_BUCKETS,
        )
        self._padding_size = histogram(
            batching + "padding_size",
            "Tracks the padding size distribution on batches.",
            ("execution_batch_size",),
            _BATCH_SIZE_BUCKETS,
        )
        saved_model = ":tensorflow:cc:saved_model:"
        self._load_attempts = counter(
            saved_model + "load_attempt_count",
            "The number of times a SavedModel was successfully loaded.",
            ("model_path", "status"),
        )
        self._load_latency = counter(
            saved_model + "load_latency",
            "Latency in microseconds for SavedModels that were successfully loaded.",
            ("model_path",),
        )
        self._warmup_latency = histogram(
            serving + "model_warmup_latency",
            "Distribution of wall time (in microseconds) for warming up the model.",
            ("model_path", "status"),
            _LATENCY_BUCKETS,
        )
        self._warmup_records = counter(
            serving + "model_warmup_records_read",
            "Total number of warmup records read during model warmup.",
            ("model_path", "status"),
        )
        self._cells: dict[tuple, object] = {}  # (metric, *labels) -> its labelled child: no lookup per request

    def _cell(self, metric: Any, *labels: str) -> Any:
        key = (id(metric), *labels)
        cell = self._cells.get(key)
        if cell is None:
            cell = self._cells[key] = metric.labels(*labels)
        return cell

    # ------------------------------------------------------------------------------------ the request path

    def request(self, model_name: str, api: str, entrypoint: str, status: str, started: float) -> None:
        """A finished request (TFS: the count always, the latency of successful ones); `started` is from
        time.perf_counter(), `status` a status code name (OK, INVALID_ARGUMENT...)."""
        if status == "OK":
            self._cell(self._request_latency, model_name, api, entrypoint).observe(
                (time.perf_counter() - started) * 1e6
            )
        self._cell(self._request_count, model_name, status).inc()

    def runtime(self, model_name: str, api: str, started: float) -> None:
        """A TensorFlow run of a request (with batching: from its queueing to its batch's end, as in TFS)."""
        self._cell(self._runtime_latency, model_name, api, "TF1").observe((time.perf_counter() - started) * 1e6)

    def batch(self, task_sizes: list[int], size: int, padded_size: int, queued_seconds: list[float]) -> None:
        """A batch about to run: its tasks' sizes and queueing delays, its size after padding."""
        for task_size, seconds in zip(task_sizes, queued_seconds, strict=True):
            self._input_batch_size.observe(task_size)
            self._queuing_latency.observe(seconds * 1e6)
        self._processed_batch_size.observe(padded_size)
        self._cell(self._padding_size, str(padded_size)).observe(padded_size - size)
        self._wrapped_runs.inc()

    def load(self, model_path: str, ok: bool, seconds: float) -> None:
        self._cell(self._load_attempts, model_path, "success" if ok else "fail").inc()
        if ok:
            self._cell(self._load_latency, model_path).inc(int(seconds * 1e6))

    def warmup(self, model_path: str, status: str, microseconds: int, records: int) -> None:
        """A version's warm-up that read its file to the end or to a reader error; `status` as absl prints a
        Status (`OK`, `DATA_LOSS: corrupted record at 12`)."""
        self._cell(self._warmup_latency, model_path, status).observe(microseconds)
        self._cell(self._warmup_records, model_path, status).inc(records)

    # ------------------------------------------------------------------------------------ the page

    def page(self) -> bytes:
        lines: list[str] = []
        for family in sorted(self.registry.collect(), key=lambda f: f.name.replace(":", "/")):
            lines.append(f"# TYPE {family.name} {family.type}")
            points: dict[tuple, dict[str, list]] = {}  # a point's labels -> sample kind -> samples
            for sample in family.samples:
                labels = tuple((k, v) for k, v in sample.labels.items() if k != "le")
                kind = sample.name[len(family.name) :]  # _total, _bucket, _sum, _count
                points.setdefault(labels, {}).setdefault(kind, []).append(sample)
            for key in sorted(points, key=lambda labels: [value for _, value in labels]):
                text = ",".join(f'{name}="{_escape(value)}"' for name, value in key)
                samples = points[key]
                if not key and not any(s.value for s in samples.get("_total", samples.get("_count", ()))):
                    continue  # a metric without labels that never recorded: TFS has no point for it yet
                if family.type == "counter":
                    lines.extend(f"{family.name}{{{text}}} {int(s.value)}" for s in samples.get("_total", ()))
                    continue
                prefix = text + "," if text else ""
                for bucket in samples.get("_bucket", ()):
                    bound = bucket.labels["le"]
                    bound = bound if bound == "+Inf" else _double(float(bound))
                    lines.append(f'{family.name}_bucket{{{prefix}le="{bound}"}} {int(bucket.value)}')
                lines.extend(f"{family.name}_sum{{{text}}} {_double(s.value)}" for s in samples.get("_sum", ()))
                lines.extend(f"{family.name}_count{{{text}}} {int(s.value)}" for s in samples.get("_count", ()))
        return ("\n".join(lines) + "\n").encode("utf-8")


def _escape(value: str) -> str:
    """A label value as TFS's exporter escapes it: backslashes and double quotes only."""
    return value.replace("\\", "\\\\").replace('"', '\\"')


def status_name(error: BaseException | None) -> str:
    """The status label of a request's outcome, as TFS names its status codes."""
    if error is None:
        return "OK"
    if isinstance(error, ServingError):
        return error.code.name
    return "INTERNAL"
