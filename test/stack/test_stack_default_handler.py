"""The default handler (no code/inference.py) through the whole stack: nginx -> gunicorn -> app -> 2 model servers.

Models: half_plus_three (the default, y = 0.5 x + 3), half_plus_two (versions 123 and 124, y = 0.5 x + 2, with a
regress signature), sum_and_count (rows -> their sum and length), upper_strings (strings upper-cased).
"""

from __future__ import annotations

import json

import clients
import model_dirs
import models
import paths
import processes
import pytest
import serve_stack
from stack_support import call, invoke, pretty_predictions


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    root = tmp_path_factory.mktemp("default-handler")
    model_dirs.copy_model(paths.HALF_PLUS_THREE, root, "half_plus_three")
    model_dirs.copy_model(paths.HALF_PLUS_TWO_2_VERSIONS, root, "half_plus_two")
    models.build("sum_and_count", root / "sum_and_count")
    models.build("upper_strings", root / "upper_strings")
    env = {"SAGEMAKER_TFS_DEFAULT_MODEL_NAME": "half_plus_three"}
    with serve_stack.Stack(root, env=env, instances=2) as started:
        yield started


def test_predict_json_answers_tfs_s_body_byte_for_byte(stack):
    answer = invoke(stack, '{"instances": [1.0, 2.0, 5.0]}')
    assert (answer.status, answer.headers["content-type"]) == (200, "application/json")
    assert answer.text == pretty_predictions("3.5, 4.0, 5.5")


@pytest.mark.parametrize("version", ["123", "124"])
def test_a_specific_version_of_another_model(stack, version):
    answer = invoke(
        stack, "[[1.0], [2.0], [5.0]]", attributes=f"tfs-model-name=half_plus_two,tfs-model-version={version}"
    )
    assert (answer.status, answer.text) == (200, pretty_predictions("[2.5], [3.0], [4.5]"))


def test_an_unknown_version_gets_the_model_server_s_404(stack):
    answer = invoke(stack, "[1.0]", attributes="tfs-model-name=half_plus_two,tfs-model-version=7")
    assert answer.status == 404
    assert answer.json() == {"error": "Servable not found for request: Specific(half_plus_two, 7)"}


def test_both_model_server_instances_serve_every_model(stack):
    low = int(stack.env["SAGEMAKER_SAFE_PORT_RANGE"].split("-")[0])
    for instance in (0, 1):
        assert processes.pid_alive(stack.pid_of(f"tfs-{instance}"))
        rest_port = low + 2 * instance + 1
        for model in ("half_plus_three", "half_plus_two", "sum_and_count", "upper_strings"):
            assert clients.http_status(f"http://127.0.0.1:{rest_port}/v1/models/{model}") == 200
    answers = {invoke(stack, "1.0").text for _ in range(8)}  # spread over both: all answer the same
    assert answers == {pretty_predictions("3.5")}


@pytest.mark.parametrize("content_type", ["application/jsonlines", "application/jsons", "application/json"])
def test_json_lines_are_instances(stack, content_type):
    answer = invoke(stack, "1.0\n2.0\n5.0\n", content_type)
    assert (answer.status, answer.text) == (200, pretty_predictions("3.5, 4.0, 5.5"))


def test_a_bare_json_list_is_one_instance_and_a_list_of_lists_the_instances_as_in_the_original(stack):
    assert invoke(stack, "[1.0, 2.0, 5.0]").text == pretty_predictions("[3.5, 4.0, 5.5]")
    assert invoke(stack, " [ [1.0], [2.0]]").text == pretty_predictions("[3.5], [4.0]")


def test_no_content_type_and_no_custom_attributes_mean_json_to_the_default_model(stack):
    answer = invoke(stack, "[[1.0, 2.0, 5.0]]", content_type=None)
    assert (answer.status, answer.text) == (200, pretty_predictions("[3.5, 4.0, 5.5]"))


def test_csv_one_value(stack):
    answer = invoke(stack, "1.0", "text/csv")
    assert (answer.status, answer.text) == (200, pretty_predictions("3.5"))


def test_csv_one_row_of_three(stack):
    answer = invoke(stack, "1,2,3", "text/csv", "tfs-model-name=sum_and_count")
    assert answer.status == 200
    assert answer.json() == {"predictions": [{"count": 3, "sum": 6.0}]}


def test_csv_several_rows_answered_in_csv_one_line_per_row_outputs_in_name_order(stack):
    answer = invoke(stack, "1,2,3\r\n4,5,6\r\n", "text/csv", "tfs-model-name=sum_and_count", Accept="text/csv")
    assert (answer.status, answer.headers["content-type"], answer.text) == (200, "text/csv", "3,6.0\n3,15.0")


def test_csv_rows_of_30_columns(stack):
    rows = [[row * 30 + column for column in range(30)] for row in range(4)]
    body = "\n".join(",".join(map(str, row)) for row in rows)
    answer = invoke(stack, body, "text/csv", "tfs-model-name=sum_and_count", Accept="text/csv")
    assert answer.status == 200
    assert answer.text == "\n".join(f"30,{float(sum(row))}" for row in rows)


def test_csv_quoted_strings_with_commas_and_quotes(stack):
    body = '"a,b",c\n"say ""hi""",d\n'
    answer = invoke(stack, body, "text/csv", "tfs-model-name=upper_strings")
    assert answer.json() == {"predictions": [["A,B", "C"], ['SAY "HI"', "D"]]}
    answer = invoke(stack, body, "text/csv", "tfs-model-name=upper_strings", Accept="text/csv")
    assert answer.text == '"A,B",C\n"SAY ""HI""",D'


def test_regress_through_the_tfs_method_attribute(stack):
    body = '{"signature_name": "regress_x_to_y", "examples": [{"x": 1.0}, {"x": 2.0}]}'
    answer = invoke(stack, body, attributes="tfs-model-name=half_plus_two,tfs-method=regress")
    assert (answer.status, answer.json()) == (200, {"results": [2.5, 3.0]})
    answer = invoke(stack, body, attributes="tfs-model-name=half_plus_two,tfs-method=regress", Accept="text/csv")
    assert answer.text == "2.5\n3.0"


@pytest.mark.parametrize(
    "accept, content_type, body",
    [
        ("application/jsonlines", "application/jsonlines", "3.5\n4.0\n5.5"),
        ("text/csv", "text/csv", "3.5\n4.0\n5.5"),
        (
            "application/x-unknown, text/csv;q=0.5, application/jsonlines;q=0.9",
            "application/jsonlines",
            "3.5\n4.0\n5.5",
        ),
        ("application/x-unknown, text/csv", "text/csv", "3.5\n4.0\n5.5"),
    ],
)
def test_accept_types(stack, accept, content_type, body):
    answer = invoke(stack, '{"instances": [1.0, 2.0, 5.0]}', Accept=accept)
    assert (answer.status, answer.headers["content-type"], answer.text) == (200, content_type, body)


def test_json_lines_answers_for_multi_output_predictions(stack):
    answer = invoke(
        stack, "[[1, 2], [3, 4]]", attributes="tfs-model-name=sum_and_count", Accept="application/jsonlines"
    )
    assert [json.loads(line) for line in answer.text.splitlines()] == [
        {"count": 2, "sum": 3.0},
        {"count": 2, "sum": 7.0},
    ]


@pytest.mark.parametrize(
    "body, content_type, status, error",
    [
        ("", "application/json", 400, "the request body is empty"),
        (
            "x",
            "application/x-unknown",
            415,
            "unsupported content type 'application/x-unknown': the default input handler reads application/json, "
            "application/jsonlines, application/jsons, application/x-jsonlines, application/jsonl, text/csv, "
            "application/x-npy (a code/inference.py script can read others)",
        ),
        (
            "1,2\n3\n",
            "text/csv",
            400,
            "CSV line 2 has 1 field(s) but line 1 has 2: every row must have the same number of fields",
        ),
        (
            '{"instances": [1.0',
            "application/json",
            400,
            "the request body is not valid JSON: Expecting ',' delimiter: line 1 column 19 (char 18)",
        ),
    ],
)
def test_bad_requests_get_a_json_error_naming_the_problem(stack, body, content_type, status, error):
    answer = invoke(stack, body, content_type)
    assert (answer.status, answer.headers["content-type"], answer.json()) == (
        status,
        "application/json",
        {"error": error},
    )


@pytest.mark.parametrize(
    "body, content_type",
    [
        ("[" * 5000 + "]" * 5000, "application/json"),
        ('{"instances": ' + "[" * 100_000, "application/json"),
        ("1\n" + "[" * 5000 + "\n", "application/jsonlines"),
    ],
)
def test_json_nested_too_deeply_is_a_400(stack, body, content_type):
    answer = invoke(stack, body, content_type)
    assert (answer.status, answer.headers["content-type"], answer.json()) == (
        400,
        "application/json",
        {"error": "the request body's JSON nests arrays and objects too deeply to be read"},
    )


@pytest.mark.parametrize(
    "body, content_type",
    [
        (f"[[{'9' * 5000}], [1.0]]", "application/json"),
        (f"{'9' * 5000}\n1.0\n", "application/jsonlines"),
        (f"+{'9' * 5000}\n1.0\n", "text/csv"),
    ],
)
def test_an_integer_of_5000_digits_is_a_double_as_in_tensorflow_serving(stack, body, content_type):
    # beyond Python's int-string limit (4300 digits) and beyond the double range: infinity for a float input
    answer = invoke(stack, body, content_type, Accept="text/csv")
    assert (answer.status, answer.text) == (200, "Infinity\n3.5")


def test_a_model_version_beyond_int64_is_a_400(stack):
    answer = invoke(stack, "1.0", attributes="tfs-model-name=half_plus_two,tfs-model-version=" + "9" * 5000)
    assert (answer.status, answer.json()) == (
        400,
        {"error": "invalid tfs-model-version: must be at most 9223372036854775807"},
    )


def test_a_model_server_error_reaches_the_client_unchanged(stack):
    answer = invoke(stack, '{"instances": ["a"]}')
    assert answer.status == 400
    assert answer.text == (
        '{\n    "error": "Failed to process element: 0 of \'instances\' list. Error: '
        'INVALID_ARGUMENT: JSON Value: \\"a\\" Type: String is not of expected type: float"\n}'
    )


def test_a_csv_of_750k_values_round_trip(stack):
    values = [k / 4 for k in range(750_000)]  # exact in float32, as are 0.5 x + 3
    body = "".join(f"{value}\n" for value in values)
    assert len(body) > 3_000_000
    answer = invoke(stack, body, "text/csv", Accept="text/csv")
    assert answer.status == 200
    assert list(map(float, answer.text.splitlines())) == [0.5 * value + 3 for value in values]


def test_ping_and_unknown_paths(stack):
    assert call(stack.url + "/ping").status == 200
    answer = call(stack.url + "/nope")
    assert (answer.status, answer.json()) == (404, {"error": "Not Found"})
