"""image_classifier: numpy images in binary, served both ways: through code/inference.py (context.predict_arrays),
and the same SavedModel with no script (the default handler's NPY path)."""

import io
import json

import numpy as np
import pytest
from clients import invoke, npy_body
from examples_support import EXAMPLES, build_module, model_outputs
from model_dirs import copy_model
from serve_stack import Stack

SAMPLES = EXAMPLES / "image_classifier" / "samples"
NPY = "application/x-npy"


@pytest.fixture(scope="module")
def example(packaged):
    return packaged("image_classifier")


@pytest.fixture(scope="module")
def build():
    return build_module("image_classifier")


@pytest.fixture(scope="module")
def held_out(build, example):
    """The held-out images (uint8), their labels, and the SavedModel's probabilities for them, run in-process."""
    images, labels = build.images(120)
    expected = model_outputs(example.export_dir / "1", images=images.astype(np.float32))
    assert list(expected) == ["probabilities"] and expected["probabilities"].dtype == np.float32
    return images, labels, expected["probabilities"]


@pytest.fixture(scope="module")
def stack(example):
    with Stack(example.model_dir) as stack:
        yield stack


@pytest.fixture(scope="module")
def plain_stack(example, tmp_path_factory):
    """The same export with no code folder: the default handler serves it."""
    model_dir = copy_model(example.export_dir, tmp_path_factory.mktemp("image_classifier_plain"), "model", ["1"])
    with Stack(model_dir) as stack:
        yield stack


def npy(answer) -> np.ndarray:
    assert (answer.status, answer.content_type) == (200, NPY), answer.body[:300]
    return np.load(io.BytesIO(answer.body), allow_pickle=False)


def test_held_out_images_as_npy_get_the_models_answers(stack, build, held_out):
    images, labels, probabilities = held_out
    response = invoke(stack, npy_body(images), NPY)
    assert (response.status, response.content_type) == (200, "application/json"), response.body[:300]
    predictions = response.json()["predictions"]
    classes = [p["class"] for p in predictions]
    assert classes == [build.CLASSES[i] for i in probabilities.argmax(axis=1)]
    np.testing.assert_allclose([p["probabilities"] for p in predictions], probabilities, atol=1e-6)
    assert np.mean(np.array(classes) == np.array(build.CLASSES)[labels]) >= 0.9  # chance is 1/3


def test_the_same_images_as_json_get_the_same_answer(stack, held_out):
    images = held_out[0][:30]
    as_npy = invoke(stack, npy_body(images), NPY)
    as_json = invoke(stack, json.dumps({"instances": images.tolist()}))
    assert as_json.status == 200
    assert as_json.json() == as_npy.json()


def test_accept_npy_gives_the_float32_probabilities(stack, held_out):
    images, _, probabilities = held_out
    answer = npy(invoke(stack, npy_body(images), NPY, Accept=NPY))
    assert answer.dtype == np.float32
    np.testing.assert_allclose(answer, probabilities, atol=1e-6)


def test_the_samples(stack):
    one = invoke(stack, (SAMPLES / "stripes.npy").read_bytes(), NPY).json()["predictions"]
    assert [p["class"] for p in one] == ["horizontal stripes"]
    three = invoke(stack, (SAMPLES / "three.npy").read_bytes(), NPY).json()["predictions"]
    assert [p["class"] for p in three] == ["horizontal stripes", "vertical stripes", "blob"]
    assert [sum(p["probabilities"]) for p in three] == pytest.approx([1.0] * 3, abs=1e-5)


def test_the_export_without_a_script_answers_npy_with_the_models_outputs(plain_stack, held_out):
    images, _, probabilities = held_out
    answer = npy(invoke(plain_stack, npy_body(images), NPY, Accept=NPY))
    assert answer.dtype == np.float32  # the model's own type, as the binary call returned it
    np.testing.assert_allclose(answer, probabilities, atol=1e-6)
    as_json = invoke(plain_stack, npy_body(images), NPY)  # TFS's own JSON: one row of probabilities per image
    assert as_json.status == 200
    np.testing.assert_allclose(as_json.json()["predictions"], probabilities, atol=1e-6)


@pytest.mark.parametrize(
    "body, content_type, accept, status, error",
    [
        (
            npy_body(np.zeros((2, 28, 28, 3), np.uint8)),
            NPY,
            None,
            400,
            "send one image [32, 32, 3] or a batch [N, 32, 32, 3] of numbers, not uint8 [2, 28, 28, 3]",
        ),
        (
            json.dumps({"instances": [[["a"] * 3] * 32] * 32}),
            "application/json",
            None,
            400,
            "send one image [32, 32, 3] or a batch [N, 32, 32, 3] of numbers, not <U1 [1, 32, 32, 3]",
        ),
        (b"not an array", NPY, None, 400, "cannot read the images (ValueError: "),
        (json.dumps([1, 2]), "application/json", None, 400, "cannot read the images (TypeError: "),
        (b"", NPY, None, 400, "the request body is empty: send images as NPY or JSON"),
        (
            b"1,2,3",
            "text/csv",
            None,
            415,
            'send images as application/x-npy or application/json ({"instances": ...}), not text/csv',
        ),
        (
            npy_body(np.zeros((32, 32, 3), np.uint8)),
            NPY,
            "text/csv",
            406,
            "accept application/json or application/x-npy, not text/csv",
        ),
    ],
    ids=["wrong-size", "strings", "not-npy", "no-instances", "empty", "csv", "accept-csv"],
)
def test_bad_requests_get_a_clear_error(stack, body, content_type, accept, status, error):
    response = invoke(stack, body, content_type, **({"Accept": accept} if accept else {}))
    assert (response.status, response.content_type) == (status, "application/json")
    assert response.json()["error"].startswith(error)
