"""Server-side batching (`--enable_batching`): concurrent runs of one signature merged into one TensorFlow call.

Semantics of TFS's shared batch scheduler: each request is a task of size = its inputs' dimension 0. Tasks
with the same servable, input names and output names share a queue; they join the queue's open batch until it
would exceed max_batch_size, which closes it and opens a new one (a queue holds at most max_enqueued_batches
batches: beyond that, 503). A batch runs when closed, or when its oldest task has waited batch_timeout_micros,
on one of num_batch_threads threads; its inputs are concatenated on dimension 0 (padded up to the next
allowed_batch_sizes entry, and in other dimensions if pad_variable_length_inputs), and its outputs are split
back per task.

The scheduler's state lives in the asyncio event loop: requests are queued and batches formed there without
locks. A batch runs on a batch thread; but for a model whose runs lately took under half a millisecond
(Servable.is_small), it runs on the loop itself, at the end of the loop iteration that made it due, with every
task queued by then: handing so short a run to a thread, and the GIL back and forth, costs more than the run.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..shared.cpus import cpu_count
from ..shared.error_codes import Code, ServingError, invalid_argument
from . import protos
from .servable import Servable

if TYPE_CHECKING:
    from .metrics import ModelServerMetrics

log = logging.getLogger(__name__)


class BatchingConfigError(ValueError):
    """The batching parameters file cannot be used; the message says why."""


@dataclass(frozen=True)
class BatchingParameters:
    """TFS's BatchingParameters, with TFS's defaults for fields left out."""

    max_batch_size: int = 1000
    batch_timeout_micros: int = 0
    max_enqueued_batches: int = 10
    num_batch_threads: int = 0  # 0: one per core
    allowed_batch_sizes: tuple[int, ...] = ()
    pad_variable_length_inputs: bool = False
    thread_pool_name: str = "batch_threads"  # the label of the queueing-delay metric, as in TFS

    def __post_init__(self) -> None:
        if self.max_batch_size < 1:
            raise BatchingConfigError("max_batch_size must be positive")
        if self.max_enqueued_batches < 1:
            raise BatchingConfigError("max_enqueued_batches must be positive")
        if self.batch_timeout_micros < 0:
            raise BatchingConfigError("batch_timeout_micros must not be negative")
        sizes = self.allowed_batch_sizes
        if sizes:
            if any(b <= a for a, b in zip(sizes, sizes[1:], strict=False)) or sizes[0] < 1:
                raise BatchingConfigError("allowed_batch_sizes entries must be positive and increasing")
            if sizes[-1] != self.max_batch_size:
                raise BatchingConfigError(
                    "Last entry in allowed_batch_sizes must match max_batch_size; last entry "
                    f"was {sizes[-1]}; expected {self.max_batch_size}"
                )

    @property
    def threads(self) -> int:
        return self.num_batch_threads if self.num_batch_threads > 0 else cpu_count()


_INT64, _STRING, _BOOL = ".google.protobuf.Int64Value", ".google.protobuf.StringValue", ".google.protobuf.BoolValue"
# TFS's session_bundle_config.proto BatchingParameters: (name, number, type, wrapper type, repeated)
_BATCHING_FIELDS = (
    ("max_batch_size", 1, "TYPE_MESSAGE", _INT64, False),
    ("batch_timeout_micros", 2, "TYPE_MESSAGE", _INT64, False),
    ("max_enqueued_batches", 3, "TYPE_MESSAGE", _INT64, False),
    ("num_batch_threads", 4, "TYPE_MESSAGE", _INT64, False),
    ("thread_pool_name", 5, "TYPE_MESSAGE", _STRING, False),
    ("allowed_batch_sizes", 6, "TYPE_INT64", None, True),
    ("pad_variable_length_inputs", 7, "TYPE_BOOL", None, False),
    # accepted, not acted on (logged): TFS's later additions
    ("enable_large_batch_splitting", 8, "TYPE_MESSAGE", _BOOL, False),
    ("max_execution_batch_size", 9, "TYPE_MESSAGE", _INT64, False),
    ("batch_padding_policy", 10, "TYPE_MESSAGE", _STRING, False),
)


def parse_batching_parameters(text: str, source: str = "<batching parameters>") -> BatchingParameters:
    cls = protos.message_class(
        "sagemaker_tfs/batching_parameters.proto", (("BatchingParameters", _BATCHING_FIELDS),), "BatchingParameters"
    )
    message = protos.parse_text(cls, text, source, BatchingConfigError)
    for name in ("enable_large_batch_splitting", "max_execution_batch_size", "batch_padding_policy"):
        if message.HasField(name):
            log.warning("batching parameter %s is accepted but has no effect in this model server", name)
    values = {
        name: getattr(message, name).value
        for name in (
            "max_batch_size",
            "batch_timeout_micros",
            "max_enqueued_batches",
            "num_batch_threads",
            "thread_pool_name",
        )
        if message.HasField(name)
    }
    return BatchingParameters(
        allowed_batch_sizes=tuple(message.allowed_batch_sizes),
        pad_variable_length_inputs=message.pad_variable_length_inputs,
        **values,
    )


def load_batching_parameters(path: str | Path | None) -> BatchingParameters:
    """The parameters of a --batching_parameters_file (TFS's defaults when there is none)."""
    if not path:
        return BatchingParameters()
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise BatchingConfigError(f"cannot read batching parameters file {path}: {exc.strerror}") from None
    return parse_batching_parameters(text, str(path))


# ------------------------------------------------------------------------------------------------ scheduling


class _Task:
    __slots__ = ("feeds", "size", "future", "queued")

    def __init__(self, feeds: dict[str, np.ndarray], size: int, future: asyncio.Future, queued: float):
        self.feeds, self.size, self.future, self.queued = feeds, size, future, queued


class _Batch:
    __slots__ = ("tasks", "size", "started")

    def __init__(self) -> None:
        self.tasks: list[_Task] = []
        self.size = 0
        self.started = 0.0


class _Queue:
    def __init__(self, key: tuple, servable: Servable, fetches: tuple[str, ...]):
        self.key = key
        self.servable = servable
        self.fetches = fetches
        self.batches: collections.deque[_Batch] = collections.deque()  # the last one is open
        self.timer: asyncio.TimerHandle | None = None
        self.inline_due = False  # a _run_inline call is scheduled on the loop


def task_size(feeds: dict[str, np.ndarray]) -> int:
    if len(feeds) == 1:
        (array,) = feeds.values()
        if array.ndim:
            return array.shape[0]
    sizes = set()
    for array in feeds.values():
        if array.ndim == 0:
            raise invalid_argument("Batching Run() input tensors must have at least one dimension")
        sizes.add(array.shape[0])
    if len(sizes) != 1:
        raise invalid_argument("Batching Run() input tensors must have equal 0th-dimension size")
    return sizes.pop()


class BatchScheduler:
    """Queues runs and executes merged batches. submit() must be called on the loop's thread."""

    def __init__(
        self, params: BatchingParameters, loop: asyncio.AbstractEventLoop, metrics: ModelServerMetrics | None = None
    ):
        self.params = params
        self._metrics = metrics  # a ModelServerMetrics: TFS's batching metrics
        self._loop = loop
        self._threads = params.threads
        self._free = self._threads
        self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="batch")
        self._queues: dict[tuple, _Queue] = {}
        self._timeout = params.batch_timeout_micros / 1e6

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def submit(self, servable: Servable, feeds: dict[str, np.ndarray], fetches: Sequence[str]) -> asyncio.Future:
        """A future of the fetched outputs of this task's rows; raises the queue's rejections at once."""
        size = task_size(feeds)
        params = self.params
        if size > params.max_batch_size:
            raise invalid_argument(f"Task size {size} is larger than maximum input batch size {params.max_batch_size}")
        key = (id(servable), tuple(feeds) if len(feeds) == 1 else tuple(sorted(feeds)), tuple(fetches))
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = _Queue(key, servable, tuple(fetches))
        batches = queue.batches
        if not batches or batches[-1].size + size > params.max_batch_size:
            if len(batches) >= params.max_enqueued_batches:
                raise ServingError(
                    Code.UNAVAILABLE,
                    "The batch scheduling queue to which this task was submitted "
                    f"is full; currently {len(batches)} batches enqueued and "
                    f"max_enqueued_batches is {params.max_enqueued_batches}",
                )
            batches.append(_Batch())
        batch = batches[-1]
        now = time.monotonic()
        if not batch.tasks:
            batch.started = now
        future = self._loop.create_future()
        batch.tasks.append(_Task(feeds, size, future, now))
        batch.size += size
        if not queue.inline_due and (self._free > 0 or servable.is_small(queue.fetches)):
            self._dispatch()  # else a run due on the loop, or the next finished batch, dispatches
        return future

    def _due(self, queue: _Queue, now: float) -> bool:
        """Whether the queue's first batch may run: closed, full, or its oldest task waited batch_timeout."""
        batches = queue.batches
        if len(batches) > 1:
            return True
        return bool(batches) and (
            batches[0].size >= self.params.max_batch_size or now >= batches[0].started + self._timeout
        )

    def _dispatch(self) -> None:
        """Start due batches: a small model's on the loop (soon, with the tasks queued by then), others on free
        threads (queues in turn); arm a timer for open batches not yet due."""
        now = time.monotonic()
        for queue in list(self._queues.values()):
            if not queue.inline_due and self._due(queue, now) and queue.servable.is_small(queue.fetches):
                queue.inline_due = True
                self._loop.call_soon(self._run_inline, queue)
        while self._free > 0:
            started = False
            for queue in list(self._queues.values()):
                if self._free == 0:
                    break
                if queue.inline_due or not self._due(queue, now):
                    continue
                batch = self._dequeue(queue)
                if not queue.batches:
                    del self._queues[queue.key]  # empty: it must not keep an unloaded servable alive
                self._free -= 1
                started = True
                done = self._loop.run_in_executor(
                    self._pool, _run_batch, queue.servable, queue.fetches, batch.tasks, self.params
                )
                done.add_done_callback(functools.partial(self._finished, batch))
            if not started:
                break
        for queue in self._queues.values():
            if queue.batches and queue.timer is None and not queue.inline_due and not self._due(queue, now):
                due = queue.batches[0].started + self._timeout
                queue.timer = self._loop.call_at(self._loop.time() + max(0.0, due - now), self._timer_fired, queue)

    def _timer_fired(self, queue: _Queue) -> None:
        queue.timer = None
        self._dispatch()

    def _run_inline(self, queue: _Queue) -> None:
        """Run a small model's due batches on the loop's thread: for a run of a few microseconds, a hand-off to a
        batch thread (and the GIL back) costs more than the run (Runner's rule for unbatched runs)."""
        queue.inline_due = False
        now = time.monotonic()
        while self._due(queue, now) and queue.servable.is_small(queue.fetches):
            batch = self._dequeue(queue)
            try:
                results, error = _run_batch(queue.servable, queue.fetches, batch.tasks, self.params), None
            except Exception as exc:  # noqa: BLE001 - the batch's error is each of its tasks' error
                results, error = None, exc
            self._complete(batch, results, error)
        if not queue.batches and self._queues.get(queue.key) is queue:
            del self._queues[queue.key]
        self._dispatch()  # what remains: an open batch not yet due, or a model no longer small

    def _dequeue(self, queue: _Queue) -> _Batch:
        """The queue's first batch, about to run (TFS's batching metrics record it here)."""
        batch = queue.batches.popleft()
        if self._metrics is not None:
            now = time.monotonic()
            self._metrics.batch(
                [t.size for t in batch.tasks],
                batch.size,
                _padded_size(batch.size, self.params),
                [now - t.queued for t in batch.tasks],
            )
        return batch

    def _finished(self, batch: _Batch, done: asyncio.Future) -> None:
        self._free += 1
        error = done.exception() if not done.cancelled() else ServingError(Code.CANCELLED, "batch cancelled")
        self._complete(batch, None if error else done.result(), error)
        self._dispatch()

    @staticmethod
    def _complete(batch: _Batch, results: list | None, error: BaseException | None) -> None:
        for i, task in enumerate(batch.tasks):
            if not task.future.done():
                if error:
                    task.future.set_exception(error)
                else:
                    task.future.set_result(results[i])  # type: ignore[index]  # results, or an error


def _pad_to(array: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """array padded at the end of each dimension up to shape, with its first element (TFS's rule)."""
    padded = np.full(shape, array.reshape(-1)[0] if array.size else 0, dtype=array.dtype)
    padded[tuple(slice(0, n) for n in array.shape)] = array
    return padded


def _merge(name: str, tasks: list[_Task], pad_variable_length: bool) -> np.ndarray:
    parts = [task.feeds[name] for task in tasks]
    inner = {part.shape[1:] for part in parts}
    if len(inner) > 1:
        if not pad_variable_length:
            raise ServingError(
                Code.FAILED_PRECONDITION,
                f"Tensors with name '{name}' from different tasks have different shapes and padding "
                "is turned off. Set pad_variable_length_inputs to true, or ensure that all tensors "
                "with the same name have equal dimensions starting with the first dim.",
            )
        ranks = {len(shape) for shape in inner}
        if len(ranks) > 1:
            raise ServingError(
                Code.FAILED_PRECONDITION, f"Tensors with name '{name}' from different tasks have different ranks"
            )
        target = tuple(max(dims) for dims in zip(*inner, strict=True))
        parts = [_pad_to(part, (part.shape[0], *target)) for part in parts]
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _padded_size(size: int, params: BatchingParameters) -> int:
    """The size a batch of `size` rows runs at: the next allowed batch size, if any are configured."""
    return next((b for b in params.allowed_batch_sizes if b >= size), size)


def _run_batch(
    servable: Servable, fetches: tuple[str, ...], tasks: list[_Task], params: BatchingParameters
) -> list[list[BatchRows]]:
    """On a batch thread: merge, run once, split back. Returns each task's outputs."""
    size = sum(task.size for task in tasks)
    feeds = {name: _merge(name, tasks, params.pad_variable_length_inputs) for name in tasks[0].feeds}
    padded_size = _padded_size(size, params)
    if padded_size > size:  # pad with copies of the last task's first row; dropped from the outputs
        row = size - tasks[-1].size
        feeds = {
            name: np.concatenate([array, np.repeat(array[row : row + 1], padded_size - size, axis=0)])
            for name, array in feeds.items()
        }
    outputs = servable.run(feeds, fetches)
    for name, output in zip(fetches, outputs, strict=True):
        if output.ndim == 0:
            raise invalid_argument(f"Batched output tensor {name} has 0 dimensions")
        if output.shape[0] != padded_size:
            raise invalid_argument(
                f"Batched output tensor's 0th dimension does not equal the sum of the 0th "
                f"dimension sizes of the input tensors ({name}: {output.shape[0]} != "
                f"{padded_size})"
            )
    memos: list[dict] = [{} for _ in outputs]
    results, offset = [], 0
    for task in tasks:
        results.append(
            [
                BatchRows.of(output, offset, offset + task.size, memo)
                for output, memo in zip(outputs, memos, strict=True)
            ]
        )
        offset += task.size
    return results


class BatchRows(np.ndarray):
    """A task's rows [start, stop) of a batched output tensor: a numpy view that also knows the whole tensor and a
    memo its batch's tasks share, so that work on whole tensors (writing its rows as JSON text) is done once per
    batch instead of once per request. Arrays derived from it (slices, reshapes) are plain views without the link."""

    whole: np.ndarray | None = None
    start = stop = 0
    memo: dict | None = None

    @classmethod
    def of(cls, whole: np.ndarray, start: int, stop: int, memo: dict) -> BatchRows:
        rows = whole[start:stop].view(cls)
        rows.whole, rows.start, rows.stop, rows.memo = whole, start, stop, memo
        return rows

    def __array_finalize__(self, obj: object) -> None:
        self.whole = None
