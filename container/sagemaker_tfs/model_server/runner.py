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
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import numpy as np

from .batching import BatchScheduler
from .servable import RunOptions, Servable

Outputs = list[np.ndarray]


class Runner:
    def __init__(self, loop: asyncio.AbstractEventLoop, scheduler: BatchScheduler | None, rest_threads: int,
                 rest_timeout_ms: int):
        self._loop = loop
        self._scheduler = scheduler
        self._pool = ThreadPoolExecutor(rest_threads, thread_name_prefix="rest") if scheduler is None else None
        self._rest_options = RunOptions(rest_timeout_ms) if rest_timeout_ms > 0 else None

    def run_in_loop(self, servable: Servable, feeds: dict[str, np.ndarray],
                    fetches: Sequence[str]) -> asyncio.Future:
        """A future of the outputs (called on the event loop's thread; REST)."""
        if self._scheduler is not None:
            return self._scheduler.submit(servable, feeds, fetches)
        if servable.is_small(fetches):
            future = self._loop.create_future()
            try:
                future.set_result(servable.run(feeds, fetches, self._rest_options))
            except Exception as exc:  # the request's error, reported through the future like a pool run's
                future.set_exception(exc)
            return future
        return self._loop.run_in_executor(self._pool, servable.run, feeds, fetches, self._rest_options)

    def run_blocking(self, servable: Servable, feeds: dict[str, np.ndarray], fetches: Sequence[str],
                     timeout_seconds: float | None = None) -> Outputs:
        """The outputs, computed on the calling thread or by the batch scheduler (gRPC)."""
        if self._scheduler is not None:
            return self._scheduler.submit_threadsafe(servable, feeds, fetches).result()
        options = RunOptions(max(1, int(timeout_seconds * 1000))) if timeout_seconds else None
        return servable.run(feeds, fetches, options)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
