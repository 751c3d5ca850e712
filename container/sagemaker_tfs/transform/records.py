"""Record splitting, per SplitType, of one (decompressed) input object.

Each record has two forms: `data`, what a SingleRecord request sends (framing removed), and `framed`, what a
MultiRecord request concatenates (framing kept, as SageMaker sends RecordIO and TFRecord batches unchanged).

Choices where SageMaker's behaviour is not documented ([INF] in docs/batch-transform.md):
  * Line: a record is a line without its `\\n`; one trailing `\\r` is removed too (CRLF files); a last line
    without `\\n` is a record; the empty tail after the final `\\n` is not; empty lines inside are records.
  * An empty object has no records (so no request is sent, and its `.out` is empty), whatever the SplitType.
  * RecordIO (MXNet/dmlc framing): a record written in parts (continuation flag 1, 2..., 3) is one record; its
    data is the parts joined with the magic number, as dmlc's reader does.
  * TFRecord: both CRCs are checked; a bad frame fails the object with the byte offset of the frame.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from .crc32c import masked_crc32c

SPLIT_TYPES = ("None", "Line", "RecordIO", "TFRecord")

RECORDIO_MAGIC = 0xCED7230A
_MAGIC_BYTES = struct.pack("<I", RECORDIO_MAGIC)


class FramingError(ValueError):
    """The object is not framed as its SplitType says; the message gives the byte offset."""


class Record(NamedTuple):
    data: bytes  # sent alone (SingleRecord)
    framed: bytes  # sent in a batch (MultiRecord): the same as data, except for RecordIO and TFRecord


def joiner(split_type: str) -> bytes:
    """What MultiRecord puts between two framed records: lines are joined by a newline, frames by nothing."""
    return b"\n" if split_type == "Line" else b""


def split(body: bytes, split_type: str) -> Iterator[Record]:
    """The records of one object, in order."""
    if not body:
        return iter(())
    if split_type == "None":
        return iter((Record(body, body),))
    if split_type == "Line":
        return _lines(body)
    if split_type == "RecordIO":
        return _recordio(body)
    if split_type == "TFRecord":
        return _tfrecords(body)
    raise ValueError(f"unknown SplitType {split_type!r}")


def _lines(body: bytes) -> Iterator[Record]:
    lines = body.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    for line in lines:
        if line.endswith(b"\r"):
            line = line[:-1]
        yield Record(line, line)


def _recordio(body: bytes) -> Iterator[Record]:
    view = memoryview(body)
    size = len(body)
    pos = 0
    while pos < size:
        start = pos
        parts: list[bytes] = []
        while True:
            if pos + 8 > size:
                raise FramingError(f"RecordIO record at byte {start} is truncated: no header at byte {pos}")
            magic, header = struct.unpack_from("<II", view, pos)
            if magic != RECORDIO_MAGIC:
                raise FramingError(
                    f"RecordIO record at byte {pos} does not start with the magic number "
                    f"0x{RECORDIO_MAGIC:08X} (found 0x{magic:08X})"
                )
            flag, length = header >> 29, header & ((1 << 29) - 1)
            data_start = pos + 8
            pos = data_start + length + (-length % 4)  # data is zero-padded to a 4-byte boundary
            if data_start + length > size:
                raise FramingError(
                    f"RecordIO record at byte {start} is truncated: {length} bytes announced, {size - data_start} left"
                )
            if flag not in ((2, 3) if parts else (0, 1)):
                raise FramingError(f"RecordIO record at byte {start} has continuation flag {flag} out of sequence")
            parts.append(body[data_start : data_start + length])
            if flag in (0, 3):
                break
        yield Record(_MAGIC_BYTES.join(parts), body[start : min(pos, size)])


def _tfrecords(body: bytes) -> Iterator[Record]:
    view = memoryview(body)
    size = len(body)
    pos = 0
    while pos < size:
        if pos + 12 > size:
            raise FramingError(f"TFRecord at byte {pos} is truncated: {size - pos} bytes left for a 12-byte header")
        (length,) = struct.unpack_from("<Q", view, pos)
        (length_crc,) = struct.unpack_from("<I", view, pos + 8)
        if masked_crc32c(view[pos : pos + 8]) != length_crc:
            raise FramingError(f"TFRecord at byte {pos} is corrupted: the CRC of its length does not match")
        data_start = pos + 12
        end = data_start + length + 4
        if end > size:
            raise FramingError(
                f"TFRecord at byte {pos} is truncated: {length} bytes announced, {max(0, size - data_start - 4)} left"
            )
        data = body[data_start : data_start + length]
        (data_crc,) = struct.unpack_from("<I", view, data_start + length)
        if masked_crc32c(data) != data_crc:
            raise FramingError(f"TFRecord at byte {pos} is corrupted: the CRC of its data does not match")
        yield Record(data, body[pos:end])
        pos = end
