"""`sagemaker-tfs transform`: run a SageMaker Batch Transform job locally.

  sagemaker-tfs transform --model MODEL [--request create-transform-job.json] [job parameters] [local options]

MODEL is a model folder, a model.tar.gz (local or s3://) or the URL of a running container. Job parameters take
the SageMaker Python SDK's names (--split-type Line) or the API's (--SplitType Line); they override the request
file. Exit status: 0 Completed, 1 Failed, 2 invalid job, 130 stopped.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from .api import LocalOptions, TransformJobStopped, model_name_for, run
from .job import PARAMS, TransformJob, ValidationError
from .outcomes import Status
from .progress import ProgressBar, render_summary

HELP = {
    "data": "input: s3://bucket/prefix, a local folder, file or path prefix, or a manifest (with --data-type "
    "ManifestFile)",
    "output_path": "where <input name>.out files go: s3://bucket/prefix or a local folder",
    "env": "KEY=VALUE added to the container's environment (repeatable)",
    "strategy": "SingleRecord or MultiRecord (default: the container's /execution-parameters, else MultiRecord)",
    "max_payload": "MB per request, 0..100, 0 = no limit (default: the container's, else 6)",
    "max_concurrent_transforms": "parallel requests per instance (default: the container's, else 1)",
}


class _LogHandler(logging.StreamHandler):
    """Log lines on stderr, clearing the progress bar first."""

    def __init__(self, progress: ProgressBar):
        super().__init__(sys.stderr)
        self.progress = progress

    def emit(self, record: logging.LogRecord) -> None:
        self.progress.clear()
        super().emit(record)


class _Formatter(logging.Formatter):
    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802 - logging's name
        moment = datetime.datetime.fromtimestamp(record.created, datetime.timezone.utc)
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{int(record.msecs):03d}"


def parser(prog: str = "sagemaker-tfs transform") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, description=__doc__.split("\n\n")[0].strip(), formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--model",
        required=True,
        help="model folder, model.tar.gz (local or s3://), or endpoint URL(s), comma-separated",
    )
    p.add_argument("--request", metavar="FILE", help="a CreateTransformJob request (JSON; - for stdin)")
    job = p.add_argument_group("job parameters (SDK name / API name)")
    for param in PARAMS:
        flags = [f"--{param.sdk.replace('_', '-')}", f"--{param.api}"]
        if param.sdk == "env":
            job.add_argument(*flags, dest="env", action="append", metavar="KEY=VALUE", help=HELP["env"])
        else:
            job.add_argument(
                *flags, dest=param.sdk, metavar="N" if param.kind is int else "VALUE", help=HELP.get(param.sdk)
            )
    local = p.add_argument_group("local options")
    local.add_argument(
        "--s3-endpoint-url", help="S3 endpoint (e.g. a local S3-compatible server); default: AWS_ENDPOINT_URL, else AWS"
    )
    local.add_argument(
        "--work-dir",
        help="folder for container logs and runtime files (default: a temporary "
        "folder, removed when the job completes)",
    )
    local.add_argument(
        "--startup-timeout",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="how long the containers may take to answer /ping (default 600)",
    )
    local.add_argument(
        "--inclusive-slice-end",
        action="store_true",
        help="read JSONPath [1:4] as indexes 1 to 4 (default: 1 to 3, as Jayway JsonPath)",
    )
    local.add_argument("--describe", metavar="FILE", help="write the job description (JSON) to FILE (- for stdout)")
    local.add_argument(
        "--print-request",
        action="store_true",
        help="print the CreateTransformJob request for this job (JSON) on stdout",
    )
    local.add_argument("--dry-run", action="store_true", help="validate the job and print its request; run nothing")
    return p


def _environment(pairs: list[str] | None) -> dict[str, str] | None:
    if not pairs:
        return None
    env = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ValidationError([f"--env {pair!r} is not KEY=VALUE"])
        env[key] = value
    return env


def _build_job(args: argparse.Namespace) -> TransformJob:
    request = None
    if args.request:
        text = sys.stdin.read() if args.request == "-" else Path(args.request).read_text()
        try:
            request = json.loads(text)
        except ValueError as exc:
            raise ValidationError([f"{args.request} is not JSON: {exc}"]) from None
        if not isinstance(request, dict):
            raise ValidationError([f"{args.request} is not a CreateTransformJob request (a JSON object)"])
    params: dict[str, Any] = {p.sdk: getattr(args, p.sdk) for p in PARAMS if p.sdk != "env"}
    params["env"] = _environment(args.env)
    return TransformJob.create(request, default_model_name=model_name_for(args.model), **params)


def _write_json(value: Any, target: str) -> None:
    text = json.dumps(value, indent=2, ensure_ascii=False) + "\n"
    if target == "-":
        sys.stdout.write(text)
    else:
        Path(target).write_text(text)


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None, prog: str = "sagemaker-tfs transform") -> int:
    """The command; `prog` names it in the help and in its messages (the deprecated `transform` alias: "transform")."""
    args = parser(prog).parse_args(argv)
    progress = ProgressBar()
    handler = _LogHandler(progress)
    handler.setFormatter(_Formatter("%(asctime)s:%(message)s"))
    logger = logging.getLogger("sagemaker_tfs.transform")
    saved = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        return _main(args, progress, prog)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]


def _main(args: argparse.Namespace, progress: ProgressBar, prog: str) -> int:
    try:
        job = _build_job(args)
    except (ValidationError, OSError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    if args.print_request or args.dry_run:
        _write_json(job.to_request(), "-")
        if not job.data.startswith("s3://") or not job.output_path.startswith("s3://"):
            print(f"{prog}: note: SageMaker needs s3:// URIs for S3Uri and S3OutputPath", file=sys.stderr)
    if args.dry_run:
        return 0
    options = LocalOptions(
        args.s3_endpoint_url, args.work_dir, args.startup_timeout, args.inclusive_slice_end, progress
    )
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        description = run(job, args.model, options)
        status = 0 if description["TransformJobStatus"] == Status.COMPLETED else 1
    except TransformJobStopped as stopped:
        description, status = stopped.description, 130
    finally:
        signal.signal(signal.SIGTERM, previous)
        progress.clear()
    print(render_summary(description), file=sys.stderr)
    if args.describe:
        _write_json(description, args.describe)
    return status


if __name__ == "__main__":
    sys.exit(main())
