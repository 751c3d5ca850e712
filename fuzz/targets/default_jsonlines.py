"""JSON lines bodies through the default handler (codecs.tfs_request), against splitting the text at line feeds and
Python's json on each line: the values of the non-blank lines are the instances, or a 400 names the first line
that is not one JSON value. The first byte picks the Content-Type among the format's names, spelt as clients do."""

from __future__ import annotations

from sagemaker_tfs import codecs
from sagemaker_tfs.shared.media_types import JSON_LINES, JSONS

from fuzz.targets._default_handler import (
    TOO_DEEP,
    accepted,
    instances,
    json_lines,
    outcome,
    refused,
    refused_json,
    same,
    text_of,
    too_deep,
)

MODULES = ("sagemaker_tfs.codecs", "sagemaker_tfs.shared.text_records")
CONTENT_TYPES = (
    JSON_LINES,
    JSONS,
    "application/x-jsonlines",
    "application/jsonl",
    "Application/JSONLines; charset=utf-8",
    " application/jsonl ;x=y",
)


def seeds() -> list[bytes]:
    """Bodies of test/unit/test_codecs.py and test/app/test_app_default_handler.py, after a Content-Type byte."""
    bodies = [
        b'{"x": [1, 2]}\r\n"s"\n\n  [3]  \n4\n',
        b"1\n-2.5e3\n3\n",
        b"1\nNaN\n",
        b'{"instances": [1]}\n',
        b"1\n2 3\n",
        b'[1]\n\n{"a": }\n',
        b"[1,\n2]\n",
        b"\n\n",
        b"[1.0]\n[2.0]\n",
        b"-" + b"7" * 100 + b"\n[1]",
        b"1\n" + b"[" * 1200,
        b"\xef\xbb\xbf1\n\t-0\r\n1e400",
    ]
    return [bytes([index % len(CONTENT_TYPES)]) + body for index, body in enumerate(bodies)]


def one_input(data: bytes) -> None:
    if not data:
        return
    content_type, data = CONTENT_TYPES[data[0] % len(CONTENT_TYPES)], data[1:]
    ours = outcome(lambda: codecs.tfs_request(data, content_type))
    text = text_of(data, ours)
    if text is None:
        return
    try:
        values = json_lines(text)
    except RecursionError:
        return refused(ours, 400, TOO_DEEP)
    if isinstance(values, int):
        return refused_json(ours, text, f"JSON lines: line {values} is not one JSON value: ")
    if too_deep(ours, values):
        return
    assert same(instances(accepted(ours)), values), text[:300]
