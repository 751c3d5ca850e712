"""InvokeEndpointWithResponseStream's event stream (runtime_api/event_stream.py) as boto3 reads it: botocore's
EventStream, with the operation's own output shape, turns the messages back into PayloadPart events."""

from __future__ import annotations

import json

import botocore.session
import pytest
from botocore import parsers
from botocore.eventstream import EventStream, EventStreamBuffer
from botocore.exceptions import EventStreamError
from sagemaker_tfs.runtime_api import event_stream


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
