"""`tune transform`'s measurements: one candidate = the container's settings plus the job's own fields
(MaxConcurrentTransforms, and with a SplitType BatchStrategy and MaxPayloadInMB), measured as records/s of a real
local transform job (transform.api.run, the product's own runner) over the sample.

The job's fields do not change the container (SageMaker passes them in its environment only for
/execution-parameters, and each job here sets all three), so a stack serves every candidate with its container
settings: the runner keeps the last STACKS_KEPT stacks up, keyed by their environment, and a hill climb that steps
one job field from the best setting reuses the best's stack instead of paying a start. Each new stack first runs the
warm-up sample, unmeasured. The same setting reached twice (MaxPayloadInMB does nothing for SingleRecord) is measured
once.
"""

from __future__ import annotations

import os
import shutil
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..transform.api import DEFAULT_CONCURRENCY, DEFAULT_PAYLOAD_MB, DEFAULT_STRATEGY, LocalOptions, run
from ..transform.containers import Container, container_environment
from ..transform.job import TransformJob
from ..transform.outcomes import Status
from ..transform.pipeline import Stats
from . import usage
from .settings_space import Candidate, Dimension, Value
from .stack import start_stack, stop_stack
from .usage import GroupUsage

STACKS_KEPT = 2  # the best setting's stack and the one just measured
JOB_FIELDS = ("max_concurrent_transforms", "strategy", "max_payload")  # TransformJob's names
MESSAGE_CHARACTERS = 300  # of a failed object's first message, in a table cell
MAX_CONCURRENT = 100  # the most MaxConcurrentTransforms tried: the seed write-up's TFRecord job used 100


def _counts(*counts: int) -> tuple[int, ...]:
    return tuple(sorted({min(MAX_CONCURRENT, max(1, count)) for count in counts}))


def job_dimensions(cores: int, split_type: str, fixed: Mapping[str, Value]) -> tuple[Dimension, ...]:
    """The job's fields as search dimensions, transform's defaults first; a field the user gave is fixed to it.
    BatchStrategy and MaxPayloadInMB only with a SplitType: without one a request is a whole object."""
    found = [
        Dimension(
            "max_concurrent_transforms",
            _counts(1, 2, 4, cores, 2 * cores, 4 * cores, 8 * cores, 16 * cores, 32 * cores),
            DEFAULT_CONCURRENCY,
            1,
            "concurrent",
        )
    ]
    if split_type != "None":
        found.append(Dimension("strategy", (DEFAULT_STRATEGY, "SingleRecord"), DEFAULT_STRATEGY, 1, "strategy"))
        found.append(Dimension("max_payload", (1, 2, DEFAULT_PAYLOAD_MB, 16), DEFAULT_PAYLOAD_MB, 2, "payload MB"))
    return tuple(
        Dimension(d.field, (fixed[d.field],), fixed[d.field], d.tier, d.label) if d.field in fixed else d for d in found
    )


def job_fields(candidate: Candidate, space: tuple[Dimension, ...]) -> dict[str, Value]:
    """The candidate's job fields under TransformJob's names (those in the space)."""
    return {d.field: candidate[d.field] for d in space if d.field in JOB_FIELDS}


@dataclass(frozen=True)
class JobRun:
    """What JobRunner.job measured."""

    rate: float  # records/s over all the runs
    runs: int
    records: int  # of one run
    requests: int  # of one run
    seconds: float  # of one run, on average
    groups: GroupUsage  # the stack's process groups over the runs
    runner_cores: float  # this process (it reads, packs, sends and writes the records) over the runs


@dataclass
class JobTrial:
    """One setting measured: its job on the sample, and the stack's CPU and memory over it."""

    number: int  # 1, 2, ... in the order measured; 1 is the defaults
    candidate: Candidate
    description: str
    environment: dict[str, str]  # the container's settings (CreateTransformJob's Environment, before the user's)
    job: dict[str, Value]  # MaxConcurrentTransforms, BatchStrategy, MaxPayloadInMB
    measured: JobRun | None = None  # None when it failed
    start_seconds: float = 0.0  # the stack's start and warm-up; 0 when an earlier one served
    seconds: float = 0.0  # all of it
    error: str | None = None

    @property
    def score(self) -> float:
        """Records/s: what the search maximises (0: it failed)."""
        return 0.0 if self.error or self.measured is None else self.measured.rate


def failure(description: Mapping[str, Any]) -> str:
    """Why a job failed, in one line: its FailureReason and the first failed object's first message."""
    reason = str(description.get("FailureReason") or description["TransformJobStatus"])
    for obj in description.get("LocalRun", {}).get("Objects", []):
        if obj["Status"] != Status.COMPLETED and obj["Messages"]:
            first = " ".join(line.strip() for line in obj["Messages"][0].splitlines() if line.strip())
            return f"{reason}; {Path(obj['Input']).name}: {first[:MESSAGE_CHARACTERS]}"
    return reason


class JobRunner:
    """Runs the sample's jobs against stacks it starts and keeps (see the module's docstring)."""

    def __init__(self, model_dir: Path, params: Mapping[str, Any], user_env: Mapping[str, str], workdir: Path):
        self.model_dir, self.params, self.user_env, self.workdir = model_dir, dict(params), dict(user_env), workdir
        self.stacks: OrderedDict[tuple[tuple[str, str], ...], Container] = OrderedDict()
        self.started = 0

    def stack(
        self,
        environment: Mapping[str, str],
        job: Mapping[str, Value],
        warm_up: Path,
        timeout: float,
        keep: Mapping[str, str] | None = None,
    ) -> bool:
        """Ensure a stack with these settings is up (and warmed up with `job`), stopping the oldest other than
        `keep`'s (the best setting's, whose neighbours come next); whether it had to start one.
        ContainerError when it does not start; JobFailed when the warm-up's job fails."""
        key = tuple(sorted(environment.items()))
        if key in self.stacks:
            self.stacks.move_to_end(key)
            return False
        kept = None if keep is None else tuple(sorted(keep.items()))
        while len(self.stacks) >= STACKS_KEPT:
            oldest = next(k for k in self.stacks if k != kept)
            stop_stack(self.stacks.pop(oldest))
        self.started += 1
        env = container_environment({**self.user_env, **environment}, None, None, None)  # SAGEMAKER_BATCH=true
        instances = int(environment.get("SAGEMAKER_TFS_INSTANCE_COUNT", "1"))
        self.stacks[key] = start_stack(
            self.model_dir, env, instances, self.workdir / f"stack-{self.started}", startup_timeout=timeout
        )
        self.job(environment, job, warm_up)
        return True

    def job(
        self,
        environment: Mapping[str, str],
        job: Mapping[str, Value],
        data: Path,
        on_progress: Callable[[Stats], None] | None = None,
        min_seconds: float = 0.0,
    ) -> JobRun:
        """The job over `data` on the running stack with these settings, run again until `min_seconds` have
        passed (a job of a few milliseconds measures the timer, not the setting); JobFailed when one fails.
        Records/s over the wall clock of the whole runs (the description's Seconds are rounded to the
        millisecond), with the stack's and the runner's CPU over them."""
        stack = self.stacks[tuple(sorted(environment.items()))]
        output = self.workdir / "output"
        request = TransformJob.create(
            None, **{**self.params, **job, "data": str(data), "output_path": str(output), "instance_count": 1}
        )
        before, runner_before = usage.snapshot(stack.process.pid), usage.cpu_seconds(os.getpid())
        began, runs, records = time.perf_counter(), 0, 0
        while not runs or time.perf_counter() - began < min_seconds:
            shutil.rmtree(output, ignore_errors=True)
            description = run(request, stack.url, LocalOptions(on_progress=on_progress))
            if description["TransformJobStatus"] != Status.COMPLETED:
                raise JobFailed(failure(description))
            runs, records = runs + 1, records + description["LocalRun"]["Summary"]["Records"]
        seconds = time.perf_counter() - began
        shutil.rmtree(output, ignore_errors=True)
        return JobRun(
            rate=records / seconds,
            runs=runs,
            records=description["LocalRun"]["Summary"]["Records"],
            requests=description["LocalRun"]["Summary"]["Requests"],
            seconds=seconds / runs,
            groups=usage.between(before, usage.snapshot(stack.process.pid), seconds),
            runner_cores=(usage.cpu_seconds(os.getpid()) - runner_before) / seconds,
        )

    def close(self) -> None:
        while self.stacks:
            stop_stack(self.stacks.popitem()[1])


class JobFailed(RuntimeError):
    """A job on the sample did not complete; the message says why (failure())."""
