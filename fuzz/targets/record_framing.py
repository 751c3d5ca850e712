"""Batch Transform's record splitting (transform/records.split): FramingError or records that tile the object.

The first byte picks the SplitType (and the mode); the rest is either an object to split as it is, or records to
frame with the encoders below (written from the formats, not from records.py) and split back unchanged.
"""

import struct

from sagemaker_tfs.transform.records import FramingError, split

MODULES = ("sagemaker_tfs.transform.records",)
MAX_LEN = 2048
SPLIT_TYPES = ("TFRecord", "RecordIO", "Line", "None")
SEPARATOR = b"\xa5"  # between the records the round trip frames
MAGIC = 0xCED7230A
MAGIC_BYTES = struct.pack("<I", MAGIC)


def _table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1  # CRC-32C's reflected polynomial
        table.append(crc)
    return table


TABLE = _table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc = TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def tfrecord(data: bytes) -> bytes:
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked(length)) + data + struct.pack("<I", masked(data))


def recordio(data: bytes) -> bytes:
    """dmlc's RecordIOWriter: the magic number at a 4-byte boundary of the data splits the record into parts
    (flags 1, 2..., 3) without it; the last part is zero-padded to 4 bytes."""
    frames, start = [], 0
    for at in range(0, len(data) - 3, 4):
        if data[at : at + 4] == MAGIC_BYTES:
            frames.append(struct.pack("<II", MAGIC, (1 if start == 0 else 2) << 29 | (at - start)) + data[start:at])
            start = at + 4
    rest = data[start:]
    frames.append(struct.pack("<II", MAGIC, (3 if frames else 0) << 29 | len(rest)) + rest + bytes(-len(rest) % 4))
    return b"".join(frames)


def recordio_data(framed: bytes) -> bytes:
    """A RecordIO record's data from its frames: the parts joined with the magic number."""
    parts, pos = [], 0
    while pos < len(framed):
        (header,) = struct.unpack_from("<I", framed, pos + 4)
        length = header & ((1 << 29) - 1)
        parts.append(framed[pos + 8 : pos + 8 + length])
        pos += 8 + length + -length % 4
    return MAGIC_BYTES.join(parts)


ENCODERS = {"TFRecord": tfrecord, "RecordIO": recordio}


def seeds() -> list[bytes]:
    # test/transform/test_records.py's objects
    found = [
        b"\x02a,1\r\nb,2\n\nc,3",
        b"\x02x\ny\n",
        b"\x03a\nb\n",
        b"\x01" + recordio(b"abc") + recordio(b"") + recordio(b"12345678"),
        b"\x01" + recordio(b"head" + MAGIC_BYTES + b"mid\0" + MAGIC_BYTES + b"tail"),
        b"\x01" + recordio(b"abc") + b"\x00\x01\x02\x03\x04\x05\x06\x07",
        b"\x01" + recordio(b"abcdef")[:10],
        b"\x00" + tfrecord(b"\n\x0f\n\r\n\x01x\x12\x08\x12\x06\n\x04\x00\x00\x80?") + tfrecord(b""),
        b"\x00" + tfrecord(b"payload")[:-1],
        b"\x10abc" + SEPARATOR + b"" + SEPARATOR + b"12345678",
        b"\x11head" + MAGIC_BYTES + b"tail" + SEPARATOR + b"x" * 8 + MAGIC_BYTES,
    ]
    return found


def one_input(data: bytes) -> None:
    if not data:
        return
    mode, body = data[0], data[1:]
    split_type = SPLIT_TYPES[mode & 3]
    if mode & 0x10 and split_type in ENCODERS:
        sent = body.split(SEPARATOR)
        framed = [ENCODERS[split_type](record) for record in sent]
        records = list(split(b"".join(framed), split_type))
        assert [record.data for record in records] == sent, (sent, records)
        assert [record.framed for record in records] == framed
        return
    try:
        records = list(split(body, split_type))
    except FramingError as exc:
        assert split_type in ENCODERS, (split_type, exc)
        assert " at byte " in str(exc), exc  # the message gives the offset
        return
    if split_type in ENCODERS:  # the frames tile the object, in order
        assert b"".join(record.framed for record in records) == body, records
    if split_type == "TFRecord":
        for record in records:
            assert record.framed == tfrecord(record.data), record
    elif split_type == "RecordIO":
        for record in records:
            assert record.framed[:4] == MAGIC_BYTES and recordio_data(record.framed) == record.data, record
    elif split_type == "Line":
        lines = [line.removesuffix(b"\r") for line in body.removesuffix(b"\n").split(b"\n")] if body else []
        assert [record.data for record in records] == lines, records
        assert all(record.framed == record.data for record in records)
    else:
        assert records == ([(body, body)] if body else []), records
