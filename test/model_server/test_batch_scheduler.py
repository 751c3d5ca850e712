"""The batch scheduler alone, with a stand-in servable (a numpy function) so that where and how batches run is
observable: the real-model behaviour is in test_model_server_batching.py."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest
from sagemaker_tfs.model_server.batch_scheduler import BatchingParameters, BatchRows, BatchScheduler
from sagemaker_tfs.shared import tfs_json_response as json_response
from sagemaker_tfs.shared.error_codes import ServingError, invalid_argument


class DoublingServable:
    """y = 2x; records each run's batch size and thread. `small` plays Servable.is_small."""

    def __init__(self, small: bool, fail: bool = False):
        self.small, self.fail = small, fail
        self.runs: list[tuple[int, str]] = []

    def is_small(self, fetches) -> bool:
        return self.small

    def run(self, feeds, fetches, options=None):
        x = feeds["x:0"]
        self.runs.append((x.shape[0], threading.current_thread().name))
        if self.fail:
            raise invalid_argument("no")
        return [x * 2]


def submit_together(servable: DoublingServable, rows: list[list[float]], **params) -> list:
    """Submit one task per entry of rows in one loop iteration; the outputs (or errors) in order."""

    async def main():
        scheduler = BatchScheduler(BatchingParameters(num_batch_threads=1, **params), asyncio.get_running_loop())
        try:
            futures = [scheduler.submit(servable, {"x:0": np.array(r, np.float32)}, ["y:0"]) for r in rows]
            return await asyncio.gather(*futures, return_exceptions=True)
        finally:
            scheduler.close()

    return asyncio.run(main())


def test_a_small_models_tasks_of_one_loop_iteration_run_as_one_batch_on_the_loop():
    servable = DoublingServable(small=True)
    results = submit_together(servable, [[1.0], [2.0, 3.0], [4.0]])
    assert servable.runs == [(4, threading.main_thread().name)]
    assert [r[0].tolist() for r in results] == [[2.0], [4.0, 6.0], [8.0]]


def test_other_models_run_on_a_batch_thread():
    servable = DoublingServable(small=False)
    results = submit_together(servable, [[1.0], [2.0]])
    assert [name.startswith("batch") for _, name in servable.runs] == [True] * len(servable.runs)
    assert sum(size for size, _ in servable.runs) == 2
    assert [r[0].tolist() for r in results] == [[2.0], [4.0]]


@pytest.mark.parametrize("small", [True, False])
def test_a_failed_batch_fails_each_of_its_tasks(small):
    results = submit_together(DoublingServable(small=small, fail=True), [[1.0], [2.0]])
    assert [type(r) for r in results] == [ServingError, ServingError]
    assert [r.message for r in results] == ["no", "no"]


def test_full_batches_close_and_the_next_ones_open():
    servable = DoublingServable(small=True)
    results = submit_together(servable, [[1.0, 2.0], [3.0, 4.0], [5.0]], max_batch_size=3, max_enqueued_batches=5)
    assert [size for size, _ in servable.runs] == [2, 3]  # [1, 2] alone: [3, 4] did not fit; then [3, 4] + [5]
    assert [r[0].tolist() for r in results] == [[2.0, 4.0], [6.0, 8.0], [10.0]]


def test_each_task_gets_its_rows_of_the_batch_and_their_json_text_is_cut_from_the_batchs():
    results = submit_together(DoublingServable(small=True), [[1.0], [2.5, 3.0]])
    first, second = (r[0] for r in results)
    assert isinstance(first, BatchRows) and first.memo is second.memo
    assert json_response.predict_body({"y": second}, True) == b'{\n    "predictions": [5.0, 6.0\n    ]\n}'
    assert json_response.predict_body({"y": first}, True) == b'{\n    "predictions": [2.0\n    ]\n}'
    assert first.reshape(-1).whole is None  # arrays derived from a task's rows are plain views
