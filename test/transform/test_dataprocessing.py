"""InputFilter, JoinSource, OutputFilter and assembly, on the spec's worked examples and the seed's join output."""

import json

import pytest
from sagemaker_tfs.transform.dataprocessing import DataProcessing, RecordError, assemble, data_format, split_response


def csv_example() -> DataProcessing:
    return DataProcessing.build("$[1:]", "$[0,-1]", "Input", "text/csv", "text/csv")


def test_csv_worked_example():
    processing = csv_example()
    records = [b"id1,1,2", b"id2,3,4"]
    assert [processing.request_record(r) for r in records] == [b"1,2", b"3,4"]
    outputs = processing.outputs(records, b"3\n7\n")
    assert outputs == [b"id1,3", b"id2,7"]
    assert assemble(outputs, "Line") == b"id1,3\nid2,7\n"


def test_csv_join_keeps_quoting_valid():
    processing = DataProcessing.build(None, None, "Input", "text/csv", "text/csv")
    assert processing.outputs([b'"a,b",1'], b"0.5\n") == [b'"a,b",1,0.5']


def test_json_lines_worked_example():
    processing = DataProcessing.build(
        "$.features", "$['id','SageMakerOutput']", "Input", "application/jsonlines", "application/jsonlines"
    )
    record = b'{"id":"a","features":[1,2]}'
    assert processing.request_record(record) == b"[1,2]"
    [output] = processing.outputs([record], b'{"sum":3}')
    assert json.loads(output) == {"id": "a", "SageMakerOutput": {"sum": 3}}


def test_seed_join_output_is_byte_for_byte_what_sagemaker_wrote():
    processing = DataProcessing.build(None, None, "Input", "application/json", "application/json")
    outputs = processing.outputs([b'{"value":1}'], '{"output": "I want to 🍵"}'.encode())
    assert assemble(outputs, "Line").decode() == '{"SageMakerOutput":{"output":"I want to 🍵"},"value":1}\n'


def test_join_of_a_non_object_record_wraps_both():
    processing = DataProcessing.build(None, None, "Input", "application/jsonlines", "application/jsonlines")
    records = [b"[1,2]", b"5"]
    assert [json.loads(o) for o in processing.outputs(records, b"3.5\n5.5\n")] == [
        {"SageMakerInput": [1, 2], "SageMakerOutput": 3.5},
        {"SageMakerInput": 5, "SageMakerOutput": 5.5},
    ]


def test_join_overwrites_an_input_member_named_sagemakeroutput():
    processing = DataProcessing.build(None, None, "Input", "application/jsonlines", "application/jsonlines")
    [output] = processing.outputs([b'{"SageMakerOutput":"old","k":1}'], b"2")
    assert json.loads(output) == {"SageMakerOutput": 2, "k": 1}


def test_output_filter_without_join_applies_to_the_result_alone():
    processing = DataProcessing.build(None, "$.predictions[0]", None, "application/json", "application/json")
    assert processing.outputs([b"[1]"], b'{"predictions": [3.5]}') == [b"3.5"]


def test_an_input_filter_alone_sends_the_selection_and_splits_the_response_per_record():
    processing = DataProcessing.build("$.x", None, None, "application/jsonlines", "text/csv")
    assert processing.active and not processing.parses_output
    assert processing.request_record(b'{"x": [1, 2], "id": 7}') == b"[1,2]"
    assert processing.outputs([b"r1", b"r2"], b"3.5,4\r\n5,6\n") == [b"3.5,4", b"5,6"]


def test_defaults_are_inactive():
    assert not DataProcessing.build(None, "$", "None", "text/csv", None).active


@pytest.mark.parametrize(
    "processing, records, body, message, kind",
    [
        (
            csv_example(),
            [b"a,1", b"b,2"],
            b"3\n",
            "Number of output records (1) does not match the number of input records (2)",
            "AlgorithmError",
        ),
        (
            DataProcessing.build(None, None, "Input", "application/jsonlines", "application/jsonlines"),
            [b"{}"],
            b"not json",
            "Failed to parse output from the algorithm as JSON",
            "AlgorithmError",
        ),
        (
            DataProcessing.build(None, None, "Input", "text/csv", "text/csv"),
            [b"a"],
            b'"unclosed\n1',
            "Failed to parse output from the algorithm as CSV",
            "AlgorithmError",
        ),
        (
            DataProcessing.build(None, "$[9]", "Input", "text/csv", "text/csv"),
            [b"a,1"],
            b"2",
            "Unable to apply JsonPath $[9]: index 9 is out of range for 3 elements",
            "ClientError",
        ),
    ],
)
def test_outputs_that_cannot_be_processed_fail_the_request(processing, records, body, message, kind):
    with pytest.raises(RecordError) as error:
        processing.outputs(records, body)
    assert str(error.value) == message and error.value.kind == kind


def test_an_input_record_that_does_not_parse_fails_that_record():
    processing = DataProcessing.build("$.x", None, None, "application/jsonlines", None)
    with pytest.raises(RecordError, match="Failed to parse input record as JSON"):
        processing.request_record(b"{broken")


def test_assembly():
    assert assemble([b"a", b"b\n"], None) == b"ab\n"
    assert assemble([b"a", b"b\n"], "Line") == b"a\nb\n\n"  # a newline already there is not merged
    assert split_response(b"one\nbody\n", 1) == [b"one\nbody\n"]


def test_content_types_are_matched_without_parameters():
    assert data_format("application/json; charset=utf-8") == "json"
    assert data_format("text/CSV") == "csv"
    assert data_format("application/x-recordio-protobuf") is None
