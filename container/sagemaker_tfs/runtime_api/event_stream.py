"""The event stream of InvokeEndpointWithResponseStream's answer (`application/vnd.amazon.eventstream`), written as
SageMaker Runtime writes it and botocore's decoder (botocore.eventstream) reads it: messages of a prelude (total
length, headers length, the prelude's CRC32), headers, a payload and the message's CRC32, all big-endian. Headers
here are strings only (type 7, a 2-byte length), the one type the operation's events carry. No well-kept Python
library writes this framing (botocore and boto3 only read it), so it is written here, and checked against botocore's
reader by the tests and a fuzz harness (fuzz/targets/event_stream.py)."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

from ..shared import json_bodies

MEDIA_TYPE = "application/vnd.amazon.eventstream"
STRING = 7  # a header value's type: a UTF-8 string of at most 65,535 bytes
MAX_HEADER_NAME = 255  # bytes
MAX_HEADER_VALUE = 65535  # bytes
MAX_HEADERS = 128 * 1024  # bytes of headers in one message, botocore's limit
MAX_PAYLOAD = 16 * 1024 * 1024  # bytes of payload in one message, botocore's limit
PART_SIZE = 64 * 1024  # the payload of a PayloadPart at most: a container's answer goes in parts of this size


def message(headers: Sequence[tuple[str, str]], payload: bytes) -> bytes:
    """One message; ValueError for a header or payload over the format's limits."""
    encoded = b"".join(_header(name, value) for name, value in headers)
    if len(encoded) > MAX_HEADERS:
        raise ValueError(f"the headers take {len(encoded)} bytes, over {MAX_HEADERS}")
    if len(payload) > MAX_PAYLOAD:
        raise ValueError(f"the payload takes {len(payload)} bytes, over {MAX_PAYLOAD}")
    prelude = struct.pack(">II", 16 + len(encoded) + len(payload), len(encoded))
    head = prelude + struct.pack(">I", zlib.crc32(prelude)) + encoded
    return head + payload + struct.pack(">I", zlib.crc32(payload, zlib.crc32(head)))


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    if not 0 < len(raw_name) <= MAX_HEADER_NAME:
        raise ValueError(f"a header name takes 1 to {MAX_HEADER_NAME} bytes: {name!r}")
    if len(raw_value) > MAX_HEADER_VALUE:
        raise ValueError(f"the value of header {name} takes {len(raw_value)} bytes, over {MAX_HEADER_VALUE}")
    return struct.pack(">B", len(raw_name)) + raw_name + struct.pack(">BH", STRING, len(raw_value)) + raw_value


def payload_parts(piece: bytes) -> list[bytes]:
    """The PayloadPart events of a piece of a container's answer, PART_SIZE bytes at most each (none for an empty
    piece)."""
    return [message(_EVENT, piece[at : at + PART_SIZE]) for at in range(0, len(piece), PART_SIZE)]


def exception(kind: str, message_text: str, **members: str) -> bytes:
    """The event that ends a stream with an error of the operation's ResponseStream (ModelStreamError,
    InternalStreamFailure): botocore raises it from the EventStream's iteration as an EventStreamError whose code
    is `kind`, with `Message` and the other members (ModelStreamError's ErrorCode) in its response."""
    headers = ((":message-type", "exception"), (":exception-type", kind), (":content-type", "application/json"))
    return message(headers, json_bodies.encode({"Message": message_text, **members}))


_EVENT = ((":message-type", "event"), (":event-type", "PayloadPart"), (":content-type", "application/octet-stream"))
