"""The model server's REST API against TFS's behaviour: routes, exact bodies, status codes, error texts."""

from __future__ import annotations

import base64
import gzip
import json
import socket

import numpy as np
import paths
import ports
import processes
import pytest

STATUS_AVAILABLE_123 = (
    b'{\n "model_version_status": [\n  {\n   "version": "123",\n   "state": "AVAILABLE",\n'
    b'   "status": {\n    "error_code": "OK",\n    "error_message": ""\n   }\n  }\n ]\n}\n'
)


def error_of(response) -> str:
    assert response.headers["Content-Type"] == "application/json"
    assert response.content.startswith(b'{\n    "error": ') and response.content.endswith(b"\n}")
    return response.json()["error"]


# ------------------------------------------------------------------------------------------------ status


def test_status_of_a_served_model_is_tfs_protobuf_json(server):
    response = server.get("/v1/models/half_plus_two")
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert response.content == STATUS_AVAILABLE_123


def test_status_lists_versions_highest_first_and_one_version_on_request(server):
    statuses = server.get("/v1/models/two_versions").json()["model_version_status"]
    assert [(s["version"], s["state"]) for s in statuses] == [("124", "AVAILABLE"), ("123", "AVAILABLE")]
    one = server.get("/v1/models/two_versions/versions/00123").json()["model_version_status"]
    assert [s["version"] for s in one] == ["123"]
    # TFS ignores the label of a status request
    labelled = server.get("/v1/models/two_versions/labels/stable").json()["model_version_status"]
    assert [s["version"] for s in labelled] == ["124", "123"]


def test_only_integer_folders_are_versions_and_the_latest_policy_serves_the_highest(server):
    statuses = server.get("/v1/models/by_version").json()["model_version_status"]
    assert [(s["version"], s["state"]) for s in statuses] == [("2", "AVAILABLE"), ("1", "AVAILABLE")]


def test_broken_model_reports_why_and_the_others_keep_serving(server):
    response = server.get("/v1/models/broken")
    assert response.status_code == 200
    (status,) = response.json()["model_version_status"]
    assert status["version"] == "123" and status["state"] == "END"
    assert status["status"]["error_code"] == "NOT_FOUND"
    assert status["status"]["error_message"].startswith(
        "Could not find SavedModel .pb or .pbtxt at supplied export directory path: "
    )
    assert "bad_half_plus_two" in status["status"]["error_message"]
    predict = server.post("/v1/models/broken:predict", {"instances": [1.0]})
    assert predict.status_code == 404
    assert error_of(predict) == "Servable not found for request: Latest(broken)"
    assert server.post("/v1/models/half_plus_two:predict", {"instances": [1.0]}).status_code == 200
    processes.wait_for_log(server, "Loading servable {name: broken version: 123} failed: NOT_FOUND")


@pytest.mark.parametrize(
    "path, message",
    [
        ("/v1/models/nope", "Could not find any versions of model nope"),
        ("/v1/models/half_plus_two/versions/999", "Could not find version 999 of model half_plus_two"),
        ("/v1/models/nope/metadata", "Servable not found for request: Latest(nope)"),
        ("/v1/models/half_plus_two/versions/7/metadata", "Servable not found for request: Specific(half_plus_two, 7)"),
        ("/v1/models/half_plus_two?x=1", "Could not find any versions of model half_plus_two?x=1"),
    ],
)
def test_status_and_metadata_of_unknown_models_and_versions_are_404(server, path, message):
    response = server.get(path)
    assert response.status_code == 404
    assert error_of(response) == message


# ------------------------------------------------------------------------------------------------ metadata


def test_metadata_matches_tfs_golden_file(server):
    response = server.get("/v1/models/half_plus_two/metadata")
    assert response.status_code == 200
    assert response.content.startswith(b'{\n"model_spec":{\n "name": "half_plus_two",\n')
    assert b'}\n,\n"metadata": {"signature_def": {\n "signature_def": {' in response.content
    assert response.content.endswith(b"}\n}\n}\n")
    golden = json.loads((paths.TESTDATA / "half_plus_two_model_metadata.json").read_text())
    body = response.json()
    assert body["model_spec"] == {"name": "half_plus_two", "signature_name": "", "version": "123"}
    assert body["metadata"] == golden["metadata"]


def test_metadata_of_a_tf2_model_and_of_a_chosen_version(server):
    body = server.get("/v1/models/half_plus_two_tf2/metadata").json()
    signatures = body["metadata"]["signature_def"]["signature_def"]
    assert signatures["serving_default"]["inputs"]["x"]["name"] == "serving_default_x:0"
    assert "__saved_model_init_op" in signatures  # TFS lists it too
    assert server.get("/v1/models/two_versions/versions/123/metadata").json()["model_spec"]["version"] == "123"
    assert server.get("/v1/models/two_versions/labels/canary/metadata").json()["model_spec"]["version"] == "124"


# ------------------------------------------------------------------------------------------------ predict


def test_predict_row_format_exact_bytes(server):
    response = server.post("/v1/models/half_plus_two:predict", {"instances": [1.0, 2.0, 5.0]})
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert response.content == b'{\n    "predictions": [2.5, 3.0, 4.5\n    ]\n}'
    nested = server.post("/v1/models/half_plus_two:predict", {"instances": [[1.0], [2.0]]})
    assert nested.content == b'{\n    "predictions": [[2.5], [3.0]\n    ]\n}'


def test_predict_columnar_format_exact_bytes(server):
    response = server.post("/v1/models/half_plus_three:predict", {"inputs": [[1.0], [2.0]]})
    assert response.status_code == 200
    assert response.content == (
        b'{\n    "outputs": [\n        [\n            3.5\n        ],\n        [\n            4.0\n        ]\n    ]\n}'
    )


def test_predict_half_plus_three_which_tf_saved_model_load_cannot_load(server):
    response = server.post("/v1/models/half_plus_three:predict", {"instances": [1.0, 2.0, 5.0]})
    assert response.content == b'{\n    "predictions": [3.5, 4.0, 5.5\n    ]\n}'


def test_predict_tf2_model(server):
    response = server.post("/v1/models/half_plus_two_tf2:predict", {"instances": [1.0]})
    assert response.content == b'{\n    "predictions": [2.5\n    ]\n}'
    response = server.post(
        "/v1/models/half_plus_two_tf2:predict", {"signature_name": "serving_default", "inputs": {"x": [4.0]}}
    )
    assert response.json() == {"outputs": [4.0]}


def test_version_and_label_select_what_computes(server):
    assert server.post("/v1/models/by_version:predict", {"instances": [1.0]}).json() == {"predictions": [3.5]}
    assert server.post("/v1/models/by_version/versions/1:predict", {"instances": [1.0]}).json() == {
        "predictions": [2.5]
    }
    assert server.post("/v1/models/by_version/versions/2:predict", {"instances": [1.0]}).json() == {
        "predictions": [3.5]
    }
    # a label answers with the version it names: stable is 1 (y = 0.5 x + 2), not the latest
    stable = server.post("/v1/models/by_version/labels/stable:predict", {"instances": [1.0]})
    assert (stable.status_code, stable.content) == (200, b'{\n    "predictions": [2.5\n    ]\n}')
    canary = server.post("/v1/models/by_version/labels/canary:predict", {"instances": [1.0]})
    assert (canary.status_code, canary.content) == (200, b'{\n    "predictions": [3.5\n    ]\n}')
    missing = server.post("/v1/models/by_version/versions/3:predict", {"instances": [1.0]})
    assert missing.status_code == 404
    assert error_of(missing) == "Servable not found for request: Specific(by_version, 3)"
    label = server.post("/v1/models/two_versions/labels/beta:predict", {"instances": [1.0]})
    assert label.status_code == 400
    assert error_of(label) == "Unrecognized servable version label: beta"


def test_predict_strings_with_b64_in_and_out(server):
    raw = bytes([0, 1, 2, 255])
    response = server.post("/v1/models/strings:predict", {"instances": ["ab", {"b64": base64.b64encode(raw).decode()}]})
    assert response.status_code == 200
    assert response.json() == {
        "predictions": [
            {"echo_bytes": {"b64": "YWI="}, "upper": "AB"},
            {"echo_bytes": {"b64": base64.b64encode(raw).decode()}, "upper": "\x00\x01\x02\ufffd"},
        ]
    }
    assert response.content.startswith(
        b'{\n    "predictions": [\n        {\n            "echo_bytes": {\n'
        b'                "b64": "YWI="\n            },\n            "upper": "AB"\n'
        b"        },\n"
    )
    columnar = server.post("/v1/models/strings:predict", {"inputs": {"s": ["x y"]}})
    assert columnar.json() == {"outputs": {"echo_bytes": [{"b64": "eCB5"}], "upper": ["X Y"]}}


def test_predict_several_inputs_and_outputs(server):
    rows = {"instances": [{"a": 1.5, "b": 2, "c": True}, {"a": -1.0, "b": 10, "c": False}]}
    response = server.post("/v1/models/three_inputs:predict", rows)
    assert response.json() == {"predictions": [{"not_c": False, "sum": 3.5}, {"not_c": True, "sum": 9.0}]}
    columns = server.post(
        "/v1/models/three_inputs:predict", {"inputs": {"a": [1.5], "b": [2], "c": [True], "ignored": 1}}
    )
    assert columns.content == (
        b'{\n    "outputs": {\n        "not_c": [\n            false\n        ],\n'
        b'        "sum": [\n            3.5\n        ]\n    }\n}'
    )


def test_predict_nan_and_infinity_round_trip(server):
    response = server.post("/v1/models/half_plus_two:predict", b'{"instances": [NaN, Infinity, -Infinity, 1e39]}')
    assert response.content == b'{\n    "predictions": [NaN, Infinity, -Infinity, Infinity\n    ]\n}'


def test_predict_large_input_is_exact(server):
    values = np.arange(200_000, dtype=np.float32) / 8
    response = server.post("/v1/models/half_plus_three:predict", {"inputs": {"x": values.tolist()}})
    assert response.status_code == 200
    assert np.array_equal(np.array(response.json()["outputs"], dtype=np.float32), values * 0.5 + 3)


def test_trailing_bytes_after_the_document_are_ignored_like_rapidjson(server):
    response = server.post("/v1/models/half_plus_two:predict", b'{"instances": [1.0]}X')
    assert response.json() == {"predictions": [2.5]}


LONG = "9" * 5000  # beyond Python's int-string limit (4300 digits) and beyond the double range


def test_integers_past_64_bits_are_doubles_as_rapidjson_reads_them(server):
    body = f'{{"instances": [{LONG}, -{LONG}, 1]}}'.encode()
    response = server.post("/v1/models/half_plus_two:predict", body)
    assert response.content == b'{\n    "predictions": [Infinity, -Infinity, 2.5\n    ]\n}'
    ints = server.post(
        "/v1/models/three_inputs:predict", f'{{"instances": [{{"a": 1.0, "b": {LONG}, "c": true}}]}}'.encode()
    )
    assert ints.status_code == 400
    assert error_of(ints) == (
        "Failed to process element: 0 key: b of 'instances' list. Error: INVALID_ARGUMENT: "
        "JSON Value: Infinity Type: Number is not of expected type: int64"
    )
    for value, result in ((LONG, b"Infinity"), (2**70, b"5.9029581e+20")):  # a float feature, not "uint64_t element"
        regress = server.post(
            "/v1/models/half_plus_two:regress",
            f'{{"signature_name": "regress_x_to_y", "examples": [{{"x": {value}}}]}}'.encode(),
        )
        assert regress.content == b'{\n    "results": [' + result + b"]\n}"


# Deeper than any supported Python's json reads: 3.10 and 3.11 stop near 1,000 levels, 3.12 reads 990 and 3.13
# 5,000 (its limit follows the C stack); shallower bodies are answered by the dimension check below
@pytest.mark.parametrize(
    "body",
    [
        b'{"instances": ' + b"[" * 100_000 + b"1.0" + b"]" * 100_000 + b"}",
        b'{"instances": ' + b"[" * 100_000,
        b"[" * 100_000 + b"]" * 100_000,
    ],
)
def test_json_nested_too_deeply_to_read_is_400(server, body):
    response = server.post("/v1/models/half_plus_two:predict", body)
    assert response.status_code == 400
    assert error_of(response) == "JSON Value: arrays and objects are nested too deeply to be read"


@pytest.mark.parametrize("key, rank", [("inputs", 65), ("inputs", 960), ("instances", 65)])
def test_tensors_of_more_than_64_dimensions_are_400(server, key, rank):
    body = f'{{"{key}": {"[" * rank}1.0{"]" * rank}}}'.encode()
    response = server.post("/v1/models/half_plus_two:predict", body)
    assert response.status_code == 400
    assert error_of(response) == (
        f"Tensor of {rank} dimensions: this model server supports at most 64 (JSON lists nested {rank} levels deep)"
    )


def test_gzip_request_body(server):
    body = gzip.compress(b'{"instances": [1.0]}')
    response = server.http.post(
        server.url + "/v1/models/half_plus_two:predict", data=body, headers={"Content-Encoding": "gzip"}, timeout=30
    )
    assert response.json() == {"predictions": [2.5]}


# ------------------------------------------------------------------------------------------------ classify/regress


def test_classify_exact_bytes(server):
    response = server.post(
        "/v1/models/half_plus_two:classify", {"signature_name": "classify_x_to_y", "examples": [{"x": 1.0}, {"x": 2.0}]}
    )
    assert response.status_code == 200
    assert response.content == b'{\n    "results": [[["", 2.5]], [["", 3.0]]\n    ]\n}'


def test_regress_exact_bytes_and_context_merge(server):
    response = server.post(
        "/v1/models/half_plus_two:regress",
        {"signature_name": "regress_x_to_y2", "examples": [{"x": 1.0}, {"x": [2.0]}]},
    )
    assert response.content == b'{\n    "results": [3.5, 4.0]\n}'
    # context features join every example; a feature in both takes the example's value
    response = server.post(
        "/v1/models/half_plus_two:regress",
        {"signature_name": "regress_x_to_y", "context": {"x": 9.0}, "examples": [{"x": 1.0}, {"tag": "a"}]},
    )
    assert response.json() == {"results": [2.5, 6.5]}


def test_regress_half_plus_three_default_regress_signature_and_tf2(server):
    response = server.post(
        "/v1/models/half_plus_three:regress", {"signature_name": "tensorflow/serving/regress", "examples": [{"x": 1.0}]}
    )
    assert response.json() == {"results": [3.5]}
    tf2 = server.post(
        "/v1/models/half_plus_two_tf2:classify", {"signature_name": "classify_x_to_y", "examples": [{"x": 4.0}]}
    )
    assert tf2.json() == {"results": [[["", 4.0]]]}


# ------------------------------------------------------------------------------------------------ errors

ERRORS = [
    ("/v1/models/nope:predict", b'{"instances": [1.0]}', 404, "Servable not found for request: Latest(nope)"),
    (
        "/v1/models/half_plus_two/versions/999:predict",
        b'{"instances": [1.0]}',
        404,
        "Servable not found for request: Specific(half_plus_two, 999)",
    ),
    ("/v1/models/half_plus_two:predict", b"", 400, "JSON Parse error: The document is empty"),
    ("/v1/models/half_plus_two:predict", b"instances = [1, 2]", 400, "JSON Parse error: Invalid value. at offset: 0"),
    (
        "/v1/models/half_plus_two:predict",
        b'{"instances": [1, 2]',
        400,
        "JSON Parse error: Missing a comma or '}' after an object member. at offset: 20",
    ),
    (
        "/v1/models/half_plus_two:predict",
        b"{'a':1}",
        400,
        "JSON Parse error: Missing a name for object member. at offset: 1",
    ),
    ("/v1/models/half_plus_two:predict", b"[1]", 400, "JSON Value: [1] Is not object"),
    (
        "/v1/models/half_plus_two:predict",
        b'{"instances": ["a"]}',
        400,
        "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: JSON Value: \"a\" Type: String "
        "is not of expected type: float",
    ),
    (
        "/v1/models/half_plus_two:predict",
        b'{"inputs": ["a"]}',
        400,
        'JSON Value: "a" Type: String is not of expected type: float',
    ),
    (
        "/v1/models/half_plus_two:predict",
        b'{"instances": [1.0, true]}',
        400,
        "Failed to process element: 1 of 'instances' list. Error: INVALID_ARGUMENT: JSON Value: true Type: True is "
        "not of expected type: float",
    ),
    (
        "/v1/models/half_plus_two:predict",
        b'{"signature_name":"foo","instances":[1.0]}',
        400,
        'Serving signature name: "foo" not found in signature def',
    ),
    (
        "/v1/models/half_plus_two:predict",
        b'{"signature_name": 100}',
        400,
        "JSON Value: {\n    \"signature_name\": 100\n} not formatted correctly. 'signature_name' key must be a string "
        "value.",
    ),
    ("/v1/models/half_plus_two:predict", b"{}", 400, "Missing 'inputs' or 'instances' key"),
    ("/v1/models/half_plus_two:predict", b'{"foo": 1}', 400, "Missing 'inputs' or 'instances' key"),
    (
        "/v1/models/half_plus_two:predict",
        b'{"instances":[1.0],"inputs":[1.0]}',
        400,
        'JSON Value: {\n    "instances": [1.0],\n    "inputs": [1.0]\n} Not formatted correctly expecting only one '
        "of 'inputs' or 'instances' keys to exist ",
    ),
    (
        "/v1/models/half_plus_two:predict",
        b'{"instances": []}',
        400,
        "JSON Value: {\n    \"instances\": []\n} No values in 'instances' array",
    ),
    (
        "/v1/models/half_plus_two:predict",
        b'{"instances": 5}',
        400,
        "JSON Value: {\n    \"instances\": 5\n} Expecting 'instances' to be an list/array",
    ),
    (
        "/v1/models/half_plus_two:predict",
        b'{"instances": [[1.0,2.0],[3.0]]}',
        400,
        "Failed to process element: 1 of 'instances' list. Error: INVALID_ARGUMENT: Expecting tensor size: 2 but "
        "got: 1",
    ),
    (
        "/v1/models/half_plus_two:predict",
        b'{"instances": [1.0, [2.0]]}',
        400,
        "Failed to process element: 1 of 'instances' list. Error: INVALID_ARGUMENT: Expecting shape [] but got: [1]",
    ),
    (
        "/v1/models/half_plus_two:predict",
        b'{"inputs": [[1.0,2.0],[3.0]]}',
        400,
        "Encountered list at unexpected size: 1 at level: 1 expected size: 2",
    ),
    (
        "/v1/models/half_plus_two:predict",
        b'{"instances":[{"y":1.0}]}',
        400,
        "Failed to process element: 0 key: y of 'instances' list. Error: INVALID_ARGUMENT: JSON object: does not "
        "have named input: y",
    ),
    ("/v1/models/half_plus_two:predict", b'{"inputs":{"y":[1.0]}}', 400, "Missing named input: x in 'inputs' object."),
    (
        "/v1/models/three_inputs:predict",
        b'{"instances":[{"a":1.0,"b":2.5,"c":true}]}',
        400,
        "Failed to process element: 0 key: b of 'instances' list. Error: INVALID_ARGUMENT: JSON Value: 2.5 Type: "
        "Number is not of expected type: int64",
    ),
    (
        "/v1/models/three_inputs:predict",
        b'{"instances":[{"a":1.0,"b":2}]}',
        400,
        'Failed to process element: 0 of \'instances\' list. JSON object: {\n    "a": 1.0,\n    "b": 2\n} keys '
        "must be equal to: a,b,c",
    ),
    (
        "/v1/models/three_inputs:predict",
        b'{"instances":[1.0]}',
        400,
        "instances is a plain list, but expecting list of objects as multiple input tensors required as per "
        "tensorinfo_map",
    ),
    (
        "/v1/models/three_inputs:predict",
        b'{"inputs":[1.0]}',
        400,
        "inputs is a plain value/list, but expecting an object as multiple input tensors required as per "
        "tensorinfo_map",
    ),
    (
        "/v1/models/strings:predict",
        b'{"instances":[{"b64": "%%%"}]}',
        400,
        "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: Unable to base64 decode",
    ),
    ("/v1/models/strings:predict", b'{"inputs":{"s": {"b64": "%%%"}}}', 400, "Unable to base64 decode"),
    (
        "/v1/models/strings:predict",
        b'{"instances":[{"b64": 1}]}',
        400,
        "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: JSON Value: {\n    \"b64\": 1\n"
        "} not formatted correctly for base64 data",
    ),
    (
        "/v1/models/half_plus_two:regress",
        b'{"signature_name": "regress_x_to_y"}',
        400,
        'JSON Value: {\n    "signature_name": "regress_x_to_y"\n} When method is classify, key \'examples\' is '
        "expected and was not found",
    ),
    (
        "/v1/models/half_plus_two:regress",
        b'{"signature_name": "regress_x_to_y", "examples": []}',
        400,
        'JSON Value: {\n    "signature_name": "regress_x_to_y",\n    "examples": []\n} \'examples\' value is an '
        "empty array",
    ),
    (
        "/v1/models/half_plus_two:regress",
        b'{"signature_name": "foo", "examples": [{"x": 1.0}]}',
        400,
        "No signature was found with the name: foo",
    ),
    (
        "/v1/models/half_plus_two:classify",
        b'{"signature_name": "foo", "examples": [{"x": 1.0}]}',
        400,
        "No signature was found with the name: foo",
    ),
    (
        "/v1/models/half_plus_two:regress",
        b'{"signature_name": "regress_x_to_y", "examples": [{"x": [1.0, 2]}]}',
        400,
        "Unexpected element type in feature: x expecting type: float",
    ),
    (
        "/v1/models/half_plus_two:regress",
        b'{"signature_name": "regress_x_to_y", "examples": [[1.0]]}',
        400,
        "Example must be JSON object but got JSON Array",
    ),
    ("/v1/models", b"", 400, "Missing model name in request."),
]


@pytest.mark.parametrize("path, body, status, message", ERRORS)
def test_error_status_and_text_as_tfs(server, path, body, status, message):
    response = server.post(path, body) if body or path.endswith("predict") else server.get(path)
    assert response.status_code == status
    assert error_of(response) == message


@pytest.mark.parametrize(
    "method, signature, start",
    [
        ("regress", None, "No regression inputs found in SignatureDef: "),
        ("classify", None, "No classification inputs found in SignatureDef: "),
        (
            "classify",
            "regress_x_to_y",
            'Expected classification signature outputs to contain at least one of "classes" '
            'or "scores". Signature was: ',
        ),
        ("regress", "classify_x_to_y", "No regression outputs found in SignatureDef: "),
    ],
)
def test_classify_and_regress_with_the_wrong_kind_of_signature(server, method, signature, start):
    body = {"examples": [{"x": 1.0}], **({"signature_name": signature} if signature else {})}
    response = server.post(f"/v1/models/half_plus_two:{method}", body)
    assert response.status_code == 400
    message = error_of(response)
    assert message.startswith(start)
    assert 'method_name: "tensorflow/serving/' in message  # the signature's debug text follows


def test_wrong_feature_type_fails_inside_tensorflow_as_in_tfs(server):
    response = server.post(
        "/v1/models/half_plus_two:regress", {"signature_name": "regress_x_to_y", "examples": [{"x": 2}]}
    )
    assert response.status_code == 400
    assert "x" in error_of(response)


@pytest.mark.parametrize(
    "method, path",
    [
        ("PUT", "/v1/models/half_plus_two"),
        ("DELETE", "/v1/models/half_plus_two"),
        ("PATCH", "/v1/models/half_plus_two"),
        ("GET", "/v1/models/half_plus_two:predict"),
        ("POST", "/v1/models/half_plus_two"),
        ("POST", "/v1/models/half_plus_two/metadata"),
        ("POST", "/v1/models/half_plus_two:PREDICT"),
        ("POST", "/v1/models/half_plus_two/versions/HELLO:predict"),
        ("POST", "/v1/models/half_plus_two/version/50:predict"),
        ("POST", "/v1/models/half_plus_two/versions/1/labels/x:predict"),
        ("POST", "/v1/models/half_plus_two:predict?x=1"),
        ("GET", "/v1/models/half_plus_two/"),
    ],
)
def test_malformed_requests_are_400(server, method, path):
    response = server.http.request(method, server.url + path, data=b'{"instances": [1.0]}', timeout=30)
    assert response.status_code == 400
    assert error_of(response) == f"Malformed request: {method} {path}"


def test_paths_are_case_insensitive_but_verbs_are_not(server):
    upper = server.post("/V1/MODELS/half_plus_two:predict", {"instances": [1.0]})
    assert (upper.status_code, upper.headers["Content-Type"], upper.content) == (
        200,
        "application/json",
        b'{\n    "predictions": [2.5\n    ]\n}',
    )
    # /METADATA is not the metadata verb: TFS falls through to the status API
    assert server.get("/v1/models/half_plus_two/METADATA").content == STATUS_AVAILABLE_123


def test_paths_outside_v1_get_an_html_404_and_trace_a_501(server):
    response = server.get("/v2/models/half_plus_two")
    assert response.status_code == 404
    assert response.headers["Content-Type"] == "text/html"
    assert server.http.request("TRACE", server.url + "/v1/models/x", timeout=30).status_code == 501


def test_cors_preflight(server):
    ok = server.http.options(
        server.url + "/v1/models/half_plus_two:predict", headers={"Origin": "https://example.com"}, timeout=30
    )
    assert (ok.status_code, ok.content) == (200, b"")
    missing = server.http.options(server.url + "/v1/models/half_plus_two:predict", timeout=30)
    assert (missing.status_code, missing.content) == (400, b"")


# ------------------------------------------------------------------------------------------------ HTTP


def _read_response(conn: socket.socket, buffered: bytes) -> tuple[bytes, bytes]:
    """One HTTP response (head + body) from the socket; returns it and the bytes after it."""
    while b"\r\n\r\n" not in buffered:
        buffered += conn.recv(65536)
    head, _, rest = buffered.partition(b"\r\n\r\n")
    length = int([line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")][0])
    while len(rest) < length:
        rest += conn.recv(65536)
    return head + b"\r\n\r\n" + rest[:length], rest[length:]


def test_pipelined_requests_are_answered_in_order_on_one_connection(server):
    def request(value: float) -> bytes:
        body = json.dumps({"instances": [value]}).encode()
        return b"POST /v1/models/half_plus_two:predict HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (
            len(body),
            body,
        )

    with socket.create_connection(("127.0.0.1", server.rest_port), timeout=30) as conn:
        conn.sendall(request(1.0) + b"GET /v1/models/half_plus_two HTTP/1.1\r\nHost: x\r\n\r\n" + request(3.0))
        first, rest = _read_response(conn, b"")
        second, rest = _read_response(conn, rest)
        third, rest = _read_response(conn, rest)
    assert first.startswith(b"HTTP/1.1 200 OK\r\n") and first.endswith(b"[2.5\n    ]\n}")
    assert second.endswith(STATUS_AVAILABLE_123)
    assert third.endswith(b"[3.5\n    ]\n}")


def test_expect_100_continue_is_honoured(server):
    body = json.dumps({"instances": [1.0] * 1000}).encode()
    with socket.create_connection(("127.0.0.1", server.rest_port), timeout=30) as conn:
        conn.sendall(
            b"POST /v1/models/half_plus_two:predict HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body)
        )
        interim = conn.recv(100)
        assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
        conn.sendall(body)
        response, _ = _read_response(conn, b"")
    assert response.startswith(b"HTTP/1.1 200 OK")


def test_connection_close_is_honoured(server):
    with socket.create_connection(("127.0.0.1", server.rest_port), timeout=30) as conn:
        conn.sendall(b"GET /v1/models/half_plus_two HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    assert b"Connection: close" in data and data.endswith(STATUS_AVAILABLE_123)


def test_server_log_names_models_versions_and_ports(server):
    processes.wait_for_log(
        server,
        f"Running gRPC ModelServer at 0.0.0.0:{server.grpc_port}",
        f"Exporting HTTP/REST API at:0.0.0.0:{server.rest_port}",  # TFS says localhost, wrongly
        "model two_versions: 124 AVAILABLE, 123 AVAILABLE",
    )
    assert ports.port_is_open(server.grpc_port)


@pytest.mark.parametrize(
    "version, status, message",
    [
        ("9223372036854775808", 400, "Failed to convert version: 9223372036854775808 to numeric."),
        ("9" * 5000, 400, f"Failed to convert version: {'9' * 5000} to numeric."),
        ("0" * 5000 + "7", 404, "Servable not found for request: Specific(half_plus_two, 7)"),  # leading zeros are fine
    ],
)
def test_a_path_version_past_int64_is_400_at_any_length(server, version, status, message):
    response = server.post(f"/v1/models/half_plus_two/versions/{version}:predict", {"instances": [1.0]})
    assert (response.status_code, error_of(response)) == (status, message)
