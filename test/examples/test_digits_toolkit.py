"""digits_toolkit (seed 001): model_fn / input_fn / predict_fn / output_fn with a scikit-learn model and no
SavedModel; images, NPY and JSON requests; Batch Transform over a folder (S3Prefix), a ManifestFile, and
InstanceCount=2."""

from __future__ import annotations

import json
from pathlib import Path

import joblib
import numpy as np
import processes
import pytest
from clients import invoke, npy_body
from examples_support import encode_image, held_out_digits
from sagemaker_tfs.transform import transform
from serve_stack import Stack

NO_SUPPORT = (
    "is not supported by this framework. Please implement input_fn to deserialize the request data or an "
    "output_fn to serialize the response."
)


@pytest.fixture(scope="module")
def example(packaged):
    return packaged("digits_toolkit")


@pytest.fixture(scope="module")
def stack(example):
    with Stack(example.model_dir) as stack:
        yield stack


@pytest.fixture(scope="module")
def expected(example):
    """The trained model's own answers for the held-out digits, and their labels."""
    images, labels = held_out_digits()
    model = joblib.load(example.export_dir / "model.joblib")
    return model.predict(images.reshape(-1, 64)).tolist(), labels.tolist()


def test_requirements_are_installed_but_not_the_toolkit_s_package(stack):
    processes.wait_for_log(
        stack,
        "'sagemaker-inference' is satisfied by the container's sagemaker_inference package, not installed",
        "/code/requirements.txt into ",
    )  # serve's "installing ..." line


@pytest.mark.parametrize("image_format", ["PNG", "JPEG"])
def test_held_out_images_get_the_model_s_answers(stack, expected, image_format):
    images, _ = held_out_digits()
    answers = [invoke(stack, encode_image(image, image_format), "application/x-image") for image in images[:60]]
    assert [a.status for a in answers] == [200] * 60
    predicted = [a.json()["predictions"][0] for a in answers]
    if image_format == "PNG":  # lossless: the model's very pixels
        assert predicted == expected[0][:60]
    assert np.mean(np.array(predicted) == np.array(expected[1][:60])) >= 0.9


def test_a_batch_as_npy_and_one_image_as_json(stack, expected):
    images, _ = held_out_digits()
    answer = invoke(stack, npy_body(images), "application/x-npy")
    assert (answer.status, answer.content_type) == (200, "application/json")
    assert answer.json() == {"predictions": expected[0]}
    answer = invoke(stack, json.dumps(images[0].tolist()).encode(), "application/json")
    assert answer.json() == {"predictions": expected[0][:1]}


def test_other_types_get_415_from_the_script(stack):
    answer = invoke(stack, b"1,2", "text/csv")
    assert (answer.status, answer.json()) == (415, {"error": f"Content type text/csv {NO_SUPPORT}"})


@pytest.fixture(scope="module")
def image_folder(tmp_path_factory) -> Path:
    """20 held-out digits as PNG files, as the story's prep_inference_data.sh writes them."""
    folder = tmp_path_factory.mktemp("mnist_sample")
    images, _ = held_out_digits()
    for i, image in enumerate(images[:20]):
        (folder / f"digit-{i:02d}.png").write_bytes(encode_image(image, "PNG"))
    return folder


def outputs(folder: Path) -> dict[str, int]:
    return {
        p.name.removesuffix(".png.out"): json.loads(p.read_text())["predictions"][0]
        for p in sorted(folder.glob("*.png.out"))
    }


def test_batch_transform_s3_prefix_manifest_and_two_instances(stack, example, image_folder, expected, tmp_path):
    wanted = {f"digit-{i:02d}": expected[0][i] for i in range(20)}
    prefix = transform(
        stack.url,
        data=str(image_folder),
        data_type="S3Prefix",
        content_type="application/x-image",
        output_path=str(tmp_path / "prefix"),
    )
    assert prefix["TransformJobStatus"] == "Completed"
    assert outputs(tmp_path / "prefix") == wanted

    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps([{"prefix": f"{image_folder}/"}, "digit-03.png", "digit-11.png"]))
    listed = transform(
        stack.url,
        data=str(manifest),
        data_type="ManifestFile",
        content_type="application/x-image",
        output_path=str(tmp_path / "manifest"),
    )
    assert listed["TransformJobStatus"] == "Completed"
    assert outputs(tmp_path / "manifest") == {"digit-03": wanted["digit-03"], "digit-11": wanted["digit-11"]}

    distributed = transform(
        str(example.archive),
        data=str(image_folder),
        content_type="application/x-image",
        output_path=str(tmp_path / "two"),
        instance_count=2,
        env={"SAGEMAKER_GUNICORN_WORKERS": "1"},
        work_dir=str(tmp_path / "work"),
    )
    assert distributed["TransformJobStatus"] == "Completed", distributed["LocalRun"]
    assert [o["Instance"] for o in distributed["LocalRun"]["Objects"]] == [0, 1] * 10
    assert outputs(tmp_path / "two") == wanted
