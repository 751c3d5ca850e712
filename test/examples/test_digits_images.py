"""digits_images: one PNG or JPEG image in (application/x-image), its digit and probabilities out."""

import io

import numpy as np
import pytest
from examples_support import EXAMPLES, encode_image, held_out_digits, model_outputs
from PIL import Image
from sagemaker_tfs.testing import Endpoint

SAMPLES = EXAMPLES / "digits_images" / "samples"


@pytest.fixture(scope="module")
def example(packaged):
    return packaged("digits_images")


@pytest.fixture(scope="module")
def endpoint(example):
    with Endpoint(example.model_dir) as endpoint:  # the app in this process (sagemaker_tfs.testing)
        yield endpoint


@pytest.mark.parametrize("image_format", ["PNG", "JPEG"])
def test_held_out_digits_get_the_models_answers(endpoint, example, image_format):
    images, labels = held_out_digits()
    encoded = [encode_image(image, image_format) for image in images]
    responses = [endpoint.invoke(image, "application/x-image") for image in encoded]
    assert [r.status for r in responses] == [200] * len(encoded)
    answers = [r.json() for r in responses]
    expected = model_outputs(example.export_dir / "1", image_bytes=encoded)
    classes = [answer["class"] for answer in answers]
    assert classes == expected["classes"].tolist()
    np.testing.assert_allclose([answer["probabilities"] for answer in answers], expected["probabilities"], atol=1e-6)
    assert np.mean(np.array(classes) == labels) >= 0.9


@pytest.mark.parametrize(
    "sample, content_type, digit",
    [
        ("7.png", "image/png", 7),
        ("3.jpg", "application/x-image", 3),
    ],
)
def test_samples(endpoint, sample, content_type, digit):
    response = endpoint.invoke((SAMPLES / sample).read_bytes(), content_type)
    assert (response.status, response.content_type) == (200, "application/json")
    answer = response.json()
    assert answer["class"] == digit
    assert len(answer["probabilities"]) == 10
    assert int(np.argmax(answer["probabilities"])) == digit
    assert sum(answer["probabilities"]) == pytest.approx(1.0, abs=1e-5)


def test_colour_images_of_any_size_are_converted_by_the_model(endpoint):
    grey = (SAMPLES / "7.png").read_bytes()
    colour = io.BytesIO()
    Image.open(io.BytesIO(grey)).convert("RGB").resize((100, 100), Image.NEAREST).save(colour, "PNG")
    assert endpoint.invoke(colour.getvalue(), "application/x-image").json()["class"] == 7


def test_bytes_that_are_not_an_image_get_400_from_the_model(endpoint):
    response = endpoint.invoke(b"this is not an image", "application/x-image")
    assert response.status == 400
    assert "Unknown image file format" in response.json()["error"]


def test_other_content_types_get_415(endpoint):
    response = endpoint.invoke(b'{"instances": [1]}')
    assert response.status == 415
    assert response.json() == {"error": "send one PNG or JPEG image as application/x-image, not application/json"}


def test_an_empty_body_gets_400(endpoint):
    response = endpoint.invoke(b"", "application/x-image")
    assert response.status == 400
    assert response.json() == {"error": "the request body is empty: send one PNG or JPEG image"}
