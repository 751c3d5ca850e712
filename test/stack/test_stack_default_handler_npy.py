"""NPY on the default handler's path (no script), through the whole stack: the SageMaker SDK's NumpySerializer and
NumpyDeserializer (the defaults of its PyTorch and MXNet predictors) against a SavedModel."""

from __future__ import annotations

import io
import json

import numpy as np
import paths
import pytest
import serve_stack
from clients import npy_body
from stack_support import invoke, model_dir, pretty_predictions

NPY = "application/x-npy"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with serve_stack.Stack(model_dir(tmp_path_factory.mktemp("npy"), model=paths.HALF_PLUS_TWO)) as stack:
        yield stack


def test_an_npy_array_is_the_instances(stack):
    answer = invoke(stack, npy_body(np.array([1.0, 2.0, 5.0], dtype=np.float32)), NPY)
    assert (answer.status, answer.content_type, answer.text) == (
        200,
        "application/json",
        pretty_predictions("2.5, 3.0, 4.5"),
    )


@pytest.mark.parametrize(
    "body, content_type",
    [
        (npy_body(np.array([[1.0], [2.0]])), NPY),
        ("[[1.0], [2.0]]", "application/json"),
    ],
)
def test_accept_npy_answers_the_predictions_as_an_array(stack, body, content_type):
    answer = invoke(stack, body, content_type, Accept=NPY)
    assert (answer.status, answer.content_type) == (200, NPY)
    array = np.load(io.BytesIO(answer.body), allow_pickle=False)
    assert array.shape == (2, 1) and array.tolist() == [[2.5], [3.0]]


def test_large_images_go_in_binary_and_come_back_in_the_models_type(stack):
    images = np.random.default_rng(35).random((3, 224, 224, 3), dtype=np.float32)
    answer = invoke(stack, npy_body(images), NPY, Accept=NPY)
    assert (answer.status, answer.content_type) == (200, NPY)
    array = np.load(io.BytesIO(answer.body), allow_pickle=False)
    # float32, as the model answered it (the JSON way gave float64); half_plus_two computes in float32
    assert array.dtype == np.float32 and array.tobytes() == (images * np.float32(0.5) + np.float32(2)).tobytes()
    as_json = invoke(stack, npy_body(images), NPY)
    instances = invoke(stack, '{"instances": ' + json.dumps(images.tolist()) + "}", "application/json")
    assert (as_json.status, as_json.content_type, as_json.body) == (200, "application/json", instances.body)


def test_a_pickled_npy_body_is_refused(stack):
    answer = invoke(stack, npy_body(np.array([{"x": 1.0}], dtype=object), allow_pickle=True), NPY)
    assert (answer.status, answer.json()) == (
        400,
        {
            "error": (
                "cannot read the NPY body: it holds Python objects (a pickled payload), which are refused "
                "(allow_pickle=False); send an array of numbers or strings"
            )
        },
    )


def test_a_corrupt_npy_body_is_400(stack):
    answer = invoke(stack, npy_body(np.array([1.0, 2.0]))[:-4], NPY)
    assert answer.status == 400
    assert answer.json()["error"].startswith("cannot read the NPY body: ")


def test_predictions_that_are_not_an_array_of_numbers_are_406(stack):
    body = '{"signature_name": "classify_x_to_y", "examples": [{"x": 1.0}]}'
    answer = invoke(stack, body, "application/json", attributes="tfs-method=classify", Accept=NPY)
    assert (answer.status, answer.json()) == (
        406,
        {"error": "the predictions cannot be an NPY array: they mix strings and numbers; accept application/json"},
    )
