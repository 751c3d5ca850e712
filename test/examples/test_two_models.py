"""two_models and two_models_grpc: one request calls the encoder, then a classifier with the encoder's answer,
over REST or gRPC; the answer holds both; custom attributes choose the classifier."""

import json

import numpy as np
import pytest
from examples_support import EXAMPLES, held_out_digits, model_outputs
from sagemaker_tfs.testing import Endpoint

SAMPLE = EXAMPLES / "two_models" / "samples" / "digits.json"


@pytest.fixture(scope="module", params=["two_models", "two_models_grpc"])
def example(request, packaged):
    return packaged(request.param)


@pytest.fixture(scope="module")
def endpoint(example):
    with Endpoint(example.model_dir) as endpoint:  # the app in this process (sagemaker_tfs.testing)
        yield endpoint


def expected_answer(example, pixels, classifier_version):
    features = model_outputs(example.export_dir / "encoder" / "1", pixels=pixels)["features"]
    return features, model_outputs(example.export_dir / "classifier" / str(classifier_version), features=features)


def assert_answer(answer, features, predictions):
    np.testing.assert_allclose(answer["features"], features, atol=1e-4)
    assert [p["classes"] for p in answer["predictions"]] == predictions["classes"].tolist()
    np.testing.assert_allclose(
        [p["probabilities"] for p in answer["predictions"]], predictions["probabilities"], atol=1e-6
    )


def test_the_archive_holds_both_models_and_the_code(example):
    assert sorted(
        str(p.relative_to(example.model_dir)) for p in example.model_dir.glob("*/*") if p.parent.name != "code"
    ) == ["classifier/1", "classifier/2", "encoder/1"]
    assert (example.model_dir / "code" / "inference.py").is_file()


def test_held_out_digits_get_both_models_answers(endpoint, example):
    digits, labels = held_out_digits()
    pixels = digits.reshape(-1, 64).astype(np.float32)
    response = endpoint.invoke(json.dumps({"instances": pixels.astype(int).tolist()}))
    assert response.status == 200
    assert response.content_type == "application/json"
    answer = response.json()
    assert_answer(answer, *expected_answer(example, pixels, classifier_version=2))
    assert np.mean(np.array([p["classes"] for p in answer["predictions"]]) == labels) >= 0.9


def test_the_sample(endpoint):
    response = endpoint.invoke(SAMPLE.read_bytes())
    assert response.status == 200
    answer = response.json()
    assert [p["classes"] for p in answer["predictions"]] == [0, 7, 3]
    assert [len(f) for f in answer["features"]] == [16, 16, 16]


def test_csv_pixels_get_the_same_answer(endpoint):
    pixels = json.loads(SAMPLE.read_text())["instances"]
    csv = "".join(",".join(map(str, row)) + "\n" for row in pixels)
    assert endpoint.invoke(csv, "text/csv").json() == endpoint.invoke(SAMPLE.read_bytes()).json()


@pytest.mark.parametrize(
    "attributes, version",
    [
        ("tfs-model-version=1", 1),
        ("tfs-model-name=classifier,tfs-model-version=1", 1),
        ("tfs-model-name=classifier", 2),
    ],
)
def test_custom_attributes_choose_the_classifier(endpoint, example, attributes, version):
    pixels = np.array(json.loads(SAMPLE.read_text())["instances"], np.float32)
    response = endpoint.invoke(SAMPLE.read_bytes(), custom_attributes=attributes)
    assert response.status == 200
    assert_answer(response.json(), *expected_answer(example, pixels, version))


def test_the_versions_answer_differently(endpoint):
    newest = endpoint.invoke(SAMPLE.read_bytes()).json()["predictions"]
    first = endpoint.invoke(SAMPLE.read_bytes(), custom_attributes="tfs-model-version=1").json()["predictions"]
    assert not np.allclose([p["probabilities"] for p in first], [p["probabilities"] for p in newest], atol=1e-3)


def test_an_unknown_model_gets_404_naming_it(endpoint):
    response = endpoint.invoke(SAMPLE.read_bytes(), custom_attributes="tfs-model-name=missing")
    assert response.status == 404
    assert response.json()["error"].startswith("model missing: ")
