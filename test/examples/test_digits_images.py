"""digits_images: one PNG or JPEG image in (application/x-image), its digit and probabilities out."""

import io

import numpy as np
import pytest
import requests
from PIL import Image

from examples_support import EXAMPLES, encode_image, held_out_digits, model_outputs
from support import Stack

SAMPLES = EXAMPLES / "digits_images" / "samples"


@pytest.fixture(scope="module")
def example(packaged):
    return packaged("digits_images")


@pytest.fixture(scope="module")
def stack(example):
    with Stack(example.model_dir) as stack:
        yield stack


def classify(url: str, image: bytes, content_type: str = "application/x-image",
             session: requests.Session | None = None) -> requests.Response:
    return (session or requests).post(f"{url}/invocations", data=image, headers={"Content-Type": content_type})


@pytest.mark.parametrize("image_format", ["PNG", "JPEG"])
def test_held_out_digits_get_the_models_answers(stack, example, image_format):
    images, labels = held_out_digits()
    encoded = [encode_image(image, image_format) for image in images]
    with requests.Session() as session:
        responses = [classify(stack.url, image, session=session) for image in encoded]
    assert [r.status_code for r in responses] == [200] * len(encoded)
    answers = [r.json() for r in responses]
    expected = model_outputs(example.export_dir / "1", image_bytes=encoded)
    classes = [answer["class"] for answer in answers]
    assert classes == expected["classes"].tolist()
    np.testing.assert_allclose([answer["probabilities"] for answer in answers], expected["probabilities"], atol=1e-6)
    assert np.mean(np.array(classes) == labels) >= 0.9


@pytest.mark.parametrize("sample, content_type, digit", [
    ("7.png", "image/png", 7),
    ("3.jpg", "application/x-image", 3),
])
def test_samples(stack, sample, content_type, digit):
    response = classify(stack.url, (SAMPLES / sample).read_bytes(), content_type)
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    answer = response.json()
    assert answer["class"] == digit
    assert len(answer["probabilities"]) == 10
    assert int(np.argmax(answer["probabilities"])) == digit
    assert sum(answer["probabilities"]) == pytest.approx(1.0, abs=1e-5)


def test_colour_images_of_any_size_are_converted_by_the_model(stack):
    grey = (SAMPLES / "7.png").read_bytes()
    colour = io.BytesIO()
    Image.open(io.BytesIO(grey)).convert("RGB").resize((100, 100), Image.NEAREST).save(colour, "PNG")
    assert classify(stack.url, colour.getvalue()).json()["class"] == 7


def test_bytes_that_are_not_an_image_get_400_from_the_model(stack):
    response = classify(stack.url, b"this is not an image")
    assert response.status_code == 400
    assert "Unknown image file format" in response.json()["error"]


def test_other_content_types_get_415(stack):
    response = classify(stack.url, b'{"instances": [1]}', "application/json")
    assert response.status_code == 415
    assert response.json() == {"error": "send one PNG or JPEG image as application/x-image, not application/json"}


def test_an_empty_body_gets_400(stack):
    response = classify(stack.url, b"")
    assert response.status_code == 400
    assert response.json() == {"error": "the request body is empty: send one PNG or JPEG image"}
