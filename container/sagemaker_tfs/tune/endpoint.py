"""`sagemaker-tfs tune endpoint`: the container settings that serve a model fastest under a p99 bound, measured.

  sagemaker-tfs tune endpoint MODEL_DIR_OR_TAR --payload FILE_OR_FOLDER [--content-type T] [--accept A]
                              [--p99-ms BOUND] [--budget 10m] [--out DIR] [--seed N]

For each setting it tries, it starts the real stack (`serve`, on free loopback ports; stack.py), sends
the payloads at increasing concurrency (closed loop) until p99 passes the bound or throughput stops growing, then
once at a fixed Poisson arrival rate (open loop) at a fraction of the best rate, and stops the stack. A seeded hill
climb (search.py) picks the settings, starting at the defaults, while the budget (wall clock, starts included)
fits one more and a recheck: a winner other than the defaults is measured again against them, in alternating
rounds, and must still beat them beyond noise. Exit status: 0 a winner found, 1 no setting held the bound,
2 invalid arguments, model or payload, or a budget too small, 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from ..packaging import PackagingError, check_model_dir
from ..shared.cpus import cpu_count
from ..shared.free_ports import free_port
from ..transform.containers import ContainerError, is_endpoint, prepare_model
from . import usage
from .load import ClosedLoop, LoadError, Measurement, Payloads, bare_nginx, open_loop, probe
from .report import Context, render_table, write_environment, write_report
from .search import HillClimb, freeze_idle_gunicorn
from .settings_space import Candidate, dimensions
from .stack import start_stack, stop_stack
from .trial import Trial, leader

HOST = "127.0.0.1"
CONCURRENCY = (1, 2, 4, 8, 16, 32, 64, 128, 256)
BOUND_FACTOR = 3.0  # the default bound: 3x the defaults' p99 at c=1 ...
BOUND_FLOOR_MS = 1.0  # ... at least 1 ms, above the timer noise of a sub-millisecond model
OPEN_LOOP_FRACTION = 0.8  # of a setting's best closed-loop rate: loaded, yet not at the edge where queues grow
SATURATED_GAIN = 1.03  # a level that adds less than 3% req/s twice in a row: more connections only queue
STOP_RESERVE_S = 3.0  # a stack's SIGTERM drain, kept out of the last level's time
MIN_BUDGET_S = 15.0  # a stack start and a few levels at the shortest step
WINNER_MARGIN = 0.03  # the defaults stay the answer unless beaten by more than measurement noise
RECHECK_ROUNDS = 3  # the winner against the defaults, alternating, at the end


class TuneError(Exception):
    """A problem with the arguments, the model, the payload or the budget: one message, exit status 2."""


def parse_duration(text: str) -> float:
    """`90`, `90s`, `10m`, `1h`, `1m30s` as seconds."""
    match = re.fullmatch(r"\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*(?:(\d+(?:\.\d+)?)s?)?\s*", text)
    if not text.strip() or match is None or not any(match.groups()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (e.g. 90s, 10m, 1h)")
    hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return hours * 3600 + minutes * 60 + seconds


def parser(prog: str = "sagemaker-tfs tune endpoint") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, description=__doc__.split("\n\n")[0].strip(), formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("model", metavar="MODEL_DIR_OR_TAR", help="a model folder or a model.tar.gz")
    p.add_argument("--payload", required=True, help="a request body, or a folder of them (sent in turn)")
    p.add_argument("--content-type", default="application/json", help="the payloads' type (default: %(default)s)")
    p.add_argument("--accept", help="the Accept header (default: none, the container's default)")
    p.add_argument(
        "--p99-ms",
        type=float,
        help=f"the p99 latency bound in ms (default: {BOUND_FACTOR:g}x the defaults' p99 at concurrency 1, at least "
        f"{BOUND_FLOOR_MS:g} ms)",
    )
    add_run_arguments(p, "tune-endpoint", "the search's and the open loop's seed")
    p.add_argument(
        "--step-seconds",
        type=float,
        help="each load run's length (default: the budget / 60, between 1 and 5 s)",
    )
    p.add_argument(
        "--generator",
        choices=("auto", "wrk", "h2load", "python"),
        default="auto",
        help="the closed-loop load generator (default: wrk, else h2load 1.69 or later for one payload, else python)",
    )
    return p


def recheck_verdict(number: int, ours: list[float], theirs: list[float], unit: str, digits: int) -> tuple[bool, str]:
    """Whether setting #number's median over the recheck's alternating rounds beats the defaults' by more than the
    margin, and the line that says so (every mode's recheck ends here)."""
    ours_median, theirs_median = (sorted(rounds)[len(rounds) // 2] for rounds in (ours, theirs))
    text = (
        f"rechecked in {len(ours)} alternating rounds, median {unit}: #{number} {ours_median:,.{digits}f}, "
        f"the defaults {theirs_median:,.{digits}f}"
    )
    if ours_median > theirs_median * (1 + WINNER_MARGIN):
        return True, text
    return False, text + ": not ahead beyond noise, the defaults stay"


def add_run_arguments(p: argparse.ArgumentParser, out: str, seed: str) -> None:
    """--budget, --out and --seed, alike in every mode."""
    p.add_argument("--budget", type=parse_duration, default=600.0, help="wall clock for the whole tune (default: 10m)")
    p.add_argument("--out", default=out, help="folder for the winner and the report (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help=f"{seed} (default: 0)")


class Progress:
    """One stderr line: redrawn on a terminal, else written anew at each change (a log shows every step)."""

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stderr
        self.redraw = self.stream.isatty()
        self.drawn = False

    def __call__(self, text: str) -> None:
        if self.redraw:
            self.stream.write("\r" + text + "\x1b[K")
            self.drawn = True
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def clear(self) -> None:
        if self.drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.drawn = False


class Tuner:
    """One tune: the trials, in order, against a deadline."""

    def __init__(self, model_dir: Path, payloads: Payloads, args: argparse.Namespace, workdir: Path):
        self.model_dir, self.payloads, self.args, self.workdir = model_dir, payloads, args, workdir
        self.started = time.monotonic()
        self.deadline = self.started + args.budget
        self.cores = cpu_count()
        self.space = dimensions(self.cores)
        self.search = HillClimb(self.space, args.seed, margin=WINNER_MARGIN)
        # whole seconds: wrk's and h2load's durations are
        self.step = float(max(1, round(args.step_seconds or min(5.0, max(1.0, args.budget / 60)))))
        self.generator = ClosedLoop(payloads, workdir, args.generator)
        self.bound_ms: float | None = args.p99_ms
        self.trials: list[Trial] = []
        self.estimate = 0.0  # the longest trial so far: what the next one is expected to take
        self.progress = Progress()
        self.ceiling: Measurement | None = None
        self.recheck: str | None = None  # what the recheck found, for the report
        self.notes: list[str] = []

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def left(self) -> float:
        """The time a setting's load may use: the budget left, less a recheck's once the defaults are measured (a
        ramp that ran into it once left a winner unrechecked)."""
        return self.remaining() - (self.recheck_estimate() if self.trials else 0.0)

    def draw(self, trial: Trial, doing: str) -> None:
        count = f"~{len(self.trials) + int(max(0.0, self.remaining()) // self.estimate)}" if self.estimate else "?"
        best = max(self.trials, key=lambda t: t.score, default=None)
        best_text = f"{best.score:,.0f} req/s (#{best.number})" if best and best.score else "-"
        self.progress(
            f"tune: setting {trial.number} of {count} ({trial.description}): {doing}  "
            f"{time.monotonic() - self.started:,.0f} s of {self.args.budget:,.0f} s  best {best_text}"
        )

    def draw_recheck(self, winner: Trial, doing: str) -> None:
        self.progress(
            f"tune: recheck of #{winner.number} against the defaults: {doing}  "
            f"{time.monotonic() - self.started:,.0f} s of {self.args.budget:,.0f} s"
        )

    @staticmethod
    def _servers(candidate: Candidate) -> int:
        """The processes that serve requests in parallel: enough connections to give each one its first."""
        return int(candidate["gunicorn_workers"]) + int(candidate["tfs_instance_count"])

    def measure_ceiling(self) -> None:
        """The generator alone against a bare nginx: the most it can drive on this machine."""
        port = free_port()
        with bare_nginx(port):
            self.ceiling = self.generator.run(HOST, port, 16, self.step)

    def run(self) -> None:
        while True:
            if self.trials and self.remaining() < self.estimate + self.recheck_estimate():
                break
            candidate = self.search.ask()
            if candidate is None:
                break
            trial = self.evaluate(candidate)
            if not self.trials and not trial.levels:
                raise TuneError(
                    f"budget too small: the stack with the default settings took {trial.start_seconds:.0f} s to "
                    f"start, which left no time to measure it within {self.args.budget:g} s"
                )
            self.trials.append(trial)
            self.estimate = max(self.estimate, trial.seconds)
            groups = trial.best.groups if trial.best else None  # at the defaults' best rate
            if len(self.trials) == 1 and (note := freeze_idle_gunicorn(self.search, groups)):
                self.notes.append(note)
            self.search.tell(candidate, trial.score)
        self.progress.clear()

    def evaluate(self, candidate: Candidate) -> Trial:
        began = time.monotonic()
        is_default = not self.trials
        trial = Trial(
            len(self.trials) + 1,
            candidate,
            candidate.describe(self.space),
            candidate.environment(self.space),
            bound_ms=self.bound_ms or 0.0,
        )
        self.draw(trial, "starting the stack")
        try:
            stack = start_stack(
                self.model_dir,
                trial.environment,
                int(candidate["tfs_instance_count"]),
                self.workdir / f"setting-{trial.number}",
                startup_timeout=max(1.0, min(300.0, self.remaining())),
            )
        except ContainerError as exc:
            if is_default:
                raise TuneError(
                    "budget too small: the stack did not start within it"
                    if self.remaining() <= 0
                    else f"The stack with the default settings did not start: {exc}"
                ) from None
            first_line = str(exc).splitlines()[0]
            trial.error = "the budget ran out while it started" if self.remaining() <= 0 else first_line
            trial.seconds = time.monotonic() - began
            return trial
        trial.start_seconds = time.monotonic() - began
        try:
            self.load(trial, stack.ports[0], stack.process.pid)
        except LoadError as exc:
            if is_default:
                raise TuneError(str(exc)) from None
            trial.error = str(exc).splitlines()[0]
        finally:
            self.progress.clear()
            stop_stack(stack)
        trial.seconds = time.monotonic() - began
        return trial

    def load(self, trial: Trial, port: int, session: int) -> None:
        probe(HOST, port, self.payloads, times=3)  # a non-2xx answer stops here
        # Warm-up, not counted: every worker's and model server's first requests (connections, TensorFlow's first
        # run of the graph) would otherwise land in the first level's p99, and with the defaults, in the bound.
        if self.left() > 2 * self.step + 1.0 + STOP_RESERVE_S:
            self.draw(trial, "warming up")
            self.generator.run(HOST, port, max(2, self._servers(trial.candidate)), 1.0)
        batch = int(trial.candidate["tfs_max_batch_size"]) if trial.candidate["tfs_enable_batching"] else 0
        best_rate, flat = 0.0, 0
        for concurrency in CONCURRENCY:
            if self.left() < self.step + 1.0 + STOP_RESERVE_S:
                break
            self.draw(trial, f"c={concurrency}")
            before, began = usage.snapshot(session), time.monotonic()
            measured = self.generator.run(HOST, port, concurrency, self.step)
            measured.groups = usage.between(before, usage.snapshot(session), time.monotonic() - began)
            trial.levels.append(measured)
            if self.bound_ms is None:  # the defaults at c=1 set the bound
                self.bound_ms = max(BOUND_FLOOR_MS, BOUND_FACTOR * measured.p99_ms)
            trial.bound_ms = self.bound_ms
            if measured.errors:
                break
            if measured.p99_ms > self.bound_ms:
                if concurrency < batch:  # a batch that cannot fill waits out its timeout: more requests fill it
                    continue
                break
            flat = flat + 1 if measured.rate < best_rate * SATURATED_GAIN else 0
            best_rate = max(best_rate, measured.rate)
            if flat >= 2:
                break
        best = trial.best
        if best is not None and self.left() >= self.step + 1.0 + STOP_RESERVE_S:
            self.draw(trial, "open loop")
            rate = OPEN_LOOP_FRACTION * best.rate
            before, began = usage.snapshot(session), time.monotonic()
            trial.open_loop = open_loop(HOST, port, self.payloads, rate, self.step, self.args.seed)
            trial.open_loop.groups = usage.between(before, usage.snapshot(session), time.monotonic() - began)

    def recheck_estimate(self) -> float:
        """The time a recheck takes: two stack starts and its rounds."""
        start = max((t.start_seconds for t in self.trials), default=0.0)
        return 2 * start + 2 + 2 * RECHECK_ROUNDS * self.step + STOP_RESERVE_S

    def rechecked(self, winner: Trial) -> Trial:
        """The winner, or the defaults when, measured again against each other in alternating rounds (each at its
        own best concurrency, both stacks up), the winner's median rate under the bound is not ahead by more than
        the margin: one lucky run of a setting must not make the recommendation."""
        default = self.trials[0]
        if winner is default or default.best is None:  # (defaults over the bound: nothing to recheck against)
            return winner
        if self.remaining() < self.recheck_estimate():
            self.recheck = "not rechecked against the defaults: the budget ran out"
            return winner
        rates: dict[int, list[float]] = {default.number: [], winner.number: []}
        stacks = []
        try:
            for trial in (default, winner):
                self.draw_recheck(winner, f"starting #{trial.number}'s stack")
                stacks.append(
                    start_stack(
                        self.model_dir,
                        trial.environment,
                        int(trial.candidate["tfs_instance_count"]),
                        self.workdir / f"recheck-{trial.number}",
                        startup_timeout=max(1.0, min(300.0, self.remaining())),
                    )
                )
            pairs = list(zip((default, winner), stacks, strict=True))
            for trial, stack in pairs:  # as before each setting's ramp
                self.generator.run(HOST, stack.ports[0], max(2, self._servers(trial.candidate)), 1.0)
            for round_ in range(RECHECK_ROUNDS):
                for trial, stack in pairs if round_ % 2 == 0 else pairs[::-1]:
                    best = trial.best
                    assert best is not None and best.concurrency is not None  # (both have a score)
                    self.draw_recheck(winner, f"round {round_ + 1} of {RECHECK_ROUNDS}, #{trial.number}")
                    measured = self.generator.run(HOST, stack.ports[0], best.concurrency, self.step)
                    rates[trial.number].append(measured.rate if trial.held(measured) else 0.0)
        except (ContainerError, LoadError) as exc:
            self.recheck = f"not rechecked against the defaults: {str(exc).splitlines()[0]}"
            return winner
        finally:
            self.progress.clear()
            for stack in stacks:
                stop_stack(stack)
        ahead, self.recheck = recheck_verdict(
            winner.number, rates[winner.number], rates[default.number], "req/s under the bound", 0
        )
        return winner if ahead else default

    def winner(self) -> Trial | None:
        best = leader(self.trials, WINNER_MARGIN)
        return None if best is None else self.rechecked(best)


def _no_download(url: str) -> bytes:
    raise OSError("tune reads local models only")


def _memory_gb() -> float:
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 1e9


def tune(args: argparse.Namespace, say: Callable[[str], None]) -> int:
    if args.budget < MIN_BUDGET_S:
        raise TuneError(f"budget too small: {args.budget:g} s; give at least {MIN_BUDGET_S:g} s (e.g. --budget 2m)")
    if args.step_seconds is not None and args.step_seconds < 1:
        raise TuneError("--step-seconds must be at least 1")
    if args.model.startswith("s3://") or is_endpoint(args.model):
        raise TuneError(f"{args.model}: give a local model folder or model.tar.gz (tune starts the stack itself)")
    try:
        payloads = Payloads.read(Path(args.payload), args.content_type, args.accept)
    except LoadError as exc:
        raise TuneError(str(exc)) from None
    if not Path(args.model).exists():
        raise TuneError(f"The model {args.model} does not exist: give a model folder or a model.tar.gz")
    workdir = Path(tempfile.mkdtemp(prefix="sagemaker-tfs-tune-"))
    try:
        try:
            model_dir = prepare_model(args.model, workdir, _no_download)
            check_model_dir(model_dir)
        except (ContainerError, PackagingError) as exc:
            raise TuneError(f"{args.model}: {exc}") from None
        out = Path(args.out)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise TuneError(f"Unable to create the output folder {out}: {exc.strerror}") from None
        try:
            tuner = Tuner(model_dir, payloads, args, workdir)
            tuner.measure_ceiling()
            tuner.run()
        except LoadError as exc:
            raise TuneError(str(exc)) from None
        return _finish(tuner, args, out, say)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _finish(tuner: Tuner, args: argparse.Namespace, out: Path, say: Callable[[str], None]) -> int:
    winner = tuner.winner()
    bound = tuner.bound_ms or 0.0
    best_cpu = winner.best.generator_cpu if winner and winner.best else None
    warnings = []
    if tuner.cores <= 4:
        warnings.append(
            f"This machine has {tuner.cores} cores: the load generator shares them with the stack "
            + (f"(it used {best_cpu:.2f} cores at the winner's best run), " if best_cpu is not None else "")
            + "so every rate here is lower than the stack alone would serve, and settings that use more cores "
            "are penalised. Tune on the instance type you deploy to, with cores to spare."
        )
    context = Context(
        model=args.model,
        payload=args.payload,
        cores=tuner.cores,
        memory_gb=_memory_gb(),
        generator=tuner.generator.name,
        bound_ms=bound,
        bound_origin="--p99-ms" if args.p99_ms else f"{BOUND_FACTOR:g}x the defaults' p99 at concurrency 1",
        budget_s=args.budget,
        elapsed_s=time.monotonic() - tuner.started,
        seed=args.seed,
        ceiling=tuner.ceiling,
        recheck=tuner.recheck,
        notes=tuner.notes,
        warnings=warnings,
    )
    page = write_report(out, context, tuner.trials, winner)
    say(render_table(tuner.trials, winner))
    say("")
    ceiling = tuner.ceiling
    if ceiling is not None:
        say(
            f"load generator: {tuner.generator.name}; alone against a bare nginx at c=16 it drove "
            f"{ceiling.rate:,.0f} req/s using {ceiling.generator_cpu:.2f} cores"
            + (f"; at the winner's best run it used {best_cpu:.2f} cores" if best_cpu is not None else "")
        )
    for note in [*tuner.notes, *([tuner.recheck] if tuner.recheck else [])]:
        say(note)
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if winner is None:
        for stale in ("environment.json", "environment.env"):  # a previous tune's winner is not this one's
            (out / stale).unlink(missing_ok=True)
        say(f"No setting held p99 under {bound:.2f} ms (raise --p99-ms). Report: {page}")
        return 1
    write_environment(out, winner.environment)
    default = tuner.trials[0]
    say(
        f"winner: #{winner.number} ({winner.description}): {winner.score:,.0f} req/s with p99 under {bound:.2f} ms "
        f"(the defaults: {default.score:,.0f} req/s)"
    )
    say(f"CreateModel Environment: {out / 'environment.json'}; KEY=VALUE lines: {out / 'environment.env'}")
    say(f"report: {page}")
    return 0


def main(argv: list[str] | None = None, prog: str = "sagemaker-tfs tune endpoint") -> int:
    return run_mode(tune, parser(prog).parse_args(argv), prog)


Tune = Callable[[argparse.Namespace, Callable[[str], None]], int]


def run_mode(tune: Tune, args: argparse.Namespace, prog: str) -> int:
    """A mode's tune, its TuneError one message with exit status 2 (every mode's errors read alike)."""
    try:
        return tune(args, print)
    except TuneError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
