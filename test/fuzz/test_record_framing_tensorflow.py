"""TensorFlow's own TFRecord reader on the record_framing corpus: where it reads records, records.split gives the
same ones; where it reports a damaged file, split raises FramingError. One difference is ours: TensorFlow ends a file
quietly at fewer than a header's 12 bytes after its last record, split reports them as a truncated record. Per
corpus, not per fuzz input (TensorFlow's reader goes through a file and costs a few milliseconds an object)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sagemaker_tfs.transform.records import FramingError, split

from fuzz import targets
from fuzz.targets import record_framing

tf = pytest.importorskip("tensorflow")


def _objects() -> list[bytes]:
    """The TFRecord objects of the corpus (and seeds): as they are, and as the harness's encoder frames them."""
    found = []
    for data in [path.read_bytes() for path in targets.inputs("record_framing")] + record_framing.seeds():
        if not data or record_framing.SPLIT_TYPES[data[0] & 3] != "TFRecord":
            continue
        body = data[1:]
        if data[0] & 0x10:
            body = b"".join(record_framing.tfrecord(record) for record in body.split(record_framing.SEPARATOR))
        found.append(body)
    return found


def _tensorflow(path: Path) -> list[bytes] | None:
    """The records TensorFlow reads, or None where it reports data loss."""
    try:
        return list(tf.compat.v1.io.tf_record_iterator(str(path)))
    except tf.errors.DataLossError:
        return None


def test_split_reads_tfrecord_objects_as_tensorflow_does(tmp_path):
    objects = _objects()
    assert objects, "no TFRecord input in fuzz/corpus/record_framing"
    differ = []
    for index, body in enumerate(objects):
        path = tmp_path / f"{index}.tfrecord"
        path.write_bytes(body)
        try:
            ours = [record.data for record in split(body, "TFRecord")]
        except FramingError:
            ours = None
        theirs = _tensorflow(path)
        if ours is None and theirs is not None:
            read = sum(len(record_framing.tfrecord(record)) for record in theirs)
            if len(body) - read < 12 and [record.data for record in split(body[:read], "TFRecord")] == theirs:
                continue  # the difference above
        if ours != theirs:
            differ.append((body[:64], ours, theirs))
    assert differ == []
