"""`transform()`: run a SageMaker Batch Transform job on this machine, and describe it as SageMaker would.

Steps: validate the job (ValidationError, before anything runs); list the input objects; start InstanceCount
stacks of our container from the model (or use the given endpoint URLs); ask GET /execution-parameters; run the
pipeline; stop the stacks; return a description close to DescribeTransformJob with a "LocalRun" section (summary
and per-object results). The job fails, as on SageMaker, when any object fails; FailureReason is SageMaker's
"ClientError: See job logs for more information" or "AlgorithmError: ..." (the kind of the first failure), or the
reason the job could not start (no input, model missing, container not answering /ping).

Settings left unset by the job come from the container's /execution-parameters answer, then SageMaker's defaults
(MaxConcurrentTransforms 1, MaxPayloadInMB 6, BatchStrategy MultiRecord); `MULTI_RECORD` and `MultiRecord`
spellings are both understood; an unusable answer is ignored with a warning. MaxConcurrentTransforms=0 means unset.
"""

from __future__ import annotations

import datetime
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import DEFAULT_MAX_PAYLOAD_IN_MB, MAX_TRANSFORM_MB
from ..shared.storage import SourceError, Storage
from .client import InvocationSettings
from .containers import (
    Container,
    ContainerError,
    container_environment,
    execution_parameters,
    is_endpoint,
    prepare_model,
    start_containers,
    stop_containers,
)
from .dataprocessing import DataProcessing
from .job import STRATEGY_ENV_NAMES, TransformJob
from .outcomes import FailureKind, Status
from .pipeline import ObjectResult, Pipeline, Plan, Stats, log

DEFAULT_CONCURRENCY = 1
DEFAULT_PAYLOAD_MB = DEFAULT_MAX_PAYLOAD_IN_MB
DEFAULT_STRATEGY = "MultiRecord"
DESCRIPTION_ORDER = (
    "TransformJobName",
    "TransformJobStatus",
    "FailureReason",
    "ModelName",
    "MaxConcurrentTransforms",
    "ModelClientConfig",
    "MaxPayloadInMB",
    "BatchStrategy",
    "Environment",
    "TransformInput",
    "TransformOutput",
    "DataCaptureConfig",
    "TransformResources",
    "CreationTime",
    "TransformStartTime",
    "TransformEndTime",
    "DataProcessing",
    "ExperimentConfig",
    "Tags",
    "BatchDataCaptureConfig",
    "LocalRun",
)
STRATEGY_SPELLINGS = {
    spelling: strategy for strategy, env_name in STRATEGY_ENV_NAMES.items() for spelling in (env_name, strategy)
}  # MULTI_RECORD or MultiRecord -> MultiRecord


class TransformJobStopped(KeyboardInterrupt):
    """The job was interrupted (Ctrl-C, SIGTERM); `description` says what was done (status Stopped)."""

    def __init__(self, description: dict[str, Any]):
        super().__init__("transform job stopped")
        self.description = description


@dataclass(frozen=True)
class LocalOptions:
    """How the job runs here; none of these is part of a SageMaker request."""

    s3_endpoint_url: str | None = None  # e.g. a local S3-compatible server (else AWS_ENDPOINT_URL or AWS)
    work_dir: str | None = None  # container logs and runtime files; default: a temporary folder, kept on failure
    startup_timeout: float = 600.0  # seconds for the containers to answer /ping
    inclusive_slice_end: bool = False  # JSONPath `[1:4]` ends at index 4 included (see jsonpath.py)
    on_progress: Callable[[Stats], None] | None = None


def model_name_for(model: str) -> str:
    """A default ModelName: the model folder's or archive's name."""
    if is_endpoint(model):
        return "endpoint"
    name = Path(model.rstrip("/")).name
    for suffix in (".tar.gz", ".tgz", ".tar"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name or "model"


def transform(
    model: str,
    request: Mapping[str, Any] | None = None,
    *,
    s3_endpoint_url: str | None = None,
    work_dir: str | None = None,
    startup_timeout: float = 600.0,
    inclusive_slice_end: bool = False,
    on_progress: Callable[[Stats], None] | None = None,
    **params: Any,
) -> dict[str, Any]:
    """Run a transform job; returns its description (TransformJobStatus: Completed or Failed).

    `model`: a model folder, a model.tar.gz (local or s3://), or running endpoint URL(s), comma-separated.
    `request`: a CreateTransformJob request (dict); `params`: job parameters under their API names (SplitType,
    TransformInput={...}) or the SageMaker Python SDK's names (split_type, data, output_path...), which win.
    Raises ValidationError for an invalid job, TransformJobStopped when interrupted.
    """
    job = TransformJob.create(request, default_model_name=model_name_for(model), **params)
    options = LocalOptions(s3_endpoint_url, work_dir, startup_timeout, inclusive_slice_end, on_progress)
    return run(job, model, options)


def resolve(job: TransformJob, answer: Mapping[str, Any] | None) -> tuple[int, int, str]:
    """(MaxConcurrentTransforms, MaxPayloadInMB, BatchStrategy): the job's value, else the container's, else
    SageMaker's default."""
    answer = answer or {}

    def container_value(name: str, check: Callable[[Any], bool]) -> Any:
        value = answer.get(name)
        if value is None:
            return None
        if check(value):
            return value
        log.warning("ignoring %s=%r from /execution-parameters: not a valid value", name, value)
        return None

    concurrency = job.max_concurrent_transforms or container_value(
        "MaxConcurrentTransforms", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1
    )
    payload = (
        job.max_payload
        if job.max_payload is not None
        else container_value(
            "MaxPayloadInMB", lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_TRANSFORM_MB
        )
    )
    strategy = job.strategy or STRATEGY_SPELLINGS.get(
        container_value("BatchStrategy", lambda v: v in STRATEGY_SPELLINGS) or ""
    )
    return (
        concurrency or DEFAULT_CONCURRENCY,
        DEFAULT_PAYLOAD_MB if payload is None else payload,
        strategy or DEFAULT_STRATEGY,
    )


def run(job: TransformJob, model: str, options: LocalOptions = LocalOptions()) -> dict[str, Any]:
    """Run a validated job against `model` (see transform())."""
    created = _now()
    description = {**job.to_request(), "TransformJobStatus": Status.IN_PROGRESS.value, "CreationTime": created}
    local: dict[str, Any] = {"Model": model}
    description["LocalRun"] = local
    temporary_work_dir = options.work_dir is None
    work_dir: Path | None = None  # only jobs that start containers have one
    storage = Storage(options.s3_endpoint_url)
    containers: list[Container] = []
    pipeline: Pipeline | None = None
    started = time.monotonic()
    try:
        objects = storage.list_inputs(job.data, job.data_type)
        outputs = [storage.output_location(job.output_path, obj.name) for obj in objects]
        if is_endpoint(model):
            urls = [url.strip() for url in model.split(",") if url.strip()]
            endpoints = [urls[i % len(urls)] for i in range(job.instance_count)]
        else:
            work_dir = Path(options.work_dir or tempfile.mkdtemp(prefix=f"transform-{job.job_name[:40]}-"))
            work_dir.mkdir(parents=True, exist_ok=True)
            model_dir = prepare_model(model, work_dir, storage.read)
            env = container_environment(job.env, job.strategy, job.max_payload, job.max_concurrent_transforms)
            log.info("starting %d container%s for %s", job.instance_count, "s" * (job.instance_count > 1), model)
            containers = start_containers(model_dir, job.instance_count, env, work_dir, options.startup_timeout)
            endpoints = [container.url for container in containers]
            local["ContainerLogs"] = [str(container.log_path) for container in containers]
        local["Endpoints"] = endpoints
        answer = execution_parameters(endpoints[0])
        local["ExecutionParameters"] = answer
        concurrency, payload_mb, strategy = resolve(job, answer)
        description.update(MaxConcurrentTransforms=concurrency, MaxPayloadInMB=payload_mb, BatchStrategy=strategy)
        description["ModelClientConfig"] = {
            "InvocationsTimeoutInSeconds": job.invocations_timeout,
            "InvocationsMaxRetries": job.max_retries,
        }
        log.info(
            "[sagemaker logs]: MaxConcurrentTransforms=%d, MaxPayloadInMB=%d, BatchStrategy=%s",
            concurrency,
            payload_mb,
            STRATEGY_ENV_NAMES[strategy],
        )
        plan = Plan(
            split_type=job.split_type or "None",
            multi_record=strategy == "MultiRecord" and (job.split_type or "None") != "None",
            payload_limit=payload_mb * 1024 * 1024,
            concurrency=concurrency,
            compression=job.compression_type,
            assemble_with=job.assemble_with,
            dataprocessing=DataProcessing.build(
                job.input_filter,
                job.output_filter,
                job.join_source,
                job.content_type,
                job.accept,
                options.inclusive_slice_end,
            ),
            invocation=InvocationSettings(
                job.content_type, job.accept, float(job.invocations_timeout), job.max_retries, chunked=payload_mb == 0
            ),
        )
        description["TransformStartTime"] = _now()
        started = time.monotonic()
        pipeline = Pipeline(objects, outputs, endpoints, plan, storage, options.on_progress)
        failed = [result for result in pipeline.run() if result.status is not Status.COMPLETED]
        if failed:
            description["TransformJobStatus"] = Status.FAILED.value
            first_kind = failed[0].failure_kind
            assert first_kind is not None  # (an object fails only through Pipeline._fail, which sets it)
            description["FailureReason"] = f"{first_kind.value}: See job logs for more information"
        else:
            description["TransformJobStatus"] = Status.COMPLETED.value
    except (SourceError, ContainerError) as exc:
        kind = exc.kind if isinstance(exc, ContainerError) else FailureKind.CLIENT
        log.error("%s", exc)
        description["TransformJobStatus"] = Status.FAILED.value
        description["FailureReason"] = f"{kind.value}: {exc}"
    except KeyboardInterrupt:
        description["TransformJobStatus"] = Status.STOPPED.value
        raise TransformJobStopped(
            _finish(description, pipeline, started, containers, work_dir, temporary_work_dir)
        ) from None
    except BaseException:
        stop_containers(containers)
        raise
    return _finish(description, pipeline, started, containers, work_dir, temporary_work_dir)


def _finish(
    description: dict[str, Any],
    pipeline: Pipeline | None,
    started: float,
    containers: list[Container],
    work_dir: Path | None,
    temporary_work_dir: bool,
) -> dict[str, Any]:
    seconds = time.monotonic() - started  # the processing time, without stopping the containers
    results = pipeline.results if pipeline is not None else []
    description["TransformEndTime"] = _now()
    local = description["LocalRun"]
    local["Summary"] = summary(results, seconds)
    local["Objects"] = [_object_description(result) for result in results]
    for key in DESCRIPTION_ORDER:  # DescribeTransformJob's order, then LocalRun
        if key in description:
            description[key] = description.pop(key)
    try:
        stop_containers(containers)
    finally:
        if work_dir is not None and temporary_work_dir and description["TransformJobStatus"] == Status.COMPLETED:
            shutil.rmtree(work_dir, ignore_errors=True)
            if "ContainerLogs" in local:  # name no file that is gone; say how to keep them
                local["ContainerLogs"] = []
                local["ContainerLogsNote"] = LOGS_REMOVED
        elif work_dir is not None:
            shutil.rmtree(work_dir / "model", ignore_errors=True)  # an unpacked model.tar.gz
            local["WorkDir"] = str(work_dir)  # container logs, for a failed job
    return description


LOGS_REMOVED = (
    "removed with the temporary work folder when the job completed; pass --work-dir DIR "
    "(LocalOptions.work_dir) to keep them"
)


def summary(results: list[ObjectResult], seconds: float) -> dict[str, Any]:
    records = sum(result.records for result in results)
    return {
        "Objects": len(results),
        "ObjectsFailed": sum(result.status is Status.FAILED for result in results),
        "Records": records,
        "RecordsFailed": sum(len(result.failed_records) for result in results),
        "Requests": sum(result.requests for result in results),
        "Retries": sum(result.retries for result in results),
        "BytesRead": sum(result.bytes_read for result in results),
        "BytesSent": sum(result.bytes_sent for result in results),
        "BytesWritten": sum(result.bytes_written for result in results),
        "Seconds": round(seconds, 3),
        "RecordsPerSecond": round(records / seconds, 3) if seconds > 0 else None,  # 0.417 for a short job
    }


def _object_description(result: ObjectResult) -> dict[str, Any]:
    return {
        "Input": result.input,
        "Output": result.output if result.status is Status.COMPLETED else None,
        "Instance": result.instance,
        "Status": result.status.value,
        "Records": result.records,
        "FailedRecords": result.failed_records,
        "Requests": result.requests,
        "Retries": result.retries,
        "BytesRead": result.bytes_read,
        "BytesSent": result.bytes_sent,
        "BytesWritten": result.bytes_written,
        "Messages": result.messages,
    }


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")
