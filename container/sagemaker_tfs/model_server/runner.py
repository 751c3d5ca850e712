"""Where a signature run happens: through the batch scheduler, on a thread pool, or inline.

REST requests (on the event loop) get an asyncio future of the outputs; gRPC requests (on gRPC's serving thread) a
concurrent one. Without batching, a run of a small signature (Servable.is_small: lately under half a millisecond)
runs inline on the calling thread, since a thread hand-off costs more than such a run (measured on half_plus_three
at concurrency 8: ~50% more requests/s than through the pool). Any other run, and the first run of a signature
(its cost is unknown), goes to a thread pool (REST's of --rest_api_num_threads, gRPC's of --grpc_max_threads), so
that a slow model never stalls the loop or gRPC's thread (status requests, other models); TensorFlow releases the
GIL while it runs, so they keep parsing and formatting other requests meanwhile. The batch scheduler applies the
same rule to batches."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from concurrent.futures import Future as ThreadFuture

import numpy as np

from .batch_scheduler import BatchScheduler
from .metrics import ModelServerMetrics
from .servable import RunOptions, Servable

Outputs = list[np.ndarray]


@functools.lru_cache(maxsize=64)
def _timeout_options(timeout_ms: int) -> RunOptions:
    return RunOptions(timeout_ms)


def deadline_options(seconds: float | None) -> RunOptions:
    """The run options of a gRPC call's deadline (None: none). Shared per millisecond: a client with a fixed timeout
    finds its few values cached instead of two TensorFlow buffers made per call."""
    return _timeout_options(max(1, int(seconds * 1000)) if seconds is not None else 0)


class Runner:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        scheduler: BatchScheduler | None,
        rest_threads: int,
        rest_timeout_ms: int,
        metrics: ModelServerMetrics | None = None,
    ):
        self._loop = loop
        self._metrics = metrics
        self._scheduler = scheduler
        self._pool = ThreadPoolExecutor(rest_threads, thread_name_prefix="rest") if scheduler is None else None
        self._rest_options = RunOptions(rest_timeout_ms) if rest_timeout_ms > 0 else None

    def run_in_loop(
        self, servable: Servable, feeds: dict[str, np.ndarray], fetches: Sequence[str], api: str = "Predict"
    ) -> asyncio.Future:
        """A future of the outputs (called on the event loop's thread; REST). `api` labels the runtime metric."""
        started = time.perf_counter()
        if self._scheduler is not None:
            future = self._scheduler.submit(servable, feeds, fetches)
        elif servable.is_small(fetches):
            future = self._loop.create_future()
            try:
                future.set_result(servable.run(feeds, fetches, self._rest_options))
            except Exception as exc:  # the request's error, reported through the future like a pool run's
                future.set_exception(exc)
        else:
            future = self._loop.run_in_executor(self._pool, servable.run, feeds, fetches, self._rest_options)
        if self._metrics is not None:
            if future.done():
                self._ran(future, servable.name, api, started)
            else:
                future.add_done_callback(lambda done: self._ran(done, servable.name, api, started))
        return future

    def run_threadsafe(
        self,
        servable: Servable,
        feeds: dict[str, np.ndarray],
        fetches: Sequence[str],
        api: str,
        options: RunOptions,
        pool: Executor,
    ) -> Outputs | ThreadFuture:
        """From any thread (gRPC): the outputs of an inline run, else a concurrent future of them, completed by
        `pool` or, with batching, on the event loop."""
        started = time.perf_counter()
        if self._scheduler is None and servable.is_small(fetches):
            outputs = servable.run(feeds, fetches, options)
            if self._metrics is not None:
                self._metrics.runtime(servable.name, api, started)
            return outputs
        if self._scheduler is not None:
            future = self._scheduler.submit_threadsafe(servable, feeds, fetches)
        else:
            future = pool.submit(servable.run, feeds, fetches, options)
        if self._metrics is not None:
            future.add_done_callback(lambda done: self._ran(done, servable.name, api, started))
        return future

    def _ran(self, future: asyncio.Future, model_name: str, api: str, started: float) -> None:
        """TFS records a run's latency when it succeeded."""
        if not future.cancelled() and future.exception() is None:
            self._metrics.runtime(model_name, api, started)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
