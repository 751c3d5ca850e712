"""The candidate settings: the container's own variables (config.Settings' fields), each with a short list of
values, ordered, that a search steps along. Ranges come from the core count, since every count the container
defaults to (workers, batch threads) is one per core."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from ..config import VARIABLES, Settings

Value = int | bool | str

# Only with batching on: off, TFS ignores them, so a search does not spend a start on them.
BATCH_PARAMETERS = ("tfs_max_batch_size", "tfs_batch_timeout_micros", "tfs_num_batch_threads")


@dataclass(frozen=True)
class Dimension:
    """One setting: its Settings field, its values in order (neighbours are adjacent), its default, and its tier
    (1: the knobs that most often move throughput, tried first; 2: the finer ones)."""

    field: str
    values: tuple[Value, ...]
    default: Value
    tier: int
    label: str  # short, for the table

    @property
    def variable(self) -> str:
        return VARIABLES[self.field].name


def _counts(*counts: int) -> tuple[int, ...]:
    return tuple(sorted({max(1, count) for count in counts}))


def dimensions(cores: int) -> tuple[Dimension, ...]:
    """The space for a machine with `cores` cores; each default is the container's own default there."""
    return (
        Dimension("gunicorn_workers", _counts(1, cores // 2, cores, 2 * cores), cores, 1, "workers"),
        Dimension("tfs_instance_count", _counts(1, 2, cores // 2, cores), 1, 1, "instances"),
        Dimension("tfs_enable_batching", (False, True), False, 1, "batching"),
        Dimension("gunicorn_threads", (1, 2, 4), 1, 2, "threads"),
        Dimension("tfs_intra_op_parallelism", (0, *_counts(1, cores // 2, cores)), 0, 2, "intra-op"),
        Dimension("tfs_inter_op_parallelism", (0, *_counts(1, 2)), 0, 2, "inter-op"),
        Dimension("omp_num_threads", tuple(dict.fromkeys(("1", str(cores)))), "1", 2, "OMP"),
        Dimension("tfs_max_batch_size", (2, 4, 8, 16, 32, 64), 8, 2, "max batch"),
        Dimension("tfs_batch_timeout_micros", (0, 250, 1000, 4000), 1000, 2, "timeout µs"),
        Dimension("tfs_num_batch_threads", _counts(1, cores // 2, cores, 2 * cores), cores, 2, "batch threads"),
    )


@dataclass(frozen=True)
class Candidate:
    """One setting: a value for every dimension (hashable, so that a search remembers what it tried)."""

    values: tuple[tuple[str, Value], ...]

    @classmethod
    def of(cls, values: Mapping[str, Value]) -> Candidate:
        return cls(tuple(sorted(values.items())))

    def __getitem__(self, field: str) -> Value:
        return dict(self.values)[field]

    def replace(self, **values: Value) -> Candidate:
        return Candidate.of({**dict(self.values), **values})

    def active(self, space: tuple[Dimension, ...]) -> Iterator[Dimension]:
        """The dimensions that matter for this setting (the batch parameters only with batching on)."""
        batching = bool(self["tfs_enable_batching"])
        return (d for d in space if batching or d.field not in BATCH_PARAMETERS)

    def canonical(self, space: tuple[Dimension, ...]) -> Candidate:
        """Equal for two settings that start the same stack: the batch parameters at their defaults when off."""
        if self["tfs_enable_batching"]:
            return self
        return self.replace(**{d.field: d.default for d in space if d.field in BATCH_PARAMETERS})

    def environment(self, space: tuple[Dimension, ...]) -> dict[str, str]:
        """The variables that give this setting, every one spelled out (the defaults of the machine where a model
        is deployed may differ from this one's), as CreateModel's Environment takes them."""
        return Settings.env_of(**{d.field: self[d.field] for d in self.active(space)})

    def describe(self, space: tuple[Dimension, ...]) -> str:
        """What differs from the defaults, e.g. `workers=4 batching=on(max 16, 1000 µs, 2 threads)`; `defaults`."""
        parts = []
        for d in self.active(space):
            value = self[d.field]
            if value != d.default or (d.field in BATCH_PARAMETERS and self["tfs_enable_batching"]):
                shown = ("on" if value else "off") if isinstance(value, bool) else str(value)
                parts.append(f"{d.label}={shown}")
        return " ".join(parts) or "defaults"


def default_candidate(space: tuple[Dimension, ...]) -> Candidate:
    return Candidate.of({d.field: d.default for d in space})
