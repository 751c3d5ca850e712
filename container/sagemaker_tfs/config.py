"""The settings module: every environment variable the stack reads, each declared once (name, type, default,
validation, one-line help), in the spirit of gunicorn's settings and `model_server/flags.py`.

`Settings.from_env()` reads them into one typed, frozen object; an invalid value raises ConfigError naming the
variable, so that `serve` fails at once with one message. `serve` resolves them once, adds what it found (the model
folder, the default model, the model servers' ports: the variables "set by serve") and hands them to gunicorn's
workers and the model servers with `to_env()`; the app reads them back with `from_env()`, so that every process
of a stack sees the same values. No other module reads these variables from the environment.

Names and defaults are those of the SageMaker TensorFlow Serving container, except where the README's
"Differences" section says otherwise. The table of variables in docs/settings.md is generated from the
declarations: to add a variable, declare a field of Settings, then run `scripts/settings_table.py --write`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .shared import handler_contract, logs, media_types, runtime_dir
from .shared.cpus import cpu_count


class ConfigError(ValueError):
    """A setting has a value the container cannot use; the message names the variable."""


# ---- parsers: text -> value, ValueError("must ...") when the text cannot be used ----


def _bool(raw: str) -> bool:
    lowered = raw.lower()
    if lowered not in ("true", "false"):
        raise ValueError("must be 'true' or 'false'")
    return lowered == "true"


def _int_between(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise ValueError("must be an integer") from None
        if maximum is not None and not minimum <= value <= maximum:
            raise ValueError(f"must be between {minimum} and {maximum}")
        if value < minimum:
            raise ValueError(f"must be at least {minimum}")
        return value

    return parse


def _fraction(raw: str) -> float:
    value = float(raw)
    if not 0.0 <= value < 1.0:
        raise ValueError("must be between 0 and 1")
    return value


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        if raw.lower() not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return raw.lower()

    return parse


def _port_range(raw: str) -> tuple[int, int]:
    parts = raw.split("-")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise ValueError("must be 'low-high', e.g. 9000-9999")
    low, high = int(parts[0]), int(parts[1])
    if not 0 < low <= high <= 65535:
        raise ValueError("must be two ports with low <= high")
    return low, high


def _port_list(raw: str) -> tuple[int, ...]:
    if raw == NO_PORTS:
        return ()
    try:
        ports = tuple(int(part) for part in raw.split(","))
    except ValueError:
        ports = ()
    if not ports or not all(0 < port < 65536 for port in ports):
        raise ValueError("must be a comma-separated list of ports")
    return ports


def _model_name(raw: str) -> str | None:
    # The original container's default is the string "None": treat it as unset.
    return None if raw == "None" else raw


def _body_size(raw: str) -> str:
    """An nginx size: digits with an optional k/m/g suffix; 0 means unlimited."""
    digits = raw[:-1] if raw[-1:].lower() in ("k", "m", "g") else raw
    if not digits.isdigit():
        raise ValueError("must be an nginx size such as 0 (unlimited), 100m or 512k")
    return raw


def _batch_strategy(raw: str) -> str:
    spelled = raw.replace("_", "").lower()
    if spelled not in ("multirecord", "singlerecord"):
        raise ValueError("must be MULTI_RECORD or SINGLE_RECORD")
    return "MULTI_RECORD" if spelled == "multirecord" else "SINGLE_RECORD"


def _text(raw: str) -> str:
    return raw


def _program(raw: str) -> str:
    if "/" in raw or not raw.endswith(".py") or raw in (".py", "..py"):
        raise ValueError("must be a file name in code/ ending in .py, without '/', such as inference.py")
    return raw


def _toolkit_accept(raw: str) -> str:
    if media_types.base(raw) not in TOOLKIT_ACCEPT_TYPES:
        raise ValueError(f"must be one of {', '.join(TOOLKIT_ACCEPT_TYPES)}")
    return raw


# ---- renderers: value -> text that parses back to it (None: the variable is left unset) ----


def _render_bool(value: bool) -> str:
    return "true" if value else "false"


def _render_presence(value: bool) -> str | None:
    return "true" if value else None


def _render_range(value: tuple[int, int]) -> str:
    return f"{value[0]}-{value[1]}"


def _render_list(value: tuple[int, ...]) -> str:
    return ",".join(map(str, value)) or NO_PORTS


def _device_list(raw: str) -> tuple[str, ...]:
    if raw == NO_DEVICES:
        return ()
    devices = tuple(part.strip() for part in raw.split(","))
    if not all(devices):
        raise ValueError("must be a comma-separated list of CUDA devices")
    return devices


def _render_devices(value: tuple[str, ...]) -> str:
    return ",".join(value) or NO_DEVICES


@dataclass(frozen=True)
class Variable:
    """The declaration of one environment variable."""

    name: str
    parse: Callable[[str], Any]
    default: Any  # a value, or a function of the other settings (`lambda s: ...s.bind_port...`) to compute it
    help: str  # one line: the settings table's "effect" (docs/settings.md)
    shown_default: str | None = None  # the settings table's "default" when the value alone does not say it
    render: Callable[[Any], str | None] = str
    adjust: Callable[[Any, Any], Any] | None = None  # (value, other settings) -> value, after parsing
    by_presence: bool = False  # set to anything (even empty) means True, as SageMaker's SAGEMAKER_BATCH
    set_by_serve: bool = False  # handed by `serve` to its children, not set by users

    def is_set(self, env: Mapping[str, str]) -> bool:
        """Whether `env` gives the variable a value (else the setting takes its default)."""
        raw = env.get(self.name)
        return raw is not None if self.by_presence else raw is not None and raw.strip() != ""

    def read(self, env: Mapping[str, str], others: Any) -> Any:
        raw = env.get(self.name)
        if self.by_presence:
            value = raw is not None
        elif not self.is_set(env):
            value = self.default(others) if callable(self.default) else self.default
        else:
            assert raw is not None  # (is_set)
            try:
                value = self.parse(raw.strip())
            except ValueError as exc:
                detail = f": {exc}" if str(exc) else ""
                raise ConfigError(f"{self.name}={raw!r} is not valid{detail}") from None
        return value if self.adjust is None else self.adjust(value, others)

    def default_text(self) -> str:
        if self.shown_default is not None:
            return self.shown_default
        text = None if self.default is None else self.render(self.default)
        return "unset" if text is None else f"`{text}`"


def var(name: str, parse: Callable[[str], Any], default: Any, help: str, **options: Any) -> Any:
    """A field of Settings read from the environment variable `name` (see Variable for the options)."""
    return field(metadata={"variable": Variable(name, parse, default, help, **options)})


NGINX_LOG_LEVELS = ("debug", "info", "notice", "warn", "error", "crit", "alert", "emerg")
GUNICORN_LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
# "loop": ours (wsgi_server/loop.py, an event loop); the others are gunicorn's own.
GUNICORN_WORKER_CLASSES = ("loop", "sync", "gthread", "gevent", "eventlet", "tornado")
PING_TIMEOUT_SECONDS = 2.0  # SageMaker gives /ping 2 s: what the stack's own readiness questions may take too
DEFAULT_MAX_PAYLOAD_IN_MB = 6  # SageMaker's, when neither the job nor the container gives MaxPayloadInMB
MAX_TRANSFORM_MB = 100  # SageMaker's limit of MaxPayloadInMB and of MaxConcurrentTransforms x MaxPayloadInMB
BATCH_QUEUE_UNDER_TRANSFORM = 100000000
_EXEC_PARAMS = "reported by `GET /execution-parameters`"
NO_PORTS = "none"  # TFS_REST_PORTS / TFS_GRPC_PORTS without SavedModels: no model server runs
NO_DEVICES = "none"  # TFS_CUDA_DEVICES on a machine without GPUs
TOOLKIT_ACCEPT_TYPES = media_types.names(*media_types.TOOLKIT_FORMATS)  # the default output_fn writes them
_TOOLKIT = "the inference toolkit contract's"


# ---- the defaults that depend on what `serve` finds (the GPUs, the script): Settings.resolved() applies them ----


def default_worker_count(model_server_workers: int | None, gpus: int, script_loads_model: bool) -> tuple[int, str]:
    """gunicorn's worker count when SAGEMAKER_GUNICORN_WORKERS is unset, and why: SAGEMAKER_MODEL_SERVER_WORKERS
    when set; else, on a machine with GPUs, one worker per GPU when an inference toolkit script's model_fn loads
    the model (each worker holds a copy, on GPU `gpu_id`: the toolkit's own default); else one per core (the
    workers never touch a GPU when the model servers hold the model)."""
    if model_server_workers:
        return model_server_workers, "SAGEMAKER_MODEL_SERVER_WORKERS"
    if gpus and script_loads_model:
        return gpus, "one per GPU: the script's model_fn loads the model"
    return cpu_count(), "one per core"


def default_instance_count(gpus: int) -> int:
    """SAGEMAKER_TFS_INSTANCE_COUNT when unset: one model server per GPU (each pinned to its GPU), else one."""
    return max(1, gpus)


@dataclass(frozen=True, kw_only=True)
class Settings:
    """The stack's configuration, in the settings table's order. Build it with `Settings.from_env()`."""

    bind_port: int = var("SAGEMAKER_BIND_TO_PORT", _int_between(1), 8080, "nginx's port")
    safe_port_range: tuple[int, int] | None = var(
        "SAGEMAKER_SAFE_PORT_RANGE",
        _port_range,
        None,
        "`low-high`; model server *i* uses gRPC `low+2i` and REST `low+2i+1`",
        shown_default="unset: gRPC 9000+i, REST 8501+i",
        render=_render_range,
    )
    tfs_instance_count: int = var(
        "SAGEMAKER_TFS_INSTANCE_COUNT",
        _int_between(1),
        lambda s: default_instance_count(len(s.cuda_devices)),
        "model server processes; requests are spread over them (round-robin)",
        shown_default="`1`; with several GPUs, one per GPU (docs/gpu.md)",
    )
    tfs_default_model_name: str | None = var(
        "SAGEMAKER_TFS_DEFAULT_MODEL_NAME",
        _model_name,
        None,
        "model used when a request names none",
        shown_default="the first model",
    )
    tfs_enable_batching: bool = var(
        "SAGEMAKER_TFS_ENABLE_BATCHING",
        _bool,
        False,
        "`true`/`false`: merge concurrent requests into one TensorFlow call",
        render=_render_bool,
    )
    tfs_max_batch_size: int = var("SAGEMAKER_TFS_MAX_BATCH_SIZE", _int_between(1), 8, "batching `max_batch_size`")
    tfs_batch_timeout_micros: int = var(
        "SAGEMAKER_TFS_BATCH_TIMEOUT_MICROS", _int_between(0), 1000, "batching `batch_timeout_micros`"
    )
    tfs_num_batch_threads: int = var(
        "SAGEMAKER_TFS_NUM_BATCH_THREADS",
        _int_between(1),
        lambda s: cpu_count(),
        "batching `num_batch_threads`",
        shown_default="number of cores",
    )
    # Batch Transform queues whole files' worth of records: the queue must not refuse them.
    tfs_max_enqueued_batches: int = var(
        "SAGEMAKER_TFS_MAX_ENQUEUED_BATCHES",
        _int_between(1),
        lambda s: BATCH_QUEUE_UNDER_TRANSFORM if s.batch else cpu_count(),
        "batching `max_enqueued_batches`",
        shown_default=f"number of cores (`{BATCH_QUEUE_UNDER_TRANSFORM}` under Batch Transform)",
    )
    tfs_inter_op_parallelism: int = var(
        "SAGEMAKER_TFS_INTER_OP_PARALLELISM",
        _int_between(0),
        0,
        "model server inter-op thread pool",
        shown_default="`0` (TensorFlow's choice)",
    )
    tfs_intra_op_parallelism: int = var(
        "SAGEMAKER_TFS_INTRA_OP_PARALLELISM",
        _int_between(0),
        0,
        "model server intra-op thread pool",
        shown_default="`0` (TensorFlow's choice)",
    )
    tfs_fractional_gpu_mem_margin: float = var(
        "SAGEMAKER_TFS_FRACTIONAL_GPU_MEM_MARGIN",
        _fraction,
        0.2,
        "with several instances on GPUs: each gets `(1 - margin) / instances per GPU` of its GPU's memory; "
        "instance *i* uses GPU *i mod n*",
    )
    nvidia_smi_timeout_seconds: int = var(
        "SAGEMAKER_NVIDIA_SMI_TIMEOUT_SECONDS",
        _int_between(1),
        20,
        "how long `serve` waits for `nvidia-smi -L` to count the GPUs; past it, or when it fails, it counts none "
        "(logged) and starts",
    )
    tfs_wait_time_seconds: int = var(
        "SAGEMAKER_TFS_WAIT_TIME_SECONDS",
        _int_between(1),
        300,
        "start-up budget for the models to load and the app to answer `/ping`",
    )
    nginx_loglevel: str = var(
        "SAGEMAKER_TFS_NGINX_LOGLEVEL", _choice(*NGINX_LOG_LEVELS), "error", "nginx `error_log` level"
    )
    # One worker per core, so that CPU-bound handlers do not run one at a time (the original: 1); one per GPU for a
    # toolkit script's model on a GPU machine (default_worker_count).
    gunicorn_workers: int = var(
        "SAGEMAKER_GUNICORN_WORKERS",
        _int_between(1),
        lambda s: default_worker_count(s.model_server_workers, 0, False)[0],
        "gunicorn worker processes",
        shown_default="`SAGEMAKER_MODEL_SERVER_WORKERS`, else one per GPU for an inference "
        "toolkit script whose `model_fn` loads the model on a machine with "
        "GPUs, else the number of cores (docs/gpu.md)",
    )
    gunicorn_threads: int = var(
        "SAGEMAKER_GUNICORN_THREADS",
        _int_between(1),
        1,
        "threads per `gthread` worker (a `loop` worker has one, and threads for scripts that block)",
    )
    # gevent is not required (the original's default): our event loop serves as many requests at once.
    gunicorn_worker_class: str = var(
        "SAGEMAKER_GUNICORN_WORKER_CLASS",
        _choice(*GUNICORN_WORKER_CLASSES),
        "loop",
        "gunicorn worker class: `loop` (one event loop serves every connection, scripts inline once quick; "
        "HTTP parsed in C; see Benchmarks), or one of gunicorn's: `sync`, "
        "`gthread` (with `SAGEMAKER_GUNICORN_THREADS`), `gevent` (needs the gevent package)",
    )
    gunicorn_timeout_seconds: int = var(
        "SAGEMAKER_GUNICORN_TIMEOUT_SECONDS",
        _int_between(1),
        lambda s: s.model_server_timeout or 30,
        "gunicorn worker timeout for requests; also the model server's REST timeout",
        shown_default="`SAGEMAKER_MODEL_SERVER_TIMEOUT`, else `30`",
    )
    model_server_workers: int | None = var(
        "SAGEMAKER_MODEL_SERVER_WORKERS",
        _int_between(1),
        None,
        f"{_TOOLKIT} name of the worker count, used when `SAGEMAKER_GUNICORN_WORKERS` is unset",
    )
    model_server_timeout: int | None = var(
        "SAGEMAKER_MODEL_SERVER_TIMEOUT",
        _int_between(1),
        None,
        f"{_TOOLKIT} name of the timeout, used when `SAGEMAKER_GUNICORN_TIMEOUT_SECONDS` is unset",
    )
    gunicorn_loglevel: str = var(
        "SAGEMAKER_GUNICORN_LOGLEVEL", _choice(*GUNICORN_LOG_LEVELS), "info", "gunicorn log level"
    )
    # Never below the gunicorn timeout, or nginx would give up on requests gunicorn still runs.
    nginx_proxy_read_timeout_seconds: int = var(
        "SAGEMAKER_NGINX_PROXY_READ_TIMEOUT_SECONDS",
        _int_between(1),
        60,
        "nginx `proxy_read_timeout`, never below the gunicorn timeout",
        adjust=lambda value, s: max(value, s.gunicorn_timeout_seconds),
    )
    nginx_client_max_body_size: str = var(
        "SAGEMAKER_NGINX_CLIENT_MAX_BODY_SIZE",
        _body_size,
        "0",
        "largest request body (nginx size: `100m`, `512k`); larger → 413",
        shown_default="`0` (unlimited)",
    )
    nginx_direct_invocations: bool = var(
        "SAGEMAKER_NGINX_DIRECT_INVOCATIONS",
        _bool,
        True,
        "`false`: every `/invocations` goes through the app; by default nginx sends plain TensorFlow Serving JSON "
        "straight to the model servers when no handler script applies (README: How a request flows)",
        render=_render_bool,
    )
    batch: bool = var(
        "SAGEMAKER_BATCH",
        _text,
        False,
        "set by Batch Transform; raises the batching queue default",
        by_presence=True,
        render=_render_presence,
    )
    max_concurrent_transforms: int | None = var(
        "SAGEMAKER_MAX_CONCURRENT_TRANSFORMS",
        _int_between(1),
        None,
        f"{_EXEC_PARAMS} when set, at most {MAX_TRANSFORM_MB} / `MaxPayloadInMB` ({DEFAULT_MAX_PAYLOAD_IN_MB} "
        f"when unset): SageMaker's limit of {MAX_TRANSFORM_MB} MB in flight",
    )
    batch_strategy: str | None = var(
        "SAGEMAKER_BATCH_STRATEGY", _batch_strategy, None, f"`MULTI_RECORD` or `SINGLE_RECORD`, {_EXEC_PARAMS} when set"
    )
    max_payload_in_mb: int | None = var(
        "SAGEMAKER_MAX_PAYLOAD_IN_MB",
        _int_between(0, MAX_TRANSFORM_MB),
        None,
        f"`0` to `{MAX_TRANSFORM_MB}`, {_EXEC_PARAMS} when set",
    )
    multi_model: bool = var(
        "SAGEMAKER_MULTI_MODEL",
        _bool,
        False,
        "`true`: a multi-model endpoint, models loaded at run time (README: Multi-model endpoints)",
        render=_render_bool,
    )
    model_dir: str = var(
        "SAGEMAKER_MODEL_DIR",
        _text,
        lambda s: "/opt/ml/models" if s.multi_model else "/opt/ml/model",
        "where the model is (to run outside a container); multi-model: the model root, every "
        "loaded `url` must be inside it",
        shown_default="`/opt/ml/model` (multi-model: `/opt/ml/models`)",
    )
    multi_model_code_dir: str = var(
        "SAGEMAKER_MULTI_MODEL_CODE_DIR",
        _text,
        "/opt/ml/code",
        "multi-model: universal `inference.py`, `lib/`, `requirements.txt` for models "
        "without their own; a missing folder means none",
    )
    multi_model_max_models: int = var(
        "SAGEMAKER_MULTI_MODEL_MAX_MODELS",
        _int_between(0),
        0,
        "multi-model: models loaded at once; one more load is a 507",
        shown_default="`0` (no limit)",
    )
    multi_model_memory_limit_percent: int = var(
        "SAGEMAKER_MULTI_MODEL_MEMORY_LIMIT_PERCENT",
        _int_between(1, 100),
        90,
        "multi-model: a load is a 507 when this much of the memory (the cgroup's limit, or the host's) is in use",
    )
    multi_model_universal_bucket: str | None = var(
        "SAGEMAKER_MULTI_MODEL_UNIVERSAL_BUCKET",
        _text,
        None,
        "not supported (with `_PREFIX`: scripts downloaded from S3): `serve` stops; use "
        "`SAGEMAKER_MULTI_MODEL_CODE_DIR`",
    )
    multi_model_universal_prefix: str | None = var(
        "SAGEMAKER_MULTI_MODEL_UNIVERSAL_PREFIX", _text, None, "see `SAGEMAKER_MULTI_MODEL_UNIVERSAL_BUCKET`"
    )
    program: str = var(
        "SAGEMAKER_PROGRAM", _program, "inference.py", "the handler script's file name in `code/` (both contracts)"
    )
    inference_contract: str = var(
        "SAGEMAKER_INFERENCE_CONTRACT",
        _choice(*handler_contract.CHOICES),
        "auto",
        "`tfs` or `toolkit`: the contract of a script that defines both TensorFlow Serving "
        "handlers and inference toolkit functions (`auto` refuses it)",
    )
    default_invocations_accept: str = var(
        "SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT",
        _toolkit_accept,
        media_types.JSON,
        f"{_TOOLKIT} `accept` when a request has none or `*/*`: JSON, CSV, NPY or JSON lines",
    )
    reload: bool = var(
        "SAGEMAKER_RELOAD",
        _bool,
        False,
        "development setting: restart the app's workers when `code/` changes (`serve --reload`; settings.md §3: "
        "Live reload)",
        render=_render_bool,
    )
    runtime_dir: str = var(
        "SAGEMAKER_RUNTIME_DIR",
        _text,
        lambda s: runtime_dir.default_path(s.bind_port),
        "the stack's config files, sockets, pid files and lock; created `0700`; refused when it "
        "is a link, another user's, or writable by others",
        shown_default="`$XDG_RUNTIME_DIR/sagemaker-tfs-<port>`, else "
        "`/tmp/sagemaker-tfs-<uid>-<port>` (`$TMPDIR` if set)",
    )
    metrics: bool = var(
        "SAGEMAKER_METRICS",
        _bool,
        False,
        "`true`: Prometheus pages of the app, `serve` and the model servers (README: Metrics, timings and logs)",
        render=_render_bool,
    )
    metrics_port: int = var(
        "SAGEMAKER_METRICS_PORT",
        _int_between(1, 65535),
        9101,
        "the Prometheus page's port, on 127.0.0.1 only (never through nginx's port)",
    )
    server_timing: bool = var(
        "SAGEMAKER_SERVER_TIMING",
        _bool,
        False,
        "`true`: the app's answers carry a `Server-Timing` header with the durations of their stages",
        render=_render_bool,
    )
    log_format: str = var(
        logs.FORMAT_VARIABLE,
        _choice(*logs.FORMATS),
        logs.TEXT,
        "`json`: `serve`, the app, gunicorn and the embedded model server log one JSON object per "
        "line, with the request id on a request's lines",
    )
    # The local twin of SageMaker Runtime's API (runtime_api/): off in production, where SageMaker itself answers it.
    local_runtime_api: bool = var(
        "SAGEMAKER_LOCAL_RUNTIME_API",
        _bool,
        False,
        "`true`: SageMaker Runtime's `InvokeEndpoint` and `InvokeEndpointAsync` on nginx's port, for boto3 and the "
        "SDK with `endpoint_url` (README: Testing your client locally)",
        render=_render_bool,
    )
    local_runtime_variant: str = var(
        "SAGEMAKER_LOCAL_RUNTIME_VARIANT", _text, "AllTraffic", "the runtime API's `InvokedProductionVariant`"
    )
    local_runtime_max_payload_mb: int = var(
        "SAGEMAKER_LOCAL_RUNTIME_MAX_PAYLOAD_MB",
        _int_between(1, MAX_TRANSFORM_MB),
        DEFAULT_MAX_PAYLOAD_IN_MB,
        "the runtime API's largest `InvokeEndpoint` body, in MiB (SageMaker's real-time limit); larger is a "
        "`ValidationError`",
    )
    local_runtime_timeout_seconds: int = var(
        "SAGEMAKER_LOCAL_RUNTIME_TIMEOUT_SECONDS",
        _int_between(1, 3600),
        60,
        "the runtime API's wait for the container's answer (SageMaker's 60 s); then a `ModelError`. A streamed "
        "answer (`InvokeEndpointWithResponseStream`) has it for its first part and again between two parts; "
        "then a `ModelStreamError` event",
    )
    local_runtime_stream_timeout_seconds: int = var(
        "SAGEMAKER_LOCAL_RUNTIME_STREAM_TIMEOUT_SECONDS",
        _int_between(1, 3600),
        480,
        "the longest `InvokeEndpointWithResponseStream` answer, from the call to its last part; then a "
        "`ModelStreamError` event (`ModelInvocationTimeExceeded`). AWS publishes no figure: set what your endpoint "
        "sees",
    )
    session_expiry_seconds: int = var(
        "SAGEMAKER_SESSION_EXPIRY_SECONDS",
        _int_between(1, 86400),
        1200,
        "how long a stateful session that a script opens with `context.open_session()` lasts unless it says (the "
        "20 minutes AWS's own containers give)",
    )
    local_async_input_path: str | None = var(
        "SAGEMAKER_LOCAL_ASYNC_INPUT_PATH",
        _text,
        None,
        "the folder a local `InputLocation` of `InvokeEndpointAsync` must be in (by its real path); unset, only "
        "`s3://` inputs and inline bodies are taken",
    )
    local_async_output_path: str | None = var(
        "SAGEMAKER_LOCAL_ASYNC_OUTPUT_PATH",
        _text,
        None,
        "`InvokeEndpointAsync`'s `S3OutputPath`: a folder or an `s3://` prefix; unset, the operation is a "
        "`ValidationError`",
    )
    local_async_failure_path: str | None = var(
        "SAGEMAKER_LOCAL_ASYNC_FAILURE_PATH",
        _text,
        None,
        "`InvokeEndpointAsync`'s `S3FailurePath`: where failures are written",
        shown_default="`SAGEMAKER_LOCAL_ASYNC_OUTPUT_PATH`",
    )
    local_async_max_queued: int = var(
        "SAGEMAKER_LOCAL_ASYNC_MAX_QUEUED",
        _int_between(1),
        100,
        "asynchronous requests waiting at once; one more is throttled",
    )
    local_async_max_concurrent: int = var(
        "SAGEMAKER_LOCAL_ASYNC_MAX_CONCURRENT",
        _int_between(1),
        lambda s: cpu_count(),
        "asynchronous requests sent to the container at once (`MaxConcurrentInvocationsPerInstance`)",
        shown_default="number of cores",
    )
    omp_num_threads: str = var(
        "OMP_NUM_THREADS", _text, "1", "as the original container", shown_default="set to `1` when unset"
    )

    # Set by serve for gunicorn's workers (the app refuses to start without them).
    model_server_rest_ports: tuple[int, ...] | None = var(
        "TFS_REST_PORTS",
        _port_list,
        None,
        "REST ports of the model server instances, comma-separated",
        render=_render_list,
        set_by_serve=True,
    )
    model_server_grpc_ports: tuple[int, ...] | None = var(
        "TFS_GRPC_PORTS",
        _port_list,
        None,
        "gRPC ports of the model server instances, in the same order",
        render=_render_list,
        set_by_serve=True,
    )
    default_model: str | None = var(
        "TFS_DEFAULT_MODEL_NAME",
        _text,
        None,
        "the model `serve` chose for requests that name none (unset without SavedModels, when the ports are `none`)",
        set_by_serve=True,
    )
    cuda_devices: tuple[str, ...] = var(
        "TFS_CUDA_DEVICES",
        _device_list,
        (),
        "the GPUs CUDA sees, as `CUDA_VISIBLE_DEVICES` names them (`none`: no GPU), found once by `serve`; worker "
        "slot *s* gets `gpu_id` *s mod n*",
        render=_render_devices,
        set_by_serve=True,
    )

    # Not a variable: the settings whose variable was unset, so that resolved() can apply the defaults that depend
    # on what serve found. Children get every value set, so theirs is empty.
    defaulted: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    def __post_init__(self) -> None:
        ports = self.ports()  # validates the port range against the instance count
        if self.metrics and self.metrics_port in {self.bind_port, *(port for pair in ports for port in pair)}:
            raise ConfigError(
                f"SAGEMAKER_METRICS_PORT={self.metrics_port} is taken by nginx or a model server: choose another port"
            )
        if self.multi_model and self.multi_model_universal_bucket and self.multi_model_universal_prefix:
            raise ConfigError(
                "SAGEMAKER_MULTI_MODEL_UNIVERSAL_BUCKET and SAGEMAKER_MULTI_MODEL_UNIVERSAL_PREFIX are "
                "not supported (scripts are not downloaded from S3): put the universal code in the "
                "folder SAGEMAKER_MULTI_MODEL_CODE_DIR names (default /opt/ml/code)"
            )
        rest, grpc = self.model_server_rest_ports, self.model_server_grpc_ports
        if rest is not None and grpc is not None and len(rest) != len(grpc):
            raise ConfigError(
                f"TFS_REST_PORTS={_render_list(rest)!r} and TFS_GRPC_PORTS={_render_list(grpc)!r} "
                "must list as many ports"
            )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        resolver = _Resolver(env)
        return cls(**resolver.values(), defaulted=resolver.defaulted())

    def to_env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment of a child of the stack: `base` (e.g. os.environ) without any declared variable, plus
        every setting, rendered so that `Settings.from_env()` in the child gives these settings back."""
        env = {name: value for name, value in (base or {}).items() if name not in _NAMES}
        env.update(self.env_of(**{name: getattr(self, name) for name in VARIABLES}))
        return env

    @staticmethod
    def env_of(**values: Any) -> dict[str, str]:
        """The variables for the given settings only (by field name), as a parent sets them for a `serve`."""
        env = {}
        for name, value in values.items():
            variable = VARIABLES[name]
            text = None if value is None else variable.render(value)
            if text is not None:
                env[variable.name] = text
        return env

    def resolved(
        self,
        model_dir: str,
        default_model: str | None,
        cuda_devices: tuple[str, ...] = (),
        script_loads_model: bool = False,
    ) -> Settings:
        """The settings `serve` hands to its children: the model folder and default model it found, the GPUs CUDA
        sees (shared/gpus.py) and the ports it gave the model servers (none without a default model, no SavedModel
        hence no model server, except on a multi-model endpoint, whose models come later). The worker and model
        server counts that were left unset take the defaults that depend on the GPUs and on whether an inference
        toolkit script's model_fn loads the model (default_worker_count, default_instance_count)."""
        counts: dict[str, Any] = {}  # (dataclasses.replace's keyword arguments)
        if "gunicorn_workers" in self.defaulted:
            counts["gunicorn_workers"] = default_worker_count(
                self.model_server_workers, len(cuda_devices), script_loads_model
            )[0]
        if "tfs_instance_count" in self.defaulted:
            counts["tfs_instance_count"] = default_instance_count(len(cuda_devices))
        found = dataclasses.replace(self, cuda_devices=cuda_devices, **counts)
        ports = found.ports() if default_model is not None or self.multi_model else []
        return dataclasses.replace(
            found,
            model_dir=model_dir,
            default_model=default_model,
            model_server_grpc_ports=tuple(grpc for grpc, _ in ports),
            model_server_rest_ports=tuple(rest for _, rest in ports),
        )

    def require_set_by_serve(self) -> None:
        """ConfigError unless the variables `serve` sets for its children are there."""
        no_model_server = self.model_server_rest_ports == ()  # then no default model either
        missing = [
            v.name
            for f, v in VARIABLES.items()
            if v.set_by_serve
            and getattr(self, f) is None
            and not (f == "default_model" and (no_model_server or self.multi_model))
        ]  # multi-model: none
        if missing:
            raise ConfigError(f"{', '.join(missing)} not set: the app is started by `serve`, which sets them")

    @property
    def app_startup_error_file(self) -> Path:
        """Where a gunicorn worker that cannot start the app writes why, for `serve` to report it in one line
        (gunicorn's own output buries it under its HaltServer tracebacks)."""
        return Path(self.runtime_dir) / "app-startup-error.txt"

    def ports(self) -> list[tuple[int, int]]:
        """(gRPC port, REST port) of each model server instance `serve` starts."""
        count = self.tfs_instance_count
        if self.safe_port_range is None:
            return [(9000 + i, 8501 + i) for i in range(count)]
        low, high = self.safe_port_range
        if low + 2 * count - 1 > high:
            raise ConfigError(
                f"not enough ports available in SAGEMAKER_SAFE_PORT_RANGE ({low}-{high}) "
                f"for SAGEMAKER_TFS_INSTANCE_COUNT={count}"
                + (" (unset: one per GPU)" if "tfs_instance_count" in self.defaulted else "")
                + ": each instance needs 2"
            )
        return [(low + 2 * i, low + 2 * i + 1) for i in range(count)]

    def execution_parameters(self) -> dict[str, Any]:
        """What GET /execution-parameters answers: only the values that are set (SageMaker takes the job's value,
        else the container's, else its defaults: 1, MULTI_RECORD, 6 MB). MaxConcurrentTransforms is lowered so
        that MaxConcurrentTransforms x MaxPayloadInMB (6 when not given) stays within SageMaker's 100 MB."""
        parameters: dict[str, Any] = {}
        if self.max_concurrent_transforms is not None:
            payload = DEFAULT_MAX_PAYLOAD_IN_MB if self.max_payload_in_mb is None else self.max_payload_in_mb
            limit = MAX_TRANSFORM_MB // payload if payload else self.max_concurrent_transforms
            parameters["MaxConcurrentTransforms"] = min(self.max_concurrent_transforms, limit)
        if self.batch_strategy is not None:
            parameters["BatchStrategy"] = self.batch_strategy
        if self.max_payload_in_mb is not None:
            parameters["MaxPayloadInMB"] = self.max_payload_in_mb
        return parameters


VARIABLES: dict[str, Variable] = {
    f.name: f.metadata["variable"] for f in dataclasses.fields(Settings) if "variable" in f.metadata
}
_NAMES = frozenset(v.name for v in VARIABLES.values())


class _Resolver:
    """Reads each variable once, on demand, so that a computed default can use any other setting."""

    def __init__(self, env: Mapping[str, str]):
        self._env = env
        self._values: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        if name not in VARIABLES:
            raise AttributeError(name)
        if name not in self._values:
            self._values[name] = VARIABLES[name].read(self._env, self)
        return self._values[name]

    def values(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in VARIABLES}

    def defaulted(self) -> frozenset[str]:
        return frozenset(name for name, variable in VARIABLES.items() if not variable.is_set(self._env))


def markdown_table() -> str:
    """The tables of the variables in docs/settings.md, generated from the declarations (scripts/settings_table.py)."""
    lines = ["| variable | default | effect |", "|---|---|---|"]
    lines += [f"| `{v.name}` | {v.default_text()} | {v.help} |" for v in VARIABLES.values() if not v.set_by_serve]
    lines += [
        "",
        "Set by `serve` for gunicorn's workers (the app does not start without them):",
        "",
        "| variable | value |",
        "|---|---|",
    ]
    lines += [f"| `{v.name}` | {v.help} |" for v in VARIABLES.values() if v.set_by_serve]
    return "\n".join(lines) + "\n"
