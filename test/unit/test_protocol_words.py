"""Protocol words written once (issue 28): TensorFlow Serving's version states and the multi-model states as enums,
one JSON error body, one reading of a Content-Type's parameters, one CSV reader, one line layout of predictions,
and the direct route's TFS keys from the codecs."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from sagemaker_tfs import codecs
from sagemaker_tfs.model_client.model_servers import ModelStatus, VersionStatus
from sagemaker_tfs.registry.publication import PUBLISHED, ModelState
from sagemaker_tfs.shared import json_bodies, media_types, tfs_api
from sagemaker_tfs.shared.media_types import Format
from sagemaker_tfs.shared.version_states import VersionState
from sagemaker_tfs.stack import direct_route
from sagemaker_tfs.toolkit import arrays
from sagemaker_tfs.transform.dataprocessing import RecordError, parse
from sagemaker_tfs.web import answers
from sagemaker_tfs.wsgi_server.refusals import closing_error


def test_the_version_states_are_tensorflow_serving_s_names():
    from tensorflow_serving.apis import get_model_status_pb2

    names = get_model_status_pb2.ModelVersionStatus.State.keys()
    assert [state.value for state in VersionState] == [name for name in names if name != "UNKNOWN"]
    assert all(state == state.name and f"{state}" == state.name for state in VersionState)


def _status(*states: tuple[int, str]) -> ModelStatus:
    return ModelStatus(200, tuple(VersionStatus(v, s, "") for v, s in states), [], None)


def test_one_rule_says_which_versions_serve():
    status = _status((2, "LOADING"), (1, "AVAILABLE"))
    assert status.available and not status.all_available
    assert status.serves([1]) and not status.serves([1, 2]) and not status.serves([3]) and not status.serves([])
    assert _status((2, VersionState.AVAILABLE), (1, "AVAILABLE")).all_available
    assert not _status().all_available and not _status().available


def test_the_multi_model_states_travel_as_their_words():
    assert json.dumps({"state": ModelState.READY}) == '{"state": "ready"}'
    assert json.loads('"loading"') == ModelState.LOADING and ModelState.UNLOADING not in PUBLISHED


@pytest.mark.parametrize("message", ["Not Found", "caf\u00e9 \u2028 \U0001f600", 'a "quoted" \\ line\n'])
def test_every_error_body_is_written_alike(message):
    body = json_bodies.error(message)
    assert answers.error(404, message) == (404, body, media_types.JSON)
    assert closing_error(400, "Bad Request", "").endswith(b"\r\n\r\n" + json_bodies.error("Bad Request"))
    refusal = closing_error(400, "Bad Request", message)
    assert refusal.endswith(b"\r\n\r\n" + json_bodies.error(f"Bad Request: {message}"))
    assert json.loads(body) == {"error": message} and b"\\u00e9" not in body  # UTF-8, not ASCII-escaped
    assert (
        json_bodies.error(message, {"title": "t"})
        == json.dumps({"error": message, "title": "t"}, ensure_ascii=False).encode()
    )


def test_the_parameters_of_a_content_type():
    assert list(media_types.parameters('Text/CSV ; Charset = "latin-1" ;q=0.5;x')) == [
        ("charset", '"latin-1"'),
        ("q", "0.5"),
        ("x", ""),
    ]
    assert list(media_types.parameters("application/json")) == []
    assert codecs.negotiate("text/csv; Q=0.2, application/jsonlines;q=0.4") == "application/jsonlines"


def test_the_transform_runner_reads_a_csv_record_with_the_shared_reader():
    assert parse(b'"a\rb",c', Format.CSV, "input record") == ["a\rb", "c"]
    assert parse(b"1,2\r", Format.CSV, "input record") == ["1", "2"]
    with pytest.raises(RecordError, match="2 rows where one was expected"):
        parse(b"a\rb", Format.CSV, "input record")  # a CR ends a row, as in every other CSV reader of the stack


@pytest.mark.parametrize(
    "prediction",
    [
        np.array([0.1, 0.2], dtype=np.float32),
        np.array([[0.1, 2.5]], dtype=np.float16),
        np.array([[1, 2], [3, 4]]),
        np.array(["", "a"]),
        np.array([True, False]),
        np.zeros((2, 0)),
        np.array([], dtype=np.float64),
    ],
)
def test_the_toolkit_s_csv_is_numpy_savetxt_s(prediction):
    expected = io.StringIO()
    np.savetxt(expected, prediction, delimiter=",", fmt="%s")
    assert arrays.encode(prediction, "text/csv") == expected.getvalue()


def test_the_two_writers_differ_where_their_contracts_do():
    tfs_answer = json.dumps({"predictions": [[1.5, 2.0], [3.0, 4.0]]}).encode()
    assert codecs.encode_predictions(tfs_answer, "text/csv") == b"1.5,2.0\n3.0,4.0"
    assert codecs.encode_predictions(tfs_answer, "application/jsonlines") == b"[1.5,2.0]\n[3.0,4.0]"
    assert arrays.encode(np.array([[1.5, 2.0], [3.0, 4.0]]), "text/csv") == "1.5,2.0\n3.0,4.0\n"
    assert arrays.encode(np.array([[1.5, 2.0], [3.0, 4.0]]), "application/jsonlines") == "[1.5, 2.0]\n[3.0, 4.0]"


def test_the_direct_route_takes_the_codecs_tfs_keys():
    assert direct_route._TFS_KEY == '"(?:' + "|".join((*tfs_api.REQUEST_KEYS, tfs_api.SIGNATURE_KEY)) + ')"'
    assert direct_route.HEADER_RULES[0].takes == (r"~*^application/json[ \t]*(;.*)?$",)
