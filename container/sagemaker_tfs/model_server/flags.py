"""The command line of `tensorflow_model_server`, parsed the way TensorFlow's flag parser does.

Every flag is `--name=value` (one dash also works); a boolean flag may be given bare (`--enable_batching`)
or as `--name=true|false|1|0`. Anything else is an error naming the argument. Every flag of the real
`tensorflow_model_server` is accepted, with TFS's defaults; those that only make sense for the real binary are
marked `ignored` (`--help` says so, and a non-default value is logged at startup).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ..shared.cpus import cpu_count


class FlagError(ValueError):
    """The command line cannot be used; the message says which argument and why."""


def _flag(default: object, help: str, ignored: bool = False) -> Any:
    return field(default=default, metadata={"help": help, "ignored": ignored})


@dataclass(frozen=True)
class Flags:
    port: int = _flag(8500, "gRPC port (0: no gRPC server)")
    # Not a TFS flag (TFS always listens on every interface): `serve` passes 127.0.0.1, so that nothing but
    # nginx's proxy reaches the model server from outside the machine.
    listen_address: str = _flag("0.0.0.0", "address the gRPC and REST ports listen on (this server's own flag)")
    grpc_socket_path: str = _flag("", "also serve gRPC on this UNIX socket")
    grpc_max_threads: int = _flag(0, "gRPC worker threads (0: 4 x cores)")
    grpc_channel_arguments: str = _flag("", "gRPC server options: key=value,key=value (integers passed as such)")
    rest_api_port: int = _flag(0, "HTTP/REST port (0: no REST server); must differ from --port")
    rest_api_num_threads: int = _flag(0, "threads running REST requests' TensorFlow calls (0: 4 x cores)")
    rest_api_timeout_in_ms: int = _flag(30000, "deadline of a REST request's TensorFlow run (0: none)")
    # Not TFS flags (its REST server has no such limits): what one REST connection may cost.
    rest_api_max_body_bytes: int = _flag(
        256 * 1024 * 1024,
        "largest REST request body, and gzip body once decompressed; larger: 413 (0: none; this server's own)",
    )
    rest_api_request_timeout_seconds: int = _flag(
        60,
        "a REST request must arrive whole within this many seconds of "
        "its first byte, else 408 (0: none; this server's own)",
    )
    rest_api_idle_timeout_seconds: int = _flag(
        300,
        "a REST connection with no request in progress is closed after this many seconds (0: never; this server's own)",
    )
    rest_api_enable_cors_support: bool = _flag(False, "add CORS headers to REST replies")
    model_config_file: str = _flag("", "text-format ModelServerConfig; overrides --model_name/--model_base_path")
    model_config_file_poll_wait_seconds: int = _flag(
        0, "seconds between re-reads of --model_config_file, applying its changes (0: read once)"
    )
    model_name: str = _flag("default", "name of the one model served without --model_config_file")
    model_base_path: str = _flag("", "folder of the one model's numbered version folders")
    enable_batching: bool = _flag(False, "merge concurrent requests into batches")
    batching_parameters_file: str = _flag("", "text-format BatchingParameters (needs --enable_batching)")
    enable_per_model_batching_parameters: bool = _flag(False, "per-model batching_params.pbtxt", ignored=True)
    tensorflow_session_parallelism: int = _flag(0, "threads of each TensorFlow session (0: auto)")
    tensorflow_intra_op_parallelism: int = _flag(0, "TensorFlow intra-op threads (0: auto)")
    tensorflow_inter_op_parallelism: int = _flag(0, "TensorFlow inter-op threads (0: auto)")
    per_process_gpu_memory_fraction: float = _flag(0.0, "fraction of GPU memory for this process (0: default)")
    file_system_poll_wait_seconds: int = _flag(1, "seconds between scans for new/removed versions (0: once)")
    max_num_load_retries: int = _flag(5, "retries of a failed model load")
    load_retry_interval_micros: int = _flag(60_000_000, "wait between load retries")
    num_load_threads: int = _flag(0, "threads loading models", ignored=True)
    num_unload_threads: int = _flag(0, "threads unloading models", ignored=True)
    saved_model_tags: str = _flag("serve", "comma-separated MetaGraph tags to load")
    enable_model_warmup: bool = _flag(
        True, "run a version's assets.extra/tf_serving_warmup_requests before it serves (a failing one fails its load)"
    )
    monitoring_config_file: str = _flag("", "text-format MonitoringConfig: the Prometheus page on the REST port")
    platform_config_file: str = _flag("", "platform configuration", ignored=True)
    ssl_config_file: str = _flag("", "TLS for gRPC", ignored=True)
    allow_version_labels_for_unavailable_models: bool = _flag(False, "labels may name unloaded versions")
    enable_signature_method_name_check: bool = _flag(False, "check classify/regress method_name", ignored=True)
    enable_profiler: bool = _flag(True, "TensorFlow profiler service", ignored=True)
    xla_cpu_compilation_enabled: bool = _flag(False, "XLA on CPU", ignored=True)
    enable_grpc_healthcheck_service: bool = _flag(False, "gRPC health service", ignored=True)
    version: bool = _flag(False, "print the version and exit")
    flush_filesystem_caches: bool = _flag(True, "flush file-system caches after loading", ignored=True)
    tensorflow_session_config_file: str = _flag("", "text-format SessionConfig", ignored=True)
    use_alts_credentials: bool = _flag(False, "ALTS credentials for gRPC", ignored=True)
    num_request_iterations_for_warmup: int = _flag(0, "runs of each warm-up record (0: once)")
    remove_unused_fields_from_bundle_metagraph: bool = _flag(True, "drop unused MetaGraph fields", ignored=True)
    prefer_tflite_model: bool = _flag(
        False, "serve a version folder's model.tflite with TensorFlow Lite (LiteRT) instead of its SavedModel"
    )
    num_tflite_pools: int = _flag(0, "TFLite interpreters of a model (0: one per core, TFS's default)")
    num_tflite_interpreters_per_pool: int = _flag(
        1, "multiplies --num_tflite_pools (TFS splits batches across them instead)"
    )
    xla_gpu_compilation_enabled: bool = _flag(False, "XLA on GPU", ignored=True)
    thread_pool_factory_config_file: str = _flag("", "thread pool factory config", ignored=True)
    mixed_precision: str = _flag("", "mixed precision mode", ignored=True)
    skip_initialize_tpu: bool = _flag(False, "skip TPU initialization", ignored=True)
    enable_serialization_as_tensor_content: bool = _flag(False, "gRPC outputs in tensor_content", ignored=True)

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    def ignored_given(self) -> list[str]:
        """Flags set to a non-default value that this server accepts but does not act on."""
        return [
            f.name for f in dataclasses.fields(self) if f.metadata["ignored"] and getattr(self, f.name) != f.default
        ]


def usage(prog: str = "tfs-model-server") -> str:
    lines = [
        f"usage: {prog} --port=8500 --rest_api_port=8501 "
        "(--model_config_file=FILE | --model_name=NAME --model_base_path=DIR) [flags]",
        "Flags:",
    ]
    for f in dataclasses.fields(Flags):
        kind = {bool: "bool", int: "int64", float: "float", str: "string"}[type(f.default)]
        note = " (accepted, no effect)" if f.metadata["ignored"] else ""
        lines.append(f"  --{f.name}={f.default!r:<10} {kind:<6} {f.metadata['help']}{note}")
    return "\n".join(lines) + "\n"


def _parse_bool(name: str, raw: str) -> bool:
    lowered = raw.lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0"):
        return False
    raise FlagError(f"invalid value for boolean flag --{name}: {raw!r} (use true or false)")


def parse(argv: list[str]) -> Flags:
    """The Flags of a command line (without the program name); raises FlagError."""
    types: dict[str, type] = {f.name: type(f.default) for f in dataclasses.fields(Flags)}
    values: dict[str, object] = {}
    for arg in argv:
        if not arg.startswith("-") or arg in ("-", "--"):
            raise FlagError(f"unexpected argument: {arg!r} (flags are --name=value)")
        name, has_value, raw = arg.lstrip("-").partition("=")
        kind = types.get(name)
        if kind is None:
            raise FlagError(f"unknown flag: {arg.partition('=')[0]}")
        if kind is bool:
            values[name] = _parse_bool(name, raw) if has_value else True
            continue
        if not has_value:
            raise FlagError(f"flag --{name} needs a value: --{name}=VALUE")
        try:
            values[name] = kind(raw)
        except ValueError:
            raise FlagError(f"invalid value for --{name}: {raw!r} (expected {kind.__name__})") from None
    flags = Flags(**values)  # type: ignore[arg-type]  # each value was parsed by its field's type
    if not flags.version:  # --version prints and exits before the rest is checked, as in TFS
        _validate(flags)
    return flags


def _validate(flags: Flags) -> None:
    if not flags.model_config_file and not flags.model_base_path:
        raise FlagError("either --model_config_file or --model_base_path must be given")
    if flags.batching_parameters_file and not flags.enable_batching:
        raise FlagError("--batching_parameters_file given but --enable_batching is false")
    if flags.rest_api_port and flags.rest_api_port == flags.port:
        raise FlagError(f"--rest_api_port cannot be the same as --port ({flags.port})")
    if flags.port == 0 and flags.rest_api_port == 0 and not flags.grpc_socket_path:
        raise FlagError("no port to serve on: --port and --rest_api_port are both 0")
    for name in ("port", "rest_api_port"):
        if not 0 <= getattr(flags, name) <= 65535:
            raise FlagError(f"--{name} must be a port number between 0 and 65535")
    if flags.tensorflow_session_parallelism > 0 and (
        flags.tensorflow_intra_op_parallelism > 0 or flags.tensorflow_inter_op_parallelism > 0
    ):
        raise FlagError(
            "configure either --tensorflow_session_parallelism or "
            "--tensorflow_intra_op_parallelism/--tensorflow_inter_op_parallelism, not both"
        )
    if not 0.0 <= flags.per_process_gpu_memory_fraction <= 1.0:
        raise FlagError("--per_process_gpu_memory_fraction must be between 0 and 1")
    for name in (
        "max_num_load_retries",
        "file_system_poll_wait_seconds",
        "model_config_file_poll_wait_seconds",
        "rest_api_timeout_in_ms",
        "rest_api_max_body_bytes",
        "rest_api_request_timeout_seconds",
        "rest_api_idle_timeout_seconds",
        "rest_api_num_threads",
        "grpc_max_threads",
        "load_retry_interval_micros",
    ):
        if getattr(flags, name) < 0:
            raise FlagError(f"--{name} must not be negative")


def default_threads() -> int:
    """TFS's default for thread-count flags left at 0: four per core."""
    return 4 * cpu_count()
