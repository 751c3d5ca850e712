"""InvokeEndpointWithResponseStream's event stream (runtime_api/event_stream.py) as boto3 reads it: botocore's
EventStream, with the operation's own output shape, turns the messages back into PayloadPart events."""

from __future__ import annotations

import json
import logging

import botocore.session
import pytest
from botocore import parsers
from botocore.eventstream import EventStream, EventStreamBuffer
from botocore.exceptions import EventStreamError
from sagemaker_tfs.config import Settings
from sagemaker_tfs.runtime_api import event_stream, realtime
from sagemaker_tfs.runtime_api.container import StreamBroken, StreamTimedOut


class _Raw:
    """What botocore's EventStream reads from: an HTTP body in chunks of any size."""

    def __init__(self, data: bytes, chunk: int):
        self.data, self.chunk = data, chunk

    def stream(self):
        for at in range(0, len(self.data), self.chunk):
            yield self.data[at : at + self.chunk]

    def close(self) -> None:
        pass


def _stream(data: bytes, chunk: int) -> EventStream:
    model = botocore.session.get_session().get_service_model("sagemaker-runtime")
    shape = model.operation_model("InvokeEndpointWithResponseStream").output_shape.members["Body"]
    return EventStream(_Raw(data, chunk), shape, parsers.EventStreamJSONParser(), "InvokeEndpointWithResponseStream")


def _events(data: bytes, chunk: int) -> list[dict]:
    return list(_stream(data, chunk))


@pytest.mark.parametrize("size", [0, 1, 65536, 65537, 200_000])
@pytest.mark.parametrize("chunk", [1, 7, 65536])
def test_an_answer_in_payload_parts_is_read_back_whole_by_botocore(size, chunk):
    body = bytes(range(256)) * (size // 256) + bytes(size % 256)
    events = _events(b"".join(event_stream.payload_parts(body)), chunk)
    assert [list(event) for event in events] == [["PayloadPart"]] * -(-size // event_stream.PART_SIZE)
    assert b"".join(event["PayloadPart"]["Bytes"] for event in events) == body


@pytest.mark.parametrize(
    "kind, members",
    [
        ("ModelStreamError", {"ErrorCode": "StreamBroken"}),
        ("ModelStreamError", {"ErrorCode": "ModelInvocationTimeExceeded"}),
        ("InternalStreamFailure", {}),
    ],
)
def test_an_exception_event_after_parts_is_raised_by_botocore_s_iteration_with_its_members(kind, members):
    data = b"".join(event_stream.payload_parts(b"first")) + event_stream.exception(kind, "it broke", **members)
    iterator = iter(_stream(data, 5))
    assert next(iterator) == {"PayloadPart": {"Bytes": b"first"}}
    with pytest.raises(EventStreamError) as raised:
        next(iterator)
    assert raised.value.response["Error"] == {"Code": kind, "Message": "it broke"}
    assert str(raised.value) == (
        f"An error occurred ({kind}) when calling the InvokeEndpointWithResponseStream operation: it broke"
    )
    reader = EventStreamBuffer()  # botocore keeps Code and Message only: the members, as written
    reader.add_data(event_stream.exception(kind, "it broke", **members))
    [read] = list(reader)
    assert json.loads(read.payload) == {"Message": "it broke", **members}


def test_a_message_s_bytes_are_the_format_s():
    written = event_stream.message([(":event-type", "PayloadPart")], b"ab")
    header = b"\x0b:event-type\x07\x00\x0bPayloadPart"
    assert written[:8] == (16 + len(header) + 2).to_bytes(4, "big") + len(header).to_bytes(4, "big")
    assert written[12:-4] == header + b"ab"
    reader = EventStreamBuffer()
    reader.add_data(written)
    [read] = list(reader)
    assert (read.headers, read.payload) == ({":event-type": "PayloadPart"}, b"ab")


@pytest.mark.parametrize(
    "headers, payload, why",
    [
        ([("", "v")], b"", "a header name takes 1 to 255 bytes: ''"),
        ([("n" * 256, "v")], b"", "a header name takes 1 to 255 bytes"),
        ([("n", "v" * 65536)], b"", "the value of header n takes 65536 bytes, over 65535"),
        ([], bytes(16 * 1024 * 1024 + 1), "the payload takes 16777217 bytes, over 16777216"),
    ],
)
def test_what_the_format_cannot_hold_is_a_value_error(headers, payload, why):
    with pytest.raises(ValueError, match=why.replace("(", r"\(")):
        event_stream.message(headers, payload)


def _pieces(*items):
    """A container's answer as the runtime API reads it: pieces, then what ended it (an exception to raise)."""
    for item in items:
        if isinstance(item, BaseException):
            raise item
        yield item


@pytest.mark.parametrize(
    "ending, code, message",
    [
        (StreamBroken("cut"), "ModelStreamError", realtime.STREAM_BROKEN),
        (StreamTimedOut("late"), "ModelStreamError", realtime.STREAM_TIMED_OUT),
        (
            RuntimeError("a bug of ours"),
            "InternalStreamFailure",
            "The stream processing failed: a bug of ours. Try your request again.",
        ),
    ],
)
def test_a_stream_that_ends_early_ends_with_the_event_that_says_why_logged_with_the_request_id(
    ending, code, message, caplog, tmp_path
):
    operation = realtime.InvokeEndpointWithResponseStream(
        Settings.from_env({"SAGEMAKER_RUNTIME_DIR": str(tmp_path)}), None, None
    )
    pieces = _pieces(b"first", ending)
    with caplog.at_level(logging.WARNING, "sagemaker_tfs.runtime_api"):
        data = b"".join(operation._events(pieces, "rid-1", "e"))
    iterator = iter(_stream(data, 7))
    assert next(iterator) == {"PayloadPart": {"Bytes": b"first"}}
    with pytest.raises(EventStreamError) as raised:
        next(iterator)
    assert raised.value.response["Error"] == {"Code": code, "Message": message}
    assert [record.getMessage().split(":")[0] for record in caplog.records] == ["request rid-1"]
    assert pieces.gi_frame is None  # the pieces closed: the container's connection with them
