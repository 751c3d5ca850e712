"""The command lines `serve` starts: the model server instances (and their batching file, their GPUs) and gunicorn
(nginx's is in nginx.py), and the start-up line that says which GPU each worker and instance uses."""

from __future__ import annotations

import math
import shutil
import sys
from pathlib import Path

from ..config import Settings, default_worker_count
from ..errors import StartupError
from ..shared import gpus, runtime_dir
from . import extras


def model_server_base_command() -> list[str]:
    """TensorFlow Serving when on PATH, else the embedded model server; neither (the serving image's Python
    environment run elsewhere) is a StartupError."""
    real = shutil.which("tensorflow_model_server")
    if real:  # TFS always listens on every interface: inside a container that is the container's own network
        return [real]
    missing = extras.missing("model-server")
    if missing:
        raise StartupError(
            f"no model server: tensorflow_model_server is not on PATH and the embedded model server "
            f"is not installed (missing {', '.join(missing)}); install TensorFlow Serving, or the "
            "model-server extra (pip install '.[model-server]', as scripts/install.sh does)"
        )
    # Outside a container the embedded server must not be reachable past nginx: loopback only. Its one client, the
    # app, keeps its connections open between requests (a pool, as with TFS): no idle timeout, so that a kept
    # connection is never closed under a request being sent.
    return [
        sys.executable,
        "-m",
        "sagemaker_tfs.model_server",
        "--listen_address=127.0.0.1",
        "--rest_api_idle_timeout_seconds=0",
    ]


def instance_device(settings: Settings, instance: int) -> str | None:
    """The CUDA_VISIBLE_DEVICES that pins model server `instance` to one GPU: with several instances and several
    GPUs, the (i mod n)-th device CUDA sees (as serve's own CUDA_VISIBLE_DEVICES names it); None otherwise (the
    instance sees what serve sees)."""
    devices = settings.cuda_devices
    return devices[instance % len(devices)] if len(devices) > 1 and settings.tfs_instance_count > 1 else None


def memory_fraction(settings: Settings) -> float | None:
    """Each instance's --per_process_gpu_memory_fraction with several instances on GPUs: (1 - margin) / the
    instances on each GPU; None otherwise (TensorFlow's default: the GPU's memory as needed)."""
    gpu_count, count = len(settings.cuda_devices), settings.tfs_instance_count
    if not gpu_count or count <= 1:
        return None
    sharing = math.ceil(count / gpu_count)  # instances on each GPU
    return round((1 - settings.tfs_fractional_gpu_mem_margin) / sharing, 4)


def model_server_commands(
    settings: Settings, config_file: Path, batching_file: Path | None, monitoring_file: Path | None = None
) -> list[tuple[list[str], dict[str, str]]]:
    """The command line and extra environment of each model server instance."""
    base = model_server_base_command()
    commands = []
    fraction = memory_fraction(settings)
    for i, (grpc_port, rest_port) in enumerate(settings.ports()):
        args = base + [
            f"--port={grpc_port}",
            f"--rest_api_port={rest_port}",
            f"--model_config_file={config_file}",
            "--max_num_load_retries=0",
            "--file_system_poll_wait_seconds=0",
            f"--rest_api_timeout_in_ms={settings.gunicorn_timeout_seconds * 1000}",
        ]
        if batching_file is not None:
            args += ["--enable_batching=true", f"--batching_parameters_file={batching_file}"]
        if monitoring_file is not None:
            args.append(f"--monitoring_config_file={monitoring_file}")
        if settings.tfs_intra_op_parallelism:
            args.append(f"--tensorflow_intra_op_parallelism={settings.tfs_intra_op_parallelism}")
        if settings.tfs_inter_op_parallelism:
            args.append(f"--tensorflow_inter_op_parallelism={settings.tfs_inter_op_parallelism}")
        if fraction is not None:
            args.append(f"--per_process_gpu_memory_fraction={fraction}")
        device = instance_device(settings, i)
        commands.append((args, {} if device is None else {"CUDA_VISIBLE_DEVICES": device}))
    return commands


def gpu_line(settings: Settings, how: str, script_loads_model: bool, model_servers: bool) -> str:
    """serve's one start-up line about the GPUs (settings resolved): how many CUDA sees and how that was found;
    the gunicorn workers, why that many, and the toolkit `gpu_id` of each worker slot; the model servers, why
    that many, and the GPU each is pinned to."""
    devices = settings.cuda_devices
    workers = settings.gunicorn_workers
    if "gunicorn_workers" not in settings.defaulted:
        why = "SAGEMAKER_GUNICORN_WORKERS"
    else:
        why = default_worker_count(settings.model_server_workers, len(devices), script_loads_model)[1]
    ids = ", ".join(f"{slot}->{gpus.gpu_id(len(devices), slot)}" for slot in range(workers)) if devices else "None"
    line = (
        f"GPUs: {len(devices)} seen by CUDA ({how}); gunicorn workers: {workers} ({why}), toolkit gpu_id by "
        f"worker slot: {ids}; model servers: "
    )
    if not model_servers:
        return line + "none"
    count = settings.tfs_instance_count
    if "tfs_instance_count" not in settings.defaulted:
        why = "SAGEMAKER_TFS_INSTANCE_COUNT"
    else:
        why = "one per GPU" if len(devices) > 1 else "the default"
    if instance_device(settings, 0) is not None:
        where = "CUDA_VISIBLE_DEVICES by instance: " + ", ".join(
            f"{i}->{instance_device(settings, i)}" for i in range(count)
        )
    else:
        where = {0: "on CPU", 1: "on the GPU CUDA sees"}.get(len(devices), "on the GPUs CUDA sees")
    fraction = memory_fraction(settings)
    return (
        line
        + f"{count} ({why}), {where}"
        + (f", --per_process_gpu_memory_fraction={fraction}" if fraction is not None else "")
    )


def batching_parameters_text(settings: Settings) -> str:
    """The model server's --batching_parameters_file, from SAGEMAKER_TFS_* (text-format BatchingParameters)."""
    fields = {
        "max_batch_size": settings.tfs_max_batch_size,
        "batch_timeout_micros": settings.tfs_batch_timeout_micros,
        "num_batch_threads": settings.tfs_num_batch_threads,
        "max_enqueued_batches": settings.tfs_max_enqueued_batches,
    }
    return "".join(f"{name} {{ value: {value} }}\n" for name, value in fields.items())


WORKER_CLASSES = {
    "loop": "sagemaker_tfs.wsgi_server.loop.LoopWorker",
    # gunicorn's, with JSON bodies for the requests gunicorn refuses itself (wsgi_server/gunicorn_workers.py)
    "sync": "sagemaker_tfs.wsgi_server.gunicorn_workers.SyncWorker",
    "gthread": "sagemaker_tfs.wsgi_server.gunicorn_workers.ThreadWorker",
    "gevent": "sagemaker_tfs.wsgi_server.gevent_worker.GeventWorker",
}  # by their setting names; the others are gunicorn's own


APP_FACTORY = "sagemaker_tfs.app.routes:create_app()"  # one for single- and multi-model endpoints


def gunicorn_command(settings: Settings) -> list[str]:
    return [
        sys.executable,
        "-m",
        "gunicorn",
        APP_FACTORY,
        # our settings file (never a gunicorn.conf.py of the working folder): workers say when they are ready,
        # no control socket in $HOME
        "--config",
        "python:sagemaker_tfs.wsgi_server.gunicorn_settings",
        "--bind",
        f"unix:{Path(settings.runtime_dir) / runtime_dir.GUNICORN_SOCKET}",
        "--workers",
        str(settings.gunicorn_workers),
        "--threads",
        str(settings.gunicorn_threads),
        "--worker-class",
        WORKER_CLASSES.get(settings.gunicorn_worker_class, settings.gunicorn_worker_class),
        "--timeout",
        str(settings.gunicorn_timeout_seconds),
        "--graceful-timeout",
        str(settings.gunicorn_timeout_seconds),
        "--keep-alive",
        "75",
        "--log-level",
        settings.gunicorn_loglevel,
        "--error-logfile",
        "-",
        "--pid",
        f"{settings.runtime_dir}/gunicorn.pid",
    ]
