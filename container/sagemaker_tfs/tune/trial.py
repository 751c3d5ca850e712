"""One setting tried: its closed-loop ramp, its open-loop check, and the score the search climbs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .load import Measurement
from .settings_space import Candidate


@dataclass
class Trial:
    number: int  # 1, 2, ... in the order tried; 1 is the defaults
    candidate: Candidate
    description: str
    environment: dict[str, str]
    levels: list[Measurement] = field(default_factory=list)  # closed loop, by concurrency
    open_loop: Measurement | None = None
    bound_ms: float = 0.0
    error: str | None = None  # why it has no score (did not start, answered non-2xx)
    start_seconds: float = 0.0  # until /ping answered
    seconds: float = 0.0  # all of it, start and stop included

    def held(self, measurement: Measurement) -> bool:
        return measurement.errors == 0 and measurement.requests > 0 and measurement.p99_ms <= self.bound_ms

    @property
    def best(self) -> Measurement | None:
        """The closed-loop run with the most requests/s whose p99 held the bound (and no errors)."""
        held = [m for m in self.levels if self.held(m)]
        return max(held, key=lambda m: m.rate) if held else None

    @property
    def score(self) -> float:
        """Requests/s at the bound: what the search maximises (0: none held it)."""
        best = self.best
        return 0.0 if best is None or self.error else best.rate

    @property
    def open_loop_behind(self) -> bool:
        """Whether the open loop's generator sent late by more than half the bound: its p99 then says more about
        the generator (sharing the cores) than about the stack, and does not count against the setting."""
        return self.open_loop is not None and self.open_loop.behind_ms > self.bound_ms / 2

    @property
    def open_loop_held(self) -> bool:
        """Whether the open loop was measured and held the bound. One not measured (no time left, or its generator
        behind) is not known to hold: counted as holding, it ranked above every setting whose open loop was measured
        and missed, so that on image_classifier the generator's lag picked the winner (docs/tuning.md)."""
        return self.open_loop is not None and not self.open_loop_behind and self.held(self.open_loop)


def leader(trials: Sequence[Trial], margin: float) -> Trial | None:
    """The best setting before its recheck (trials[0] is the defaults): the most requests/s under the bound, a
    setting whose open loop held it first; the defaults when the best is within `margin` of them (changing nothing
    is the better advice). When the defaults' own open loop did not hold, the open loop sorts nothing: under a bound
    the defaults miss there too, it would favour whichever setting's rate was too low to queue (on image_classifier a
    batching setting 4% slower than the defaults over one 38% faster)."""
    scored = [t for t in trials if t.score > 0]
    if not scored:
        return None
    default = trials[0]
    judged = default.open_loop_held

    def rank(trial: Trial) -> tuple[bool, float]:
        return (trial.open_loop_held or not judged, trial.score)

    best = max(scored, key=rank)  # the first of equals: the defaults, tried first, win a tie
    if best is not default and rank(default)[0] == rank(best)[0] and best.score < default.score * (1 + margin):
        return default
    return best
