"""Every environment variable the container reads, parsed once into typed settings.

Names and defaults are those of the SageMaker TensorFlow Serving container, except where the README's
"Differences" section says otherwise (gunicorn workers/threads/class default from the core count).
An invalid value raises ConfigError naming the variable, so that `serve` fails at once with one message.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, TypeVar

T = TypeVar("T")


class ConfigError(ValueError):
    """A setting has a value the container cannot use; the message names the variable."""


def cpu_count() -> int:
    """Cores this process may run on (honours CPU affinity, as in a container with a CPU set)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def _read(env: Mapping[str, str], name: str, parse: Callable[[str], T], default: T) -> T:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return parse(raw.strip())
    except ValueError as exc:
        detail = f": {exc}" if str(exc) else ""
        raise ConfigError(f"{name}={raw!r} is not valid{detail}") from None


def _bool(raw: str) -> bool:
    lowered = raw.lower()
    if lowered not in ("true", "false"):
        raise ValueError("must be 'true' or 'false'")
    return lowered == "true"


def _int_at_least(minimum: int) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise ValueError("must be an integer") from None
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


def _model_name(raw: str) -> str | None:
    # The original container's default is the string "None": treat it as unset.
    return None if raw == "None" else raw


NGINX_LOG_LEVELS = ("debug", "info", "notice", "warn", "error", "crit", "alert", "emerg")
GUNICORN_LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
GUNICORN_WORKER_CLASSES = ("sync", "gthread", "gevent", "eventlet", "tornado")


@dataclass(frozen=True)
class Settings:
    """The container's configuration. Build it with `Settings.from_env()`."""

    model_dir: str = "/opt/ml/model"
    runtime_dir: str = ""

    @property
    def app_startup_error_file(self) -> Path:
        """Where a gunicorn worker that cannot start the app writes why, for `serve` to report it in one line
        (gunicorn's own output buries it under its HaltServer tracebacks)."""
        return Path(self.runtime_dir) / "app-startup-error.txt"
    bind_port: int = 8080
    safe_port_range: tuple[int, int] | None = None
    tfs_instance_count: int = 1
    tfs_default_model_name: str | None = None
    tfs_enable_batching: bool = False
    tfs_max_batch_size: int = 8
    tfs_batch_timeout_micros: int = 1000
    tfs_num_batch_threads: int = field(default_factory=cpu_count)
    tfs_max_enqueued_batches: int = field(default_factory=cpu_count)
    tfs_inter_op_parallelism: int = 0
    tfs_intra_op_parallelism: int = 0
    tfs_fractional_gpu_mem_margin: float = 0.2
    tfs_wait_time_seconds: int = 300
    batch: bool = False
    gunicorn_workers: int = 1
    gunicorn_threads: int = 1
    gunicorn_worker_class: str = "sync"
    gunicorn_timeout_seconds: int = 30
    gunicorn_loglevel: str = "info"
    nginx_loglevel: str = "error"
    nginx_proxy_read_timeout_seconds: int = 60
    nginx_client_max_body_size: str = "0"
    multi_model: bool = False
    multi_model_code_dir: str = "/opt/ml/code"
    multi_model_max_models: int = 0
    multi_model_memory_limit_percent: int = 90

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Settings":
        env = os.environ if env is None else env
        cores = cpu_count()
        batch = "SAGEMAKER_BATCH" in env
        bind_port = _read(env, "SAGEMAKER_BIND_TO_PORT", _int_at_least(1), 8080)
        threads = _read(env, "SAGEMAKER_GUNICORN_THREADS", _int_at_least(1), 1)
        gunicorn_timeout = _read(env, "SAGEMAKER_GUNICORN_TIMEOUT_SECONDS", _int_at_least(1), 30)
        multi_model = _read(env, "SAGEMAKER_MULTI_MODEL", _bool, False)
        if multi_model and env.get("SAGEMAKER_MULTI_MODEL_UNIVERSAL_BUCKET") and \
                env.get("SAGEMAKER_MULTI_MODEL_UNIVERSAL_PREFIX"):
            raise ConfigError("SAGEMAKER_MULTI_MODEL_UNIVERSAL_BUCKET and SAGEMAKER_MULTI_MODEL_UNIVERSAL_PREFIX are "
                              "not supported (scripts are not downloaded from S3): put the universal code in the "
                              "folder SAGEMAKER_MULTI_MODEL_CODE_DIR names (default /opt/ml/code)")
        settings = cls(
            model_dir=env.get("SAGEMAKER_MODEL_DIR") or ("/opt/ml/models" if multi_model else "/opt/ml/model"),
            runtime_dir=env.get("SAGEMAKER_RUNTIME_DIR") or f"/tmp/sagemaker-tfs-{bind_port}",
            bind_port=bind_port,
            safe_port_range=_read(env, "SAGEMAKER_SAFE_PORT_RANGE", _port_range, None),
            tfs_instance_count=_read(env, "SAGEMAKER_TFS_INSTANCE_COUNT", _int_at_least(1), 1),
            tfs_default_model_name=_read(env, "SAGEMAKER_TFS_DEFAULT_MODEL_NAME", _model_name, None),
            tfs_enable_batching=_read(env, "SAGEMAKER_TFS_ENABLE_BATCHING", _bool, False),
            tfs_max_batch_size=_read(env, "SAGEMAKER_TFS_MAX_BATCH_SIZE", _int_at_least(1), 8),
            tfs_batch_timeout_micros=_read(env, "SAGEMAKER_TFS_BATCH_TIMEOUT_MICROS", _int_at_least(0), 1000),
            tfs_num_batch_threads=_read(env, "SAGEMAKER_TFS_NUM_BATCH_THREADS", _int_at_least(1), cores),
            tfs_max_enqueued_batches=_read(
                env, "SAGEMAKER_TFS_MAX_ENQUEUED_BATCHES", _int_at_least(1), 100000000 if batch else cores
            ),
            tfs_inter_op_parallelism=_read(env, "SAGEMAKER_TFS_INTER_OP_PARALLELISM", _int_at_least(0), 0),
            tfs_intra_op_parallelism=_read(env, "SAGEMAKER_TFS_INTRA_OP_PARALLELISM", _int_at_least(0), 0),
            tfs_fractional_gpu_mem_margin=_read(env, "SAGEMAKER_TFS_FRACTIONAL_GPU_MEM_MARGIN", _fraction, 0.2),
            tfs_wait_time_seconds=_read(env, "SAGEMAKER_TFS_WAIT_TIME_SECONDS", _int_at_least(1), 300),
            batch=batch,
            # One worker per core, so that CPU-bound handlers do not run one at a time (the original: 1).
            gunicorn_workers=_read(env, "SAGEMAKER_GUNICORN_WORKERS", _int_at_least(1), cores),
            gunicorn_threads=threads,
            # gevent is not required: threads when asked for, else one request per process (the original: gevent).
            gunicorn_worker_class=_read(
                env,
                "SAGEMAKER_GUNICORN_WORKER_CLASS",
                _choice(*GUNICORN_WORKER_CLASSES),
                "gthread" if threads > 1 else "sync",
            ),
            gunicorn_timeout_seconds=gunicorn_timeout,
            gunicorn_loglevel=_read(env, "SAGEMAKER_GUNICORN_LOGLEVEL", _choice(*GUNICORN_LOG_LEVELS), "info"),
            nginx_loglevel=_read(env, "SAGEMAKER_TFS_NGINX_LOGLEVEL", _choice(*NGINX_LOG_LEVELS), "error"),
            # Never below the gunicorn timeout, or nginx would give up on requests gunicorn still runs.
            nginx_proxy_read_timeout_seconds=max(
                gunicorn_timeout,
                _read(env, "SAGEMAKER_NGINX_PROXY_READ_TIMEOUT_SECONDS", _int_at_least(1), 60),
            ),
            nginx_client_max_body_size=_read(env, "SAGEMAKER_NGINX_CLIENT_MAX_BODY_SIZE", _body_size, "0"),
            multi_model=multi_model,
            multi_model_code_dir=env.get("SAGEMAKER_MULTI_MODEL_CODE_DIR") or "/opt/ml/code",
            multi_model_max_models=_read(env, "SAGEMAKER_MULTI_MODEL_MAX_MODELS", _int_at_least(0), 0),
            multi_model_memory_limit_percent=_read(env, "SAGEMAKER_MULTI_MODEL_MEMORY_LIMIT_PERCENT",
                                                   _percent, 90),
        )
        settings.ports()  # validates the port range against the instance count
        return settings

    def ports(self) -> list[tuple[int, int]]:
        """(gRPC port, REST port) of each model server instance."""
        count = self.tfs_instance_count
        if self.safe_port_range is None:
            return [(9000 + i, 8501 + i) for i in range(count)]
        low, high = self.safe_port_range
        if low + 2 * count - 1 > high:
            raise ConfigError(
                f"not enough ports available in SAGEMAKER_SAFE_PORT_RANGE ({low}-{high}) "
                f"for SAGEMAKER_TFS_INSTANCE_COUNT={count}: each instance needs 2"
            )
        return [(low + 2 * i, low + 2 * i + 1) for i in range(count)]


def _percent(raw: str) -> int:
    value = _int_at_least(1)(raw)
    if value > 100:
        raise ValueError("must be between 1 and 100")
    return value


def _body_size(raw: str) -> str:
    """An nginx size: digits with an optional k/m/g suffix; 0 means unlimited."""
    digits = raw[:-1] if raw[-1:].lower() in ("k", "m", "g") else raw
    if not digits.isdigit():
        raise ValueError("must be an nginx size such as 0 (unlimited), 100m or 512k")
    return raw
