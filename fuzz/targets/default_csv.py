"""text/csv bodies through the default handler (codecs.tfs_request: its numbers-only fast path and its field by field
path), against Python's csv module (strict RFC 4180) on the same text and the module docstring's field rules: the
same rows, each field a number (exact when it is JSON's spelling, else the float it reads as), a NaN/Infinity token
or the field's string; or a 400 naming the problem."""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal
from typing import Any

from sagemaker_tfs import codecs
from sagemaker_tfs.shared.media_types import CSV

from fuzz.targets._default_handler import EMPTY, accepted, instances, loads, outcome, refused, same, text_of

MODULES = ("sagemaker_tfs.codecs", "sagemaker_tfs.shared.text_records")
NUMBER_CHARACTERS = frozenset("0123456789+-.eE")  # float() reads more (digits of other scripts, `_`): not numbers
NON_FINITE = frozenset(sign + word for sign in ("", "+", "-") for word in ("nan", "inf", "infinity"))


def seeds() -> list[bytes]:
    """Bodies of test/unit/test_codecs.py and test/app/test_app_default_handler.py."""
    fields = ["+1", ".5", "007", "-007", "-000", "1.", "-0", "1E3", '"2.5"', " 3 ", "1_000", "0x10", "1e", "", "true"]
    return [
        b"1.0\n2.0",
        b"1.0\r\n2.0\r\n5.0\r\n",
        b"1,2,3\n4,5,6\n\n",
        b"1, 2.50 ,-3e-2\r\n",
        'a,"b,c","say ""hi""",\n"line\nbreak",é,"",x y\r\n'.encode(),
        b"cat\ndog\n",
        ",".join(fields).encode() + b"\n" + b",".join([b"-"] * len(fields)),
        b"nan,-inf,+Infinity,NaN,1e999\n+1,x,1,2,3\n",
        b"1,2\n3\n",
        b'\n\na,b\n"c",d,e\n',
        b'1,"2\n3\n',
        b'x,y\n"a\nb",c\nd\n',
        b'1,"2"x\n',
        b"\r\n\r\n",
        b"+" + b"7" * 100 + b",00" + b"7" * 100 + b"\n",
        b'"name, 1",1\n"name, 2",2\n',
    ]


def one_input(data: bytes) -> None:
    ours = outcome(lambda: codecs.tfs_request(data, CSV))
    text = text_of(data, ours)
    if text is None:
        return
    rows: list[Any] = []
    width = 0
    try:
        for fields in csv.reader(io.StringIO(text, newline=""), strict=True):
            if not fields or (len(fields) == 1 and not fields[0].strip()):
                continue  # a blank line (a lone field of blanks counts as one)
            if width and len(fields) != width:
                return refused(ours, 400, "every row must have the same number of fields")
            width = len(fields)
            values = [_value(field) for field in fields]
            rows.append(values[0] if width == 1 else values)
    except csv.Error:
        return refused(ours, 400, "is not valid CSV")
    if not rows:
        return refused(ours, 400, "the CSV request body has no rows", EMPTY)
    assert same(instances(accepted(ours)), rows), (text[:300], ours[:300] if isinstance(ours, bytes) else ours)


def _value(field: str) -> Any:
    """What the module docstring says a field is sent as."""
    number = field.strip(" \t")
    if number and NUMBER_CHARACTERS.issuperset(number):
        try:
            value = float(number)
        except ValueError:
            return field
        try:
            written = loads(number)
        except json.JSONDecodeError:
            written = None
        if isinstance(written, (Decimal, float)):
            return written  # JSON's spelling: sent as written
        if not any(c in number for c in ".eE"):
            return Decimal(number)  # an integer: normalised, every digit kept
        return value
    if number.lower() in NON_FINITE:
        return float(number)
    return field
