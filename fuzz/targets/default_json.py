"""application/json bodies through the default handler (codecs.tfs_request), against Python's json and TensorFlow
Serving's request rules: a body json reads is sent as TFS would get it (a TFS request byte for byte, else the
instances of the value), several values one per line as JSON lines, and any other body is a 400 naming why."""

from __future__ import annotations

import json

from sagemaker_tfs import codecs
from sagemaker_tfs.errors import HandlerError
from sagemaker_tfs.shared.media_types import JSON
from sagemaker_tfs.shared.tfs_api import REQUEST_KEYS

from fuzz.targets._default_handler import (
    BOM,
    TOO_DEEP,
    accepted,
    instances,
    json_lines,
    loads,
    outcome,
    refused,
    refused_json,
    same,
    text_of,
    too_deep,
)

MODULES = ("sagemaker_tfs.codecs", "sagemaker_tfs.shared.text_records")


def seeds() -> list[bytes]:
    """Bodies of test/unit/test_codecs.py and test/app/test_app_default_handler.py."""
    return [
        b'{"instances": [1.0, 2.0]}',
        b'{"signature_name": "s", "inputs": {"x": [[1]]}}',
        b'{"examples": [{"x": 1}], "context": {"y": 2}}',
        b'  {"instances":[1e3,  NaN]}\n',
        b"[[1, 2], [3, 4]]",
        b" [\n [1], [2]]",
        b"[[]]",
        b"[1.0, 2.0, 5.0]",
        b'[1, [2]]\n[{"x": 1}, {"x": 2}]',
        b'[]\n1.5\n"text"\nnull',
        b'{"x": 1, "y": [2]}',
        b'\xef\xbb\xbf{"instances": ["\xc3\xa9"]}',
        b" \r\n\t",
        b"[1, \xff]",
        b"[1, 2",
        b"{'a': 1}",
        b"[1] x",
        b"[[" + b"7" * 200 + b"]]",
        b"[" * 1200 + b"]" * 1200,
        b'{"x": 1}\n{"x": 2}\n',
        b'{"x": 1}\n{"x": \n',
        b"1\n-2.5e3\n3\n",
        b"[-Infinity, 1E+2, -0, 0.5e-3, true, false]",
        b'{"instances": [1]}\n{"instances": [2]}',
    ]


def one_input(data: bytes) -> None:
    ours = outcome(lambda: codecs.tfs_request(data, JSON))
    text = text_of(data, ours)
    if text is None:
        return
    try:
        value = loads(text)
    except RecursionError:
        return refused(ours, 400, TOO_DEEP)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":  # several values: read as JSON lines (the module's docstring)
            return _json_lines(text, ours)
        return refused_json(ours, text, "the request body is not valid JSON: ")
    if too_deep(ours, [value]):
        return
    body = accepted(ours)
    if isinstance(value, dict) and any(key in value for key in REQUEST_KEYS):
        assert body == data.removeprefix(BOM), "a TFS request must be sent byte for byte"
        return
    # a list of lists is the instances; any other value is one instance
    rows = isinstance(value, list) and value and isinstance(value[0], list)
    assert same(instances(body), value if rows else [value]), (data[:300], body[:300])


def _json_lines(text: str, ours: bytes | HandlerError) -> None:
    try:
        values = json_lines(text)
    except RecursionError:
        return refused(ours, 400, TOO_DEEP)
    if isinstance(values, int):
        return refused_json(ours, text, f"JSON lines: line {values} is not one JSON value: ")
    if too_deep(ours, values):
        return
    assert same(instances(accepted(ours)), values), text[:300]
