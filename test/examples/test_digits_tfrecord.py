"""digits_tfrecord: Batch Transform over TFRecord files of tf.Example records, as in the seed's story:
SplitType=TFRecord, BatchStrategy=SingleRecord, AssembleWith=Line, concurrent requests, the model server's
request batching on. Every record gets one compact JSON line, in the order of the records."""

import json
import shutil

import numpy as np
import pytest
from examples_support import EXAMPLES, encode_image, held_out_digits, model_outputs
from sagemaker_tfs.transform import transform

BATCHING = {
    "SAGEMAKER_TFS_ENABLE_BATCHING": "true",
    "SAGEMAKER_TFS_MAX_BATCH_SIZE": "8",
    "SAGEMAKER_TFS_BATCH_TIMEOUT_MICROS": "20000",
}


def write_records(path, images: list[bytes], labels) -> None:
    """A TFRecord file of tf.Example records, written by TensorFlow as a training pipeline would."""
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(path)) as writer:
        for image, label in zip(images, labels, strict=True):
            features = {
                "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image])),
                "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
            }
            writer.write(tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString())


@pytest.fixture(scope="module")
def job(packaged, tmp_path_factory):
    """The transform job's description, its output folder and, per input file, its images and labels."""
    example = packaged("digits_tfrecord")
    work = tmp_path_factory.mktemp("digits-tfrecord-job")
    inputs, outputs = work / "input", work / "output"
    inputs.mkdir()
    digits, labels = held_out_digits()
    half = len(labels) // 2
    files = {
        "png.tfrecord": ([encode_image(d, "PNG") for d in digits[:half]], labels[:half]),
        "jpeg.tfrecord": ([encode_image(d, "JPEG") for d in digits[half:]], labels[half:]),
    }
    for name, (images, image_labels) in files.items():
        write_records(inputs / name, images, image_labels)
    shutil.copy(EXAMPLES / "digits_tfrecord" / "samples" / "digits.tfrecord", inputs)
    description = transform(
        str(example.archive),
        data=str(inputs),
        output_path=str(outputs),
        content_type="application/x-tfexample",
        split_type="TFRecord",
        strategy="SingleRecord",
        assemble_with="Line",
        max_concurrent_transforms=8,
        env=BATCHING,
    )
    return description, outputs, files, example


def output_lines(path) -> list[str]:
    text = path.read_text()
    assert text.endswith("\n")
    return text[:-1].split("\n")


def test_the_job_completes_with_one_request_per_record(job):
    description, _, files, _ = job
    assert description["TransformJobStatus"] == "Completed", description.get("FailureReason")
    records = sum(len(images) for images, _ in files.values()) + 2
    assert description["LocalRun"]["Summary"]["Records"] == records
    assert description["LocalRun"]["Summary"]["Requests"] == records


@pytest.mark.parametrize("name", ["png.tfrecord", "jpeg.tfrecord"])
def test_each_record_gets_the_models_answer_as_one_compact_json_line_in_order(job, name):
    _, outputs, files, example = job
    images, labels = files[name]
    lines = output_lines(outputs / f"{name}.out")
    assert len(lines) == len(images)
    answers = [json.loads(line) for line in lines]
    assert lines == [json.dumps(answer, separators=(",", ":")) for answer in answers]
    expected = model_outputs(example.export_dir / "1", image_bytes=images)
    classes = [answer["class"] for answer in answers]
    assert classes == expected["classes"].tolist()
    np.testing.assert_allclose([answer["probabilities"] for answer in answers], expected["probabilities"], atol=1e-6)
    assert np.mean(np.array(classes) == labels) >= 0.9


def test_the_sample_file(job):
    _, outputs, _, _ = job
    answers = [json.loads(line) for line in output_lines(outputs / "digits.tfrecord.out")]
    assert [answer["class"] for answer in answers] == [7, 3]
