"""Unit tests of the app's parts: custom attributes, return values, error bodies, the model server ports, loading
and unloading the script."""

from __future__ import annotations

import sys

import pytest
from app_support import write_model_dir
from sagemaker_tfs import HandlerError
from sagemaker_tfs.app import script
from sagemaker_tfs.app.context import tfs_attributes
from sagemaker_tfs.config import Settings
from sagemaker_tfs.model_client.model_servers import model_servers
from sagemaker_tfs.shared.tfs_api import model_path
from sagemaker_tfs.web import answers
from sagemaker_tfs.web.answers import BadReturnValue


@pytest.mark.parametrize(
    "header, expected",
    [
        ("tfs-model-name=m", ("m", None, None)),
        ("tfs-model-name=m,tfs-model-version=00123,tfs-method=classify", ("m", "00123", "classify")),
        ("tfs-model-version=09223372036854775807", (None, "09223372036854775807", None)),
        ("foo=bar, tfs-method=regress,x", (None, None, "regress")),
        ("tfs-model-name=a.b_c-1,tfs-other=x=y", ("a.b_c-1", None, None)),
        ("tfs-model-name=", (None, None, None)),
        ("model=m", (None, None, None)),
    ],
)
def test_tfs_attributes(header, expected):
    assert tfs_attributes(header) == expected


@pytest.mark.parametrize(
    "header, message",
    [
        ("tfs-model-name=a=b", "invalid tfs-model-name"),
        ("tfs-model-name=.hidden", "invalid tfs-model-name"),
        ("tfs-model-name=" + "a" * 256, "invalid tfs-model-name"),
        ("tfs-model-version=-1", "invalid tfs-model-version: must be a positive integer"),
        ("tfs-model-version=7 ,x", "invalid tfs-model-version: must be a positive integer"),  # nothing is trimmed
        ("tfs-model-version=9223372036854775808", "invalid tfs-model-version: must be at most 9223372036854775807"),
        ("tfs-model-version=" + "9" * 5000, "invalid tfs-model-version: must be at most 9223372036854775807"),
        ("tfs-method=Predict", "invalid tfs-method: must be one of predict|classify|regress"),
    ],
)
def test_invalid_tfs_attributes_are_400(header, message):
    with pytest.raises(HandlerError) as error:
        tfs_attributes(header)
    assert (error.value.status, error.value.message) == (400, message)


def test_model_path():
    assert model_path("m") == "/v1/models/m:predict"
    assert model_path("m", "3", "regress") == "/v1/models/m/versions/3:regress"


@pytest.mark.parametrize(
    "result, accept, expected",
    [
        (("a,b", "text/csv"), "*/*", (200, b"a,b", "text/csv")),
        (("é", None), "*/*", (200, "é".encode(), "application/json")),
        ((b"x", "text/plain", 404), "*/*", (404, b"x", "text/plain")),
        ((bytearray(b"x"), "a/b"), "*/*", (200, b"x", "a/b")),
        (({"a": 1}, "application/x-json"), "*/*", (200, b'{"a": 1}', "application/x-json")),
        ("ab", None, (200, b"ab", "application/json")),
        ("ab", "text/csv;q=0.1, text/plain", (200, b"ab", "text/plain")),
        ("ab", "text/*", (200, b"ab", "application/json")),
        ([1, 2], "text/csv", (200, b"[1, 2]", "application/json")),
    ],
)
def test_return_values(result, accept, expected):
    assert answers.from_return_value(result, accept, "handler") == expected


@pytest.mark.parametrize(
    "result, message",
    [
        (None, "output_handler returned None, which cannot be sent"),
        (("a",), "output_handler returned a tuple of 1 items ('a',)"),
        (
            (None, "text/plain"),
            "output_handler returned (None, 'text/plain'): the body must be str, bytes, dict or list, not NoneType",
        ),
        (("x", "text/plain\r\nX-Evil: 1"), "the content type must be a string"),
        (("x", "text/plain", True), "the status must be an integer from 200 to 599, not True"),
        (("x", "text/plain", 600), "the status must be an integer from 200 to 599, not 600"),
        (("x", "text/plain", 100), "the status must be an integer from 200 to 599, not 100"),
        (("x", "text/plain", 101), "the status must be an integer from 200 to 599, not 101"),
        (3, "output_handler returned 3, which cannot be sent"),
    ],
)
def test_return_values_that_cannot_be_sent(result, message):
    with pytest.raises(BadReturnValue) as error:
        answers.from_return_value(result, "*/*", "output_handler")
    assert message in str(error.value)


def test_error_body():
    assert answers.error(418, 'a "quote" é') == (418, '{"error": "a \\"quote\\" é"}'.encode(), "application/json")


def test_handler_error_needs_an_error_status():
    assert (HandlerError(404, "gone").status, str(HandlerError(404, "gone"))) == (404, "gone")
    for status in (200, 600, "400", True):
        with pytest.raises(ValueError, match="HandlerError status must be an integer from 400 to 599"):
            HandlerError(status, "x")


def test_the_model_servers_are_those_serve_hands_over():
    settings = Settings.from_env({"TFS_REST_PORTS": "8501,8503", "TFS_GRPC_PORTS": "9000,9002"})
    assert [(s.rest_port, s.grpc_port, s.address) for s in model_servers(settings)] == [
        (8501, "9000", "127.0.0.1:8501"),
        (8503, "9002", "127.0.0.1:8503"),
    ]


def test_unload_leaves_no_trace_of_the_script(tmp_path):
    """A process that builds apps one after another (the in-process tests) gets each script's own helpers."""
    model_dir = write_model_dir(
        tmp_path,
        "from helper import VALUE\nfrom libmodule import LIB\n\ndef handler(data, context):\n    return VALUE\n",
        {"helper.py": "VALUE = 1\n", "lib/libmodule.py": "LIB = 2\n"},
    )
    path, modules = list(sys.path), set(sys.modules)
    assert script.load(model_dir).handler is not None
    assert {"inference", "helper", "libmodule"} <= set(sys.modules) - modules
    script.unload(model_dir / "code")
    assert (sys.path, set(sys.modules) & {"inference", "helper", "libmodule"}) == (path, set())
