"""`tune transform`'s search: the seeded hill climb (search.py) over the container's settings and the job's fields,
each candidate a real job on the sample (transform_job.py), within the budget; then the winner rechecked against
the defaults, as `tune endpoint` does, in alternating rounds on both stacks.

The budget works as `tune endpoint`'s: no new setting starts when the time left is less than the longest one took
plus a recheck. A setting the job's own validation refuses (MaxConcurrentTransforms x MaxPayloadInMB over 100 MB)
is skipped without a run, and one equal in effect to a setting measured (MaxPayloadInMB under SingleRecord) gets
that setting's score: neither costs time nor takes a row.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..transform.containers import ContainerError
from ..transform.job import TransformJob, ValidationError
from ..transform.pipeline import Stats
from .endpoint import RECHECK_ROUNDS, WINNER_MARGIN, Progress, TuneError, recheck_verdict
from .search import HillClimb, freeze_idle_gunicorn
from .settings_space import Candidate, Dimension, Value
from .transform_job import JobFailed, JobRunner, JobTrial, job_fields
from .transform_sample import Sample

MIN_JOB_SECONDS = 1.0  # a setting's job runs again until this long: a sample of a few ms measures the timer
DRAW_INTERVAL = 0.25  # seconds between two redraws of the progress line during a job, on a terminal


class TransformTuner:
    """One tune: the trials, in order, against a deadline."""

    def __init__(
        self,
        runner: JobRunner,
        sample: Sample,
        space: tuple[Dimension, ...],
        container_space: tuple[Dimension, ...],
        budget: float,
        seed: int,
    ):
        self.runner, self.sample, self.space, self.container_space = runner, sample, space, container_space
        self.budget, self.seed = budget, seed
        self.started = time.monotonic()
        self.deadline = self.started + budget
        self.search = HillClimb(space, seed, margin=WINNER_MARGIN)
        self.trials: list[JobTrial] = []
        self.seen: dict[tuple[object, ...], float] = {}  # a setting's effect -> its score
        self.refused = 0  # settings the job's validation refused
        self.estimate = 0.0  # the longest trial so far
        self.progress = Progress()
        self.recheck: str | None = None
        self.notes: list[str] = []

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def elapsed(self) -> str:
        return f"{time.monotonic() - self.started:,.0f} s of {self.budget:,.0f} s"

    def draw(self, trial: JobTrial, doing: str) -> None:
        count = f"~{len(self.trials) + int(max(0.0, self.remaining()) // self.estimate)}" if self.estimate else "?"
        best = max(self.trials, key=lambda t: t.score, default=None)
        best_text = f"{best.score:,.1f} records/s (#{best.number})" if best and best.score else "-"
        where = f"setting {trial.number} of {count} ({trial.description})"
        self.progress(f"tune: {where}: {doing}  {self.elapsed()}  best {best_text}")

    def _on_progress(self, trial: JobTrial) -> Callable[[Stats], None] | None:
        """Records done, redrawn during a job on a terminal (a log gets one line per step, not per batch)."""
        if not self.progress.redraw:
            return None
        last = [0.0]

        def update(stats: Stats) -> None:
            if time.monotonic() - last[0] >= DRAW_INTERVAL:
                last[0] = time.monotonic()
                self.draw(trial, f"job: {stats.records_done:,} of {self.sample.records:,} records")

        return update

    def _effect(self, candidate: Candidate) -> tuple[object, ...]:
        """Equal for two settings that run the same job on the same stack."""
        job = job_fields(candidate, self.space)
        if job.get("strategy") == "SingleRecord":
            job.pop("max_payload", None)  # a limit then, never reached by records that fit
        return (tuple(sorted(candidate.environment(self.container_space).items())), tuple(sorted(job.items())))

    def _refusal(self, job: dict[str, Value]) -> str | None:
        try:
            params: dict[str, Any] = {**job, "data": "-", "output_path": "-"}
            TransformJob.create(None, **params)
        except ValidationError as exc:
            return str(exc)
        return None

    def run(self) -> None:
        while not self.trials or self.remaining() >= self.estimate + self.recheck_estimate():
            candidate = self.search.ask()
            if candidate is None:
                break
            effect = self._effect(candidate)
            if effect in self.seen or self._refusal(job_fields(candidate, self.space)):
                self.refused += effect not in self.seen
                self.search.tell(candidate, self.seen.get(effect, 0.0))
                continue
            trial = self.evaluate(candidate)
            self.trials.append(trial)
            self.seen[effect] = trial.score
            self.estimate = max(self.estimate, trial.seconds)
            groups = trial.measured.groups if trial.measured else None
            if len(self.trials) == 1 and (note := freeze_idle_gunicorn(self.search, groups)):
                self.notes.append(note)
            self.search.tell(candidate, trial.score)
        self.progress.clear()
        if self.refused:
            self.notes.append(
                f"{self.refused} setting(s) skipped: the job's validation refuses them (MaxConcurrentTransforms x "
                "MaxPayloadInMB over 100 MB)"
            )

    def _trial(self, candidate: Candidate) -> JobTrial:
        environment = candidate.environment(self.container_space)
        job = job_fields(candidate, self.space)
        return JobTrial(len(self.trials) + 1, candidate, candidate.describe(self.space), environment, job)

    def evaluate(self, candidate: Candidate) -> JobTrial:
        trial, began = self._trial(candidate), time.monotonic()
        is_default = trial.number == 1
        self.draw(trial, "starting the stack")
        try:
            timeout = max(1.0, min(300.0, self.remaining()))
            best = self.search.best  # (the search's: a setting within noise of it does not replace it)
            keep = best.environment(self.container_space) if best is not None else None
            if self.runner.stack(trial.environment, trial.job, self.sample.warm_up, timeout, keep):
                trial.start_seconds = time.monotonic() - began
            self.draw(trial, f"job on {self.sample.records:,} records")
            trial.measured = self.runner.job(
                trial.environment, trial.job, self.sample.folder, self._on_progress(trial), MIN_JOB_SECONDS
            )
        except ContainerError as exc:
            if is_default:
                raise TuneError(f"The stack with the default settings did not start: {exc}") from None
            trial.error = str(exc).splitlines()[0]
        except JobFailed as exc:
            if is_default:
                raise TuneError(f"The model failed on the sample with the default settings: {exc}") from None
            trial.error = str(exc)
        finally:
            self.progress.clear()
        trial.seconds = time.monotonic() - began
        if is_default and self.remaining() < 0:
            raise TuneError(
                f"budget too small: the defaults' job on the sample took {trial.seconds:.0f} s, stack start included, "
                f"more than the {self.budget:g} s budget; give more (e.g. --budget 5m) or a smaller --sample"
            )
        return trial

    def recheck_estimate(self) -> float:
        """A recheck's time: two stack starts and its rounds."""
        start = max((t.start_seconds for t in self.trials), default=0.0)
        run = max((t.measured.runs * t.measured.seconds for t in self.trials if t.measured), default=0.0)
        return 2 * start + 2 * RECHECK_ROUNDS * run + 1.0

    def winner(self) -> JobTrial:
        """The fastest setting, unless within noise of the defaults or not confirmed by the recheck."""
        default = self.trials[0]
        best = max(self.trials, key=lambda t: t.score)  # the first of equals: the defaults win a tie
        if best is default or best.score < default.score * (1 + WINNER_MARGIN):
            return default
        return self.rechecked(best)

    def rechecked(self, winner: JobTrial) -> JobTrial:
        """The winner, or the defaults when, measured again in alternating rounds (both stacks up), the winner's
        median records/s is not ahead by more than the margin."""
        default = self.trials[0]
        if self.remaining() < self.recheck_estimate():
            self.recheck = "not rechecked against the defaults: the budget ran out"
            return winner
        rates: dict[int, list[float]] = {default.number: [], winner.number: []}
        pairs = [default, winner]
        try:
            for trial, other in zip(pairs, pairs[::-1], strict=True):  # each keeps the other's stack up
                self.progress(f"tune: recheck of #{winner.number}: starting #{trial.number}'s stack  {self.elapsed()}")
                timeout = max(1.0, self.remaining())
                self.runner.stack(trial.environment, trial.job, self.sample.warm_up, timeout, other.environment)
            for round_ in range(RECHECK_ROUNDS):
                for trial in pairs if round_ % 2 == 0 else pairs[::-1]:
                    self.progress(
                        f"tune: recheck of #{winner.number} against the defaults: round {round_ + 1} of "
                        f"{RECHECK_ROUNDS}, #{trial.number}  {self.elapsed()}"
                    )
                    measured = self.runner.job(trial.environment, trial.job, self.sample.folder, None, MIN_JOB_SECONDS)
                    rates[trial.number].append(measured.rate)
        except (ContainerError, JobFailed) as exc:
            self.recheck = f"not rechecked against the defaults: {str(exc).splitlines()[0]}"
            return winner
        finally:
            self.progress.clear()
        ahead, self.recheck = recheck_verdict(
            winner.number, rates[winner.number], rates[default.number], "records/s", 1
        )
        return winner if ahead else default


def run_tuner(tuner: TransformTuner) -> JobTrial:
    """Run the search and pick the winner; the runner's stacks are stopped whatever happens."""
    try:
        tuner.run()
        return tuner.winner()
    finally:
        tuner.runner.close()
