"""The media-type table (media_types.py) and its users: the default handler (codecs.py) and the Batch Transform
runner (its DataProcessing and job validation) accept exactly the same names, aliases included."""

import json

import pytest
from sagemaker_tfs import HandlerError, codecs
from sagemaker_tfs.shared import media_types
from sagemaker_tfs.shared.media_types import Format
from sagemaker_tfs.transform.dataprocessing import DataProcessing, data_format
from sagemaker_tfs.transform.job import TransformJob

JSON_LINES_NAMES = ["application/jsonlines", "application/jsons", "application/x-jsonlines", "application/jsonl"]
EVERY_NAME = ["application/json", *JSON_LINES_NAMES, "text/csv"]
NOT_IN_THE_TABLE = ["application/x-npz", "text/plain", "application/json-seq", "application/x-recordio-protobuf"]
BODIES = {
    Format.JSON: b"1\n[2]\n",  # JSON values on lines (a flat list is one instance)
    Format.JSON_LINES: b"1\n[2]\n",
    Format.CSV: b"1\n2\n",
}


def test_the_table():
    assert media_types.names(Format.JSON, Format.JSON_LINES, Format.CSV) == tuple(EVERY_NAME)
    assert media_types.names(Format.JSON_LINES) == tuple(JSON_LINES_NAMES)
    for name in JSON_LINES_NAMES:
        assert media_types.lookup(name.upper() + "; charset=utf-8").name == "application/jsonlines"
    assert [media_types.lookup(name) for name in NOT_IN_THE_TABLE + ["", None]] == [None] * 6
    assert media_types.format_of("Application/X-NPY") is Format.NPY


def test_npy_is_read_by_the_default_handler_and_opaque_to_the_transform_runner():
    """The runner cannot filter or join NPY records (neither can SageMaker): it sends them as they are."""
    assert "application/x-npy" in codecs.REQUEST_TYPES and codecs.negotiate("application/x-npy") == "application/x-npy"
    assert data_format("application/x-npy") is None


@pytest.mark.parametrize("name", EVERY_NAME)
def test_the_default_handler_reads_and_answers_every_name(name):
    request = codecs.tfs_request(BODIES[media_types.format_of(name)], name.upper() + "; charset=utf-8")
    assert json.loads(request) == {"instances": [1, 2] if name == "text/csv" else [1, [2]]}
    assert codecs.negotiate(name) == name
    answer = codecs.default_output_handler(
        type("Response", (), {"status_code": 200, "content": b'{"predictions": [3.5, 4]}', "headers": {}}),
        type("Context", (), {"accept_header": name}),
    )
    assert answer == ((b'{"predictions": [3.5, 4]}' if name == "application/json" else b"3.5\n4"), name)


@pytest.mark.parametrize("name", EVERY_NAME)
def test_the_transform_runner_reads_every_name(name):
    record_format = Format.CSV if name == "text/csv" else Format.JSON
    assert data_format(name + "; charset=utf-8") is record_format
    TransformJob.create(
        data="s3://b/in/",
        output_path="s3://b/out/",
        input_filter="$[0]",
        output_filter="$[0]",
        content_type=name,
        accept=name,
        split_type="Line",
    )  # valid: no ValidationError
    processing = DataProcessing.build("$[1]", None, None, name, name)
    assert processing.request_record(b"[7,8]" if record_format is Format.JSON else b"7,8") == b"8"


@pytest.mark.parametrize("name", NOT_IN_THE_TABLE)
def test_both_refuse_the_same_names(name):
    with pytest.raises(HandlerError) as error:
        codecs.tfs_request(b"1", name)
    assert error.value.status == 415
    assert codecs.negotiate(name) is None
    assert data_format(name) is None
