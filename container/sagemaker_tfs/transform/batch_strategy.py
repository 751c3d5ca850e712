"""Packing the records of one object into request bodies (BatchStrategy and MaxPayloadInMB).

SingleRecord: one record per request. MultiRecord: records are packed greedily, in order, while the body stays
within the limit (records joined by a newline for Line, concatenated for RecordIO/TFRecord); a batch never mixes
objects. A record larger than the limit on its own is reported (SageMaker: "Too much data for max payload size")
and not sent. A limit of 0 means no limit.

[INF] The limit is MaxPayloadInMB x 1,048,576 bytes and a body may be exactly that size; the body of a Line batch
has no trailing newline.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

MIB = 1024 * 1024
PAYLOAD_TOO_LARGE = "Too much data for max payload size"


# Dataclasses rather than NamedTuples: a field named `index` would shadow tuple.index
@dataclass(frozen=True, slots=True)
class Item:
    index: int  # position of the record in its object
    body: bytes  # what is sent for it
    original: bytes | None  # the record as read, kept when DataProcessing joins or splits the response
    size: int  # bytes of the object it stands for (framing and newline included): for progress


@dataclass
class Batch:
    indexes: list[int]
    body: bytes
    originals: list[bytes | None]
    size: int  # bytes of the object its records stand for


@dataclass(frozen=True, slots=True)
class TooLarge:
    index: int
    size: int


def pack(items: Iterable[Item], multi_record: bool, limit: int, joiner: bytes) -> Iterator[Batch | TooLarge]:
    """Batches in order; `limit` in bytes, 0 for none."""
    indexes: list[int] = []
    bodies: list[bytes] = []
    originals: list[bytes | None] = []
    length = covered = 0  # of the body being built, of the object it stands for
    for item in items:
        if limit and len(item.body) > limit:
            yield TooLarge(item.index, item.size)
            continue
        if not multi_record:
            yield Batch([item.index], item.body, [item.original], item.size)
            continue
        if bodies and limit and length + len(joiner) + len(item.body) > limit:
            yield Batch(indexes, joiner.join(bodies), originals, covered)
            indexes, bodies, originals, length, covered = [], [], [], 0, 0
        length += (len(joiner) if bodies else 0) + len(item.body)
        covered += item.size
        indexes.append(item.index)
        bodies.append(item.body)
        originals.append(item.original)
    if bodies:
        yield Batch(indexes, joiner.join(bodies), originals, covered)
