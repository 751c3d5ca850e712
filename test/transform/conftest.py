"""Fixtures shared by the transform tests: TFRecord files written by TensorFlow (the local S3 server is
test/conftest.py's)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TFRECORD_PAYLOADS = [b"1.0", b"2.5", b"", b"-4", b"x" * 1000]
TFRECORD_NUMBERS = [1.0, 2.5, -4.0, 10.0]


@pytest.fixture(scope="session")
def tfrecord_files(tmp_path_factory) -> Path:
    """data.tfrecord (TFRECORD_PAYLOADS) and numbers.tfrecord (TFRECORD_NUMBERS as text), written by
    tf.io.TFRecordWriter in a subprocess, so that TensorFlow stays out of the test process."""
    folder = tmp_path_factory.mktemp("tfrecord")
    files = {
        str(folder / "data.tfrecord"): [p.decode("latin-1") for p in TFRECORD_PAYLOADS],
        str(folder / "numbers.tfrecord"): [str(v) for v in TFRECORD_NUMBERS],
    }
    script = (
        "import json, sys, tensorflow as tf\n"
        "for path, payloads in json.loads(sys.argv[1]).items():\n"
        "    with tf.io.TFRecordWriter(path) as writer:\n"
        "        for payload in payloads:\n"
        "            writer.write(payload.encode('latin-1'))\n"
    )
    subprocess.run(
        [sys.executable, "-c", script, json.dumps(files)],
        check=True,
        capture_output=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    return folder


@pytest.fixture(scope="session")
def tfrecord_file(tfrecord_files) -> tuple[Path, list[bytes]]:
    return tfrecord_files / "data.tfrecord", TFRECORD_PAYLOADS


@pytest.fixture(scope="session")
def tfrecord_numbers(tfrecord_files) -> tuple[Path, list[float]]:
    return tfrecord_files / "numbers.tfrecord", TFRECORD_NUMBERS
