"""`sagemaker-tfs tune transform`: the Batch Transform job's fields and the container's settings with the most
records/s, measured on a sample of the input.

  sagemaker-tfs tune transform MODEL_DIR_OR_TAR --data INPUT [transform's job parameters] [--sample N]
                               [--budget 10m] [--out DIR] [--seed N]

It takes a prefix of the input (transform_sample.py), then measures each candidate as a real local transform job on
it (transform_job.py): MaxConcurrentTransforms, BatchStrategy and MaxPayloadInMB (with a SplitType), and the
container's settings, batching included (settings_space.py), in a seeded hill climb from transform's defaults
within the budget; a winner other than the defaults is rechecked against them (transform_tuner.py). A job
parameter given (--max-concurrent-transforms 8) is held, not tuned. It writes the winner as a CreateTransformJob
request and estimates the full job's time on this machine. Exit status: 0 done, 2 invalid arguments, model,
input, a sample the model fails on or a budget too small, 130 interrupted.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..packaging import PackagingError, check_model_dir
from ..shared import gpus
from ..shared.cpus import cpu_count
from ..shared.storage import Storage
from ..transform.api import model_name_for
from ..transform.cli import HELP
from ..transform.containers import ContainerError, is_endpoint, prepare_model
from ..transform.job import PARAMS, TransformJob, ValidationError
from .endpoint import TuneError, add_run_arguments, run_mode
from .settings_space import default_candidate, dimensions
from .transform_job import JOB_FIELDS, JobRunner, JobTrial, job_dimensions
from .transform_report import TransformContext, render_table, write_outputs
from .transform_sample import Sample, SampleError, take
from .transform_tuner import TransformTuner, run_tuner

MIN_BUDGET_S = 20.0  # a stack start, a warm-up and a job on a small sample
DEFAULT_SAMPLE_RECORDS = 1000
DEFAULT_SAMPLE_OBJECTS = 20
MAX_ENVIRONMENT = 16  # CreateTransformJob's limit on Environment's entries
# set per job by the runner (the sample is a folder: S3Prefix, whatever the input's S3DataType)
NOT_RUN = {"data", "data_type", "output_path", "instance_count", "env", "job_name", *JOB_FIELDS}


def parser(prog: str = "sagemaker-tfs tune transform") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, description=__doc__.split("\n\n")[0].strip(), formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("model", metavar="MODEL_DIR_OR_TAR", help="a model folder or a model.tar.gz")
    job = p.add_argument_group("the job: transform's parameters (SDK name / API name); a tuned field given is held")
    for param in PARAMS:
        kind = {"action": "append", "metavar": "KEY=VALUE"} if param.sdk == "env" else {"metavar": "VALUE"}
        names = (f"--{param.sdk.replace('_', '-')}", f"--{param.api}")
        job.add_argument(*names, dest=param.sdk, help=HELP.get(param.sdk), **kind)  # type: ignore[arg-type]
    sample = f"default: {DEFAULT_SAMPLE_RECORDS} records, {DEFAULT_SAMPLE_OBJECTS} objects"
    p.add_argument("--sample", type=int, help=f"records (with a SplitType) or objects measured ({sample})")
    add_run_arguments(p, "tune-transform", "the search's seed")
    p.add_argument("--s3-endpoint-url", help="S3 endpoint for s3:// input (default: AWS_ENDPOINT_URL, else AWS)")
    return p


def _job(args: argparse.Namespace, output_path: str) -> tuple[TransformJob, dict[str, Any]]:
    """The user's job, validated as transform validates it, and its parameters as given."""
    params: dict[str, Any] = {p.sdk: getattr(args, p.sdk) for p in PARAMS if p.sdk != "env"}
    pairs = [pair.partition("=") for pair in args.env or []]
    if any(not sep for _, sep, _ in pairs):
        raise TuneError("--env takes KEY=VALUE")
    params["env"] = {key: value for key, _, value in pairs} or None
    params["output_path"] = params["output_path"] or output_path
    try:
        return TransformJob.create(None, default_model_name=model_name_for(args.model), **params), params
    except ValidationError as exc:
        raise TuneError(str(exc)) from None


@contextmanager
def _quiet_transform_log() -> Iterator[None]:
    """The runner's job logs are the tune's business: a failure reaches the user as one message (exit 2)."""
    logger = logging.getLogger("sagemaker_tfs.transform")
    saved, logger.disabled = logger.disabled, True
    try:
        yield
    finally:
        logger.disabled = saved


def machine() -> str:
    """This machine, as the estimate names it: cores, memory, GPUs."""
    memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 1e9
    count = len(gpus.find(5.0).devices)
    return f"{cpu_count()} cores, {memory:.1f} GB memory, " + (f"{count} GPU(s)" if count else "no GPU")


def _duration(seconds: float) -> str:
    if seconds < 1:
        return "under 1 s"
    minutes, second = divmod(round(seconds), 60)
    hours, minute = divmod(minutes, 60)
    return "about " + (
        f"{hours} h {minute:02d} min" if hours else f"{minute} min {second:02d} s" if minute else f"{second} s"
    )


def estimate(sample: Sample, rate: float, instances: int, where: str) -> str:
    """The full job's time from the winner's rate on the sample and the input's stored size."""
    records = sample.full_records()
    if records is None or rate <= 0:
        return f"estimate: none (the input's size is not listed); the winner ran {rate:,.1f} records/s on {where}"
    seconds = records / rate
    text = (
        f"estimate: the full input ({sample.input_objects:,} objects, {sample.input_bytes or 0:,} bytes, about "
        f"{records:,.0f} records) takes {_duration(seconds)} per instance at the winner's {rate:,.1f} "
        f"records/s, measured on this machine ({where})"
    )
    return text + (f"; {_duration(seconds / instances)} on {instances} instances" if instances > 1 else "")


def _environment(user: dict[str, str], winner: JobTrial, defaults: dict[str, str]) -> dict[str, str]:
    """The request's Environment: the user's, then the winner's settings, every one spelled out unless that passes
    CreateTransformJob's 16 entries; then only those that differ from the defaults."""
    merged = {**user, **winner.environment}
    if len(merged) > MAX_ENVIRONMENT:
        merged = {**user, **{k: v for k, v in winner.environment.items() if defaults.get(k) != v}}
    return merged


def tune(args: argparse.Namespace, say: Callable[[str], None]) -> int:
    if args.budget < MIN_BUDGET_S:
        raise TuneError(f"budget too small: {args.budget:g} s; give at least {MIN_BUDGET_S:g} s (e.g. --budget 2m)")
    if args.model.startswith("s3://") or is_endpoint(args.model):
        raise TuneError(f"{args.model}: give a local model folder or model.tar.gz (tune starts the stacks itself)")
    if not args.data:
        raise TuneError("no data: give the job's input with --data (a folder, a file, a prefix or s3://...)")
    if args.sample is not None and args.sample < 1:
        raise TuneError("--sample must be at least 1")
    out = Path(args.out)
    job, params = _job(args, str(out.resolve() / "output"))
    if not Path(args.model).exists():
        raise TuneError(f"The model {args.model} does not exist: give a model folder or a model.tar.gz")
    split = job.split_type or "None"
    count = args.sample or (DEFAULT_SAMPLE_RECORDS if split != "None" else DEFAULT_SAMPLE_OBJECTS)
    workdir = Path(tempfile.mkdtemp(prefix="sagemaker-tfs-tune-transform-"))
    try:
        try:
            model_dir = prepare_model(args.model, workdir, Storage(args.s3_endpoint_url).read)
            check_model_dir(model_dir)
        except (ContainerError, PackagingError) as exc:
            raise TuneError(f"{args.model}: {exc}") from None
        storage = Storage(args.s3_endpoint_url)
        try:
            sample = take(storage, job.data, job.data_type, split, job.compression_type, count, workdir / "data")
        except SampleError as exc:
            raise TuneError(str(exc)) from None
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise TuneError(f"Unable to create the output folder {out}: {exc.strerror}") from None
        cores = cpu_count()
        container_space = dimensions(cores)
        fixed = {f: getattr(job, f) for f in JOB_FIELDS if getattr(job, f)}  # (MaxConcurrentTransforms 0: unset)
        space = container_space + job_dimensions(cores, split, fixed)
        runs = {k: v for k, v in params.items() if k not in NOT_RUN and v is not None}
        runner = JobRunner(model_dir, runs, job.env, workdir)
        tuner = TransformTuner(runner, sample, space, container_space, args.budget, args.seed)
        with _quiet_transform_log():
            winner = run_tuner(tuner)
        return _finish(tuner, winner, job, params, out, say)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _finish(
    tuner: TransformTuner,
    winner: JobTrial,
    job: TransformJob,
    params: dict[str, Any],
    out: Path,
    say: Callable[[str], None],
) -> int:
    sample, cores, where = tuner.sample, cpu_count(), machine()
    defaults = default_candidate(tuner.container_space).environment(tuner.container_space)
    environment = _environment(job.env, winner, defaults)
    named = {"model_name": job.model_name, "job_name": job.job_name}
    request = TransformJob.create(None, **{**params, **named, **winner.job, "env": environment}).to_request()
    warnings = []
    if cores <= 4:
        runner = winner.measured.runner_cores if winner.measured else 0.0
        warnings.append(
            f"This machine has {cores} cores: the runner (reading, packing and sending the records) shares them with "
            f"the stack (it used {runner:.2f} cores during the winner's job), so the rates here are lower than an "
            "instance gives the container alone. Tune on the instance type the job will run on."
        )
    shown = "records" if job.split_type not in (None, "None") else "objects"
    context = TransformContext(
        model=job.model_name,
        data=job.data,
        sample=f"the first {sample.records:,} {shown} ({sample.objects:,} object{'s' * (sample.objects != 1)}, "
        f"{sample.stored_bytes:,} bytes)",
        machine=where,
        estimate=estimate(sample, winner.score, job.instance_count, where),
        request=request,
        notes=[*tuner.notes, *([tuner.recheck] if tuner.recheck else [])],
        warnings=warnings,
        seed=tuner.seed,
        budget_s=tuner.budget,
        elapsed_s=time.monotonic() - tuner.started,
    )
    page = write_outputs(out, context, tuner.trials, winner)
    say(render_table(tuner.trials, winner) + "\n")
    for note in context.notes:
        say(note)
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    default = tuner.trials[0]
    say(
        f"winner: #{winner.number} ({winner.description}): {winner.score:,.1f} records/s "
        f"(the defaults: {default.score:,.1f} records/s)"
    )
    say(f"CreateTransformJob request: {out / 'request.json'}; its Environment as KEY=VALUE: {out / 'environment.env'}")
    if not job.data.startswith("s3://") or not str(request["TransformOutput"]["S3OutputPath"]).startswith("s3://"):
        say("note: SageMaker needs s3:// URIs for S3Uri and S3OutputPath")
    say(context.estimate)
    say(f"report: {page}")
    return 0


def main(argv: list[str] | None = None, prog: str = "sagemaker-tfs tune transform") -> int:
    return run_mode(tune, parser(prog).parse_args(argv), prog)
