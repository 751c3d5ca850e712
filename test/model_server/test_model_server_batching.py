"""Server-side batching through real inference: the batch_reveal model returns, with each row, the size of the
batch the row was computed in, so merged (and padded) batches are visible to every caller."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import grpc
import numpy as np
import pytest
import requests
import tensorflow as tf
from model_server_support import ModelServer, model_config
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

# A batch runs when full (4 rows) or when its first task has waited 3 s (the time concurrent requests have to join
# it, ample on a loaded machine); one batch thread; a queue holds one batch.
BATCHING = """
max_batch_size { value: 4 }
batch_timeout_micros { value: 3000000 }
max_enqueued_batches { value: 1 }
num_batch_threads { value: 1 }
allowed_batch_sizes: 2
allowed_batch_sizes: 4
"""


@pytest.fixture(scope="module")
def batching_server(built_models, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("batching")
    (workdir / "batching.txt").write_text(BATCHING)
    config = model_config({"batch_reveal": built_models / "batch_reveal"})
    with ModelServer(
        config, workdir, "--enable_batching", f"--batching_parameters_file={workdir / 'batching.txt'}"
    ) as running:
        yield running


def predict(server: ModelServer, values: list[float]) -> requests.Response:
    return requests.post(server.url + "/v1/models/batch_reveal:predict", json={"instances": values}, timeout=60)


def concurrently(server: ModelServer, requests_values: list[list[float]]) -> list[dict]:
    with ThreadPoolExecutor(len(requests_values)) as pool:
        responses = list(pool.map(lambda values: predict(server, values), requests_values))
    assert [r.status_code for r in responses] == [200] * len(responses)
    return [r.json() for r in responses]


def test_concurrent_requests_are_merged_and_each_caller_gets_its_own_rows(batching_server):
    results = concurrently(batching_server, [[1.0], [2.0], [3.0], [4.0]])
    # the four one-row requests filled one batch of 4; each caller got 2x of its own value back
    assert results == [{"predictions": [{"batch_size": 4, "y": 2.0 * v}]} for v in (1.0, 2.0, 3.0, 4.0)]


def test_requests_of_several_rows_are_merged_and_split_back(batching_server):
    results = concurrently(batching_server, [[10.0, 20.0], [30.0]])
    # 3 rows merged, padded to the allowed batch size 4; the padding row is dropped
    assert results == [
        {"predictions": [{"batch_size": 4, "y": 20.0}, {"batch_size": 4, "y": 40.0}]},
        {"predictions": [{"batch_size": 4, "y": 60.0}]},
    ]


def test_a_lone_request_runs_after_the_timeout_padded_to_an_allowed_size(batching_server):
    response = predict(batching_server, [5.0])
    assert response.json() == {"predictions": [{"batch_size": 2, "y": 10.0}]}


def test_oversize_request_is_rejected(batching_server):
    response = predict(batching_server, [1.0] * 5)
    assert response.status_code == 400
    assert response.json() == {"error": "Task size 5 is larger than maximum input batch size 4"}


def test_full_queue_is_503(batching_server):
    waiting = threading.Thread(target=predict, args=(batching_server, [1.0]))
    waiting.start()  # one row, waiting up to 3 s in the only batch the queue may hold
    try:
        for _ in range(200):
            response = predict(batching_server, [1.0, 2.0, 3.0, 4.0])  # does not fit the open batch
            if response.status_code == 503:
                break
            assert response.status_code == 200  # ran before the waiting request was queued
        assert response.status_code == 503
        assert response.json() == {
            "error": "The batch scheduling queue to which this task was submitted is full; "
            "currently 1 batches enqueued and max_enqueued_batches is 1"
        }
    finally:
        waiting.join()


def test_scalar_input_cannot_be_batched(batching_server):
    response = requests.post(batching_server.url + "/v1/models/batch_reveal:predict", json={"inputs": 1.0}, timeout=60)
    assert response.status_code == 400
    assert response.json() == {"error": "Batching Run() input tensors must have at least one dimension"}


def test_grpc_and_rest_requests_share_batches(batching_server):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "batch_reveal"
    request.inputs["x"].CopyFrom(tf.make_tensor_proto(np.array([7.0, 8.0], np.float32)))
    with grpc.insecure_channel(f"127.0.0.1:{batching_server.grpc_port}") as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        with ThreadPoolExecutor(1) as pool:
            rest = pool.submit(predict, batching_server, [1.0, 2.0])
            response = stub.Predict(request, timeout=60)
        assert rest.result().status_code == 200
    assert list(response.outputs["y"].float_val) == [14.0, 16.0]
    assert list(response.outputs["batch_size"].int_val) == [4, 4]
    assert rest.result().json() == {"predictions": [{"batch_size": 4, "y": 2.0}, {"batch_size": 4, "y": 4.0}]}
