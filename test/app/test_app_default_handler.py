"""The app without code/inference.py, in-process: the default codecs in front of the real model server
(half_plus_three)."""

from __future__ import annotations

import re

import pytest
from app_harness import InProcessApp
from app_support import write_model_dir

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


@pytest.fixture(scope="module")
def app(model_server, tmp_path_factory) -> InProcessApp:
    with InProcessApp(write_model_dir(tmp_path_factory.mktemp("no-script")), model_server) as app:
        yield app


def test_a_tfs_request_passes_through_and_the_answer_comes_back_as_tfs_wrote_it(app):
    answer = app.invoke('{"instances": [1.0, 2.0, 5.0]}')
    assert (answer.status, answer.content_type) == (200, "application/json")
    assert answer.body == b'{\n    "predictions": [3.5, 4.0, 5.5\n    ]\n}'


def test_a_bare_list_is_one_instance_as_in_the_original(app):
    assert app.invoke("[1.0, 2.0]").json() == {"predictions": [[3.5, 4.0]]}
    assert app.invoke("[[1.0], [2.0]]").json() == {"predictions": [[3.5], [4.0]]}


def test_no_content_type_means_json(app):
    assert app.invoke("1.0", content_type=None).json() == {"predictions": [3.5]}


def test_csv_in_csv_out_one_line_per_instance(app):
    answer = app.invoke("1.0\r\n2.0\r\n5.0\r\n", content_type="text/csv", accept="text/csv")
    assert (answer.status, answer.content_type, answer.body) == (200, "text/csv", b"3.5\n4.0\n5.5")


def test_csv_rows_are_instances(app):
    answer = app.invoke("1,2\n3,4\n", content_type="text/csv; charset=utf-8", accept="text/csv")
    assert answer.body == b"3.5,4.0\n4.5,5.0"


def test_json_lines_in_json_lines_out(app):
    answer = app.invoke("[1.0]\n[2.0]\n", content_type="application/jsonlines", accept="application/jsonlines")
    assert (answer.status, answer.content_type, answer.body) == (200, "application/jsonlines", b"[3.5]\n[4.0]")


def test_columnar_inputs_give_one_line_per_output_row(app):
    answer = app.invoke('{"inputs": [[1.0], [2.0]]}', accept="text/csv")
    assert answer.body == b"3.5\n4.0"


def test_a_list_of_accept_types_picks_the_first_supported(app):
    answer = app.invoke("[1.0]", accept="image/png, text/csv;q=0.9, application/json;q=0.5")
    assert (answer.content_type, answer.body) == ("text/csv", b"3.5")


def test_unsupported_content_type_is_415_naming_it(app):
    answer = app.invoke(b"\x89PNG", content_type="image/png")
    assert answer.status == 415
    assert answer.content_type == "application/json"
    assert "image/png" in answer.json()["error"]


def test_unparseable_body_is_400_naming_the_problem(app):
    answer = app.invoke("1,2\n3\n", content_type="text/csv")
    assert answer.status == 400
    assert answer.json() == {
        "error": "CSV line 2 has 1 field(s) but line 1 has 2: every row must have the same number of fields"
    }


def test_unacceptable_accept_is_406(app):
    answer = app.invoke("[1.0]", accept="application/xml")
    assert answer.status == 406
    assert "application/xml" in answer.json()["error"]


def test_a_model_server_error_passes_through_with_its_status_whatever_the_accept(app):
    answer = app.invoke('["a"]', accept="text/csv")
    assert (answer.status, answer.content_type) == (400, "application/json")
    assert answer.json() == {
        "error": "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: "
        'JSON Value: "a" Type: String is not of expected type: float'
    }


def test_custom_attributes_choose_the_model_and_version(app):
    attributes = "tfs-model-name=half_plus_two,tfs-model-version=124"
    answer = app.invoke("1.0", X_Amzn_SageMaker_Custom_Attributes=attributes)
    assert answer.json() == {"predictions": [2.5]}
    missing = app.invoke("[1.0]", X_Amzn_SageMaker_Custom_Attributes="tfs-model-name=half_plus_two,tfs-model-version=9")
    assert missing.status == 404
    assert missing.json() == {"error": "Servable not found for request: Specific(half_plus_two, 9)"}


def test_custom_attributes_choose_the_method(app):
    body = '{"signature_name": "tensorflow/serving/regress", "examples": [{"x": 1.0}]}'
    answer = app.invoke(body, X_Amzn_SageMaker_Custom_Attributes="tfs-method=regress")
    assert answer.json() == {"results": [3.5]}


@pytest.mark.parametrize(
    "attributes, error",
    [
        ("tfs-model-name=a=b", "invalid tfs-model-name"),
        ("tfs-model-version=v1", "invalid tfs-model-version: must be a positive integer"),
        ("tfs-method=explain", "invalid tfs-method: must be one of predict|classify|regress"),
    ],
)
def test_invalid_custom_attributes_are_400(app, attributes, error):
    answer = app.invoke("[1.0]", X_Amzn_SageMaker_Custom_Attributes=attributes)
    assert (answer.status, answer.json()) == (400, {"error": error})


def test_a_3_mb_csv_round_trip(app):
    values = [f"{i % 1000}.5" for i in range(750_000)]
    body = "\n".join(values) + "\n"
    assert len(body) >= 3_000_000
    answer = app.invoke(body, content_type="text/csv", accept="text/csv")
    assert answer.status == 200
    lines = answer.body.decode().split("\n")
    assert len(lines) == 750_000  # no newline after the last line
    assert lines[:3] == ["3.25", "3.75", "4.25"]
    assert lines[-1] == str(0.5 * 999.5 + 3)


def test_every_answer_carries_a_request_id(app):
    generated = app.invoke("[1.0]").headers["x-amzn-requestid"]
    assert UUID.fullmatch(generated)
    assert app.invoke("[1.0]", X_Amzn_RequestId="abc-123").headers["x-amzn-requestid"] == "abc-123"
    failed = app.invoke("[", X_Amzn_RequestId="req-400")
    assert (failed.status, failed.headers["x-amzn-requestid"]) == (400, "req-400")
    assert "request req-400: 400 the request body is not valid JSON" in app.log()
    assert app.call("GET", "/ping", headers={"X-Amzn-RequestId": "p-1"}).headers["x-amzn-requestid"] == "p-1"
    assert UUID.fullmatch(app.call("GET", "/nowhere").headers["x-amzn-requestid"])


@pytest.mark.parametrize("rid", ["r" * 257, "a\x01b", "caf\xe9"], ids=["257-chars", "control", "not-ascii"])
def test_a_request_id_too_long_or_not_printable_ascii_is_replaced_by_a_new_one(app, rid):
    assert app.call("GET", "/ping", headers={"X-Amzn-RequestId": "r" * 256}).headers["x-amzn-requestid"] == "r" * 256
    assert UUID.fullmatch(app.call("GET", "/ping", headers={"X-Amzn-RequestId": rid}).headers["x-amzn-requestid"])
