"""Where a signature run happens: through the batch scheduler, on a thread pool, or inline.

REST and gRPC requests are handled on the event loop and get an asyncio future of the outputs. Without batching, a
run of a small signature (Servable.is_small: lately under half a millisecond) runs inline on the loop, since a
thread hand-off costs more than such a run (measured on half_plus_three at concurrency 8: ~50% more requests/s
than through the pool). Any other run, and the first run of a signature (its cost is unknown), goes to a thread
pool (REST's of --rest_api_num_threads, gRPC's of --grpc_max_threads), so that a slow model never stalls the loop
(status requests, other models); TensorFlow releases the GIL while it runs, so the loop keeps parsing and
formatting other requests meanwhile. The batch scheduler applies the same rule to batches."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Sequence
from concurrent.futures import Executor, ThreadPoolExecutor

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
        self,
        servable: Servable,
        feeds: dict[str, np.ndarray],
        fetches: Sequence[str],
        api: str = "Predict",
        options: RunOptions | None = None,
        pool: Executor | None = None,
    ) -> asyncio.Future[Outputs]:
        """A future of the outputs (called on the event loop's thread). `api` labels the runtime metric; `options`
        and `pool` are a gRPC call's (its deadline, --grpc_max_threads), REST's by default."""
        started = time.perf_counter()
        future: asyncio.Future[Outputs]
        if self._scheduler is not None:
            future = self._scheduler.submit(servable, feeds, fetches)
        elif servable.is_small(fetches):
            future = self._loop.create_future()
            try:
                future.set_result(servable.run(feeds, fetches, options or self._rest_options))
            except Exception as exc:  # noqa: BLE001 - the request's error, reported through the future like a pool run's
                future.set_exception(exc)
        else:
            future = self._loop.run_in_executor(
                pool or self._pool, servable.run, feeds, fetches, options or self._rest_options
            )
        if self._metrics is not None:
            if future.done():
                self._ran(future, servable.name, api, started)
            else:
                future.add_done_callback(lambda done: self._ran(done, servable.name, api, started))
        return future

    def _ran(self, future: asyncio.Future, model_name: str, api: str, started: float) -> None:
        """TFS records a run's latency when it succeeded."""
        if self._metrics is not None and not future.cancelled() and future.exception() is None:
            self._metrics.runtime(model_name, api, started)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
