"""A seeded hill climb over the settings space, asked for one candidate at a time (ask/tell).

Not a grid: ten dimensions of two to six values are thousands of settings, and each costs a stack start and a
load ramp. The climb starts at the defaults and tries the neighbours of the best setting so far (one dimension one
step away), the tier-1 knobs first, in an order the seed shuffles; a neighbour that beats the best by more than
`margin` (measurement noise) becomes the best, and the step that helped is repeated in the same direction first
(coordinate descent). At a local optimum it jumps: the best with two dimensions set at random, so that a budget
left over is not spent idle. The same seed and the same scores give the same candidates.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from .settings_space import Candidate, Dimension, default_candidate
from .usage import GroupUsage

JUMP_TRIES = 200  # random jumps tried before the space counts as exhausted
GUNICORN_IDLE_CORES = 0.02  # gunicorn's CPU with the defaults below which its settings cannot matter


class HillClimb:
    """ask() the next candidate (None when every setting reachable was tried), then tell() its score."""

    def __init__(self, space: tuple[Dimension, ...], seed: int, margin: float = 0.03):
        self.space = space
        self.margin = margin
        self.random = random.Random(seed)
        self.tried: set[Candidate] = set()
        self.best: Candidate | None = None
        self.best_score = float("-inf")
        self._pending: list[Candidate] = [default_candidate(space)]
        self._asked: Candidate | None = None
        self.frozen: set[str] = set()  # dimensions measured not to matter: left at their defaults

    def freeze(self, fields: set[str]) -> None:
        """Stop varying these dimensions (call before tell(), so that the next neighbours leave them out)."""
        self.frozen |= fields

    def ask(self) -> Candidate | None:
        while True:
            while self._pending:
                candidate = self._pending.pop(0).canonical(self.space)
                if candidate not in self.tried:
                    self.tried.add(candidate)
                    self._asked = candidate
                    return candidate
            jump = self._jump()
            if jump is None:
                return None
            self._pending = [jump]

    def tell(self, candidate: Candidate, score: float) -> None:
        previous = self.best
        if previous is None or score > self.best_score * (1 + self.margin):
            self.best, self.best_score = candidate, score
            self._pending = list(self._repeat(previous, candidate)) + self._neighbours(candidate)
        elif not self._pending:
            self._pending = self._neighbours(self.best) if self.best is not None else []

    def _neighbours(self, centre: Candidate) -> list[Candidate]:
        found = []
        for dimension in centre.active(self.space):
            if dimension.field in self.frozen:
                continue
            index = dimension.values.index(centre[dimension.field])
            for step in (-1, 1):
                if 0 <= index + step < len(dimension.values):
                    key = (dimension.tier, self.random.random())
                    found.append((key, centre.replace(**{dimension.field: dimension.values[index + step]})))
        found.sort(key=lambda pair: pair[0])
        return [candidate for _, candidate in found if candidate.canonical(self.space) not in self.tried]

    def _repeat(self, before: Candidate | None, after: Candidate) -> Iterator[Candidate]:
        """The same step once more, where one dimension moved one step and can move another."""
        if before is None:
            return
        moved = [d for d in self.space if before[d.field] != after[d.field]]
        if len(moved) != 1:
            return
        dimension = moved[0]
        old, new = dimension.values.index(before[dimension.field]), dimension.values.index(after[dimension.field])
        further = new + (new - old)
        if abs(new - old) == 1 and 0 <= further < len(dimension.values):
            yield after.replace(**{dimension.field: dimension.values[further]})

    def _jump(self) -> Candidate | None:
        if self.best is None:
            return None
        for _ in range(JUMP_TRIES):
            free = [d for d in self.space if d.field not in self.frozen]
            chosen = self.random.sample(free, min(2, len(free)))
            candidate = self.best.replace(**{d.field: self.random.choice(d.values) for d in chosen})
            if candidate.canonical(self.space) not in self.tried:
                return candidate
        return None


def freeze_idle_gunicorn(search: HillClimb, groups: GroupUsage | None) -> str | None:
    """Leave gunicorn's workers and threads at their defaults when gunicorn used (almost) no CPU with the defaults:
    the requests bypass it (a model without a handler script), so its settings cannot matter and would only spend
    the budget. The note that says so, or None."""
    if groups is None or groups.cores["gunicorn"] >= GUNICORN_IDLE_CORES:
        return None
    search.freeze({"gunicorn_workers", "gunicorn_threads"})
    return (
        "gunicorn did no work with the defaults (nginx sends these requests straight to the model servers): its "
        "workers and threads were not tuned"
    )
