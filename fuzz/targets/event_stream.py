"""InvokeEndpointWithResponseStream's event stream (runtime_api/event_stream.py) against botocore's reader, both
ways: every message written is read back by botocore.eventstream with the same headers and payload, and what botocore
read writes the same bytes again; a header or payload over the format's limits is a ValueError, nothing else.

An input is fields split at NUL: pairs of header name and value, then the payload (the last field, or none)."""

from __future__ import annotations

from botocore.eventstream import EventStreamBuffer
from sagemaker_tfs.runtime_api import event_stream

MODULES = ("sagemaker_tfs.runtime_api.event_stream",)
MAX_LEN = 4096


def seeds() -> list[bytes]:
    """The operation's own events, and the edges of the format."""
    return [
        b':message-type\0event\0:event-type\0PayloadPart\0:content-type\0application/octet-stream\0{"a": 1}',
        b":message-type\0exception\0:exception-type\0ModelStreamError\0:content-type\0application/json\0"
        b'{"Message": "m", "ErrorCode": "StreamBroken"}',
        b"",
        b"\0",
        b"x\0\0",
        b"\xc3\xa9\0\xe2\x82\xac\0\xff\xfe",
        b"n" * 255 + b"\0v\0p",
        b"n" * 256 + b"\0v\0p",
        b"a\0" + b"v" * 3000 + b"\0",
    ]


def one_input(data: bytes) -> None:
    *fields, payload = data.split(b"\0") if data else [b""]
    names = [field.decode("utf-8", "replace") for field in fields[0::2]]
    values = [field.decode("utf-8", "replace") for field in fields[1::2]]
    headers = list(dict(zip(names, values, strict=False)).items())  # a name once (botocore reads headers into a dict)
    try:
        written = event_stream.message(headers, payload)
    except ValueError:
        assert any(not 0 < len(name.encode()) <= event_stream.MAX_HEADER_NAME for name, _ in headers), headers
        return
    reader = EventStreamBuffer()
    reader.add_data(written)
    [read] = list(reader)
    assert read.headers == dict(headers), (read.headers, headers)
    assert read.payload == payload
    assert event_stream.message(list(read.headers.items()), read.payload) == written
