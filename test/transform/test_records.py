"""Record splitting per SplitType: Line, RecordIO (MXNet framing), TFRecord (checked CRCs), None."""

import struct

import pytest
from sagemaker_tfs.transform.crc32c import crc32c, masked_crc32c
from sagemaker_tfs.transform.records import FramingError, Record, joiner, split

MAGIC = 0xCED7230A


def recordio(data: bytes, flag: int = 0) -> bytes:
    """One MXNet RecordIO frame, written independently of the code under test."""
    return struct.pack("<II", MAGIC, (flag << 29) | len(data)) + data + b"\0" * (-len(data) % 4)


def test_crc32c_matches_the_standard_check_values():
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value (RFC 3720 family)
    assert crc32c(b"") == 0
    assert crc32c(bytes(32)) == 0x8A9136AA  # RFC 3720 B.4: 32 bytes of zeros
    assert crc32c(b"\xff" * 32) == 0x62A8AB43  # RFC 3720 B.4: 32 bytes of ones
    assert crc32c(bytes(range(32))) == 0x46DD794E  # RFC 3720 B.4: incrementing bytes
    assert crc32c(b"6789", crc32c(b"12345")) == 0xE3069283  # continuing a running CRC


def test_lines_drop_terminators_keep_inner_empty_lines_and_a_last_unterminated_line():
    records = list(split(b"a,1\r\nb,2\n\nc,3", "Line"))
    assert [r.data for r in records] == [b"a,1", b"b,2", b"", b"c,3"]
    assert all(r.framed == r.data for r in records)
    assert [r.data for r in split(b"x\ny\n", "Line")] == [b"x", b"y"]  # no record after the final newline


def test_an_empty_object_has_no_records_whatever_the_split_type():
    for split_type in ("None", "Line", "RecordIO", "TFRecord"):
        assert list(split(b"", split_type)) == []


def test_none_is_the_whole_object_as_one_record():
    assert list(split(b"a\nb\n", "None")) == [Record(b"a\nb\n", b"a\nb\n")]


def test_recordio_strips_framing_for_single_and_keeps_it_for_multi():
    frames = [recordio(b"abc"), recordio(b""), recordio(b"12345678")]
    records = list(split(b"".join(frames), "RecordIO"))
    assert [r.data for r in records] == [b"abc", b"", b"12345678"]
    assert [r.framed for r in records] == frames
    assert joiner("RecordIO") == b"" and joiner("Line") == b"\n"


def test_recordio_joins_a_record_written_in_parts_with_the_magic_number():
    magic = struct.pack("<I", MAGIC)
    body = recordio(b"head", 1) + recordio(b"mid", 2) + recordio(b"tail", 3) + recordio(b"next")
    records = list(split(body, "RecordIO"))
    assert [r.data for r in records] == [b"head" + magic + b"mid" + magic + b"tail", b"next"]
    assert records[0].framed == recordio(b"head", 1) + recordio(b"mid", 2) + recordio(b"tail", 3)


@pytest.mark.parametrize(
    "body, message",
    [
        (
            recordio(b"abc") + b"\x00\x01\x02\x03\x04\x05\x06\x07",
            "RecordIO record at byte 12 does not start with the magic",
        ),
        (recordio(b"abcdef")[:10], "RecordIO record at byte 0 is truncated"),
        (recordio(b"x", 2), "continuation flag 2 out of sequence"),
    ],
)
def test_bad_recordio_framing_is_reported_with_its_offset(body, message):
    with pytest.raises(FramingError, match=message):
        list(split(body, "RecordIO"))


def tfrecord(data: bytes) -> bytes:
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc32c(length)) + data + struct.pack("<I", masked_crc32c(data))


def test_tfrecord_files_written_by_tensorflow_split_into_their_records(tfrecord_file):
    path, payloads = tfrecord_file
    body = path.read_bytes()
    records = list(split(body, "TFRecord"))
    assert [r.data for r in records] == payloads
    assert b"".join(r.framed for r in records) == body  # framing kept for MultiRecord
    assert records[0].framed == tfrecord(payloads[0])


def test_tfrecord_crc_mismatches_and_truncation_are_reported(tfrecord_file):
    body = bytearray(tfrecord_file[0].read_bytes())
    first = len(tfrecord(tfrecord_file[1][0]))
    corrupted = bytes(body[: first + 14]) + bytes([body[first + 14] ^ 0xFF]) + bytes(body[first + 15 :])
    with pytest.raises(FramingError, match=f"TFRecord at byte {first} is corrupted: the CRC of its data"):
        list(split(corrupted, "TFRecord"))
    with pytest.raises(FramingError, match="TFRecord at byte 0 is corrupted: the CRC of its length"):
        list(split(b"\x05" + bytes(body[1:]), "TFRecord"))
    last = len(body) - len(tfrecord(tfrecord_file[1][-1]))
    with pytest.raises(FramingError, match=f"TFRecord at byte {last} is truncated: 1000 bytes announced, 500 left"):
        list(split(bytes(body[: last + 12 + 500 + 4]), "TFRecord"))
    with pytest.raises(FramingError, match=f"TFRecord at byte {first} is truncated: 10 bytes left"):
        list(split(bytes(body[: first + 10]), "TFRecord"))
