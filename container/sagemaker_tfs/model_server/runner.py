"""Where a signature run happens: through the batch scheduler, on the REST worker threads, or inline.

REST requests (on the event loop) get a future of the outputs; gRPC requests (on gRPC's threads) block.
Without batching, a REST run of a small signature (Servable.is_small: lately under half a millisecond) runs
inline on the loop, since a thread hand-off costs more than such a run (measured on half_plus_three at
concurrency 8: ~50% more requests/s than through the pool). Any other run, and the first run of a signature
(its cost is unknown), goes to a thread pool of --rest_api_num_threads, so that a slow model never stalls the
loop (status requests, other models); TensorFlow releases the GIL while it runs, so the loop keeps parsing and
formatting other requests meanwhile. The batch scheduler applies the same rule to batches."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import numpy as np

from .batching import BatchScheduler
from .metrics import ModelServerMetrics
from .servable import RunOptions, Servable

Outputs = list[np.ndarray]


class Runner:
    def __init__(self, loop: asyncio.AbstractEventLoop, scheduler: BatchScheduler | None, rest_threads: int,
                 rest_timeout_ms: int, metrics: ModelServerMetrics | None = None):
        self._loop = loop
        self._metrics = metrics
        self._scheduler = scheduler
        self._pool = ThreadPoolExecutor(rest_threads, thread_name_prefix="rest") if scheduler is None else None
        self._rest_options = RunOptions(rest_timeout_ms) if rest_timeout_ms > 0 else None

    def run_in_loop(self, servable: Servable, feeds: dict[str, np.ndarray], fetches: Sequence[str],
                    api: str = "Predict") -> asyncio.Future:
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

    def run_blocking(self, servable: Servable, feeds: dict[str, np.ndarray], fetches: Sequence[str],
                     timeout_seconds: float | None = None, api: str = "Predict") -> Outputs:
        """The outputs, computed on the calling thread or by the batch scheduler (gRPC)."""
        started = time.perf_counter()
        if self._scheduler is not None:
            outputs = self._scheduler.submit_threadsafe(servable, feeds, fetches).result()
        else:
            options = RunOptions(max(1, int(timeout_seconds * 1000))) if timeout_seconds else None
            outputs = servable.run(feeds, fetches, options)
        if self._metrics is not None:
            self._metrics.runtime(servable.name, api, started)
        return outputs

    def _ran(self, future: asyncio.Future, model_name: str, api: str, started: float) -> None:
        """TFS records a run's latency when it succeeded."""
        if not future.cancelled() and future.exception() is None:
            self._metrics.runtime(model_name, api, started)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
