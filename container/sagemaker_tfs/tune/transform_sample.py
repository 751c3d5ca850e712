"""The sample `tune transform` measures on: a prefix of the job's input, written to a local folder.

Without a SplitType a record is a whole object, so the sample is the first N objects, copied as they are stored.
With one, it is the first N records, in input order, across objects: each object's records written back framed as
they were (lines joined by newlines, RecordIO and TFRecord frames as read) and gzipped again for CompressionType
Gzip, so that the sample's jobs read, split and pack exactly as the full job does. A prefix rather than a random
draw: reading it costs only what it keeps, and a job's objects are alike far more often than not. The full input's
stored size, from the listing, gives the estimate of the whole job's time.
"""

from __future__ import annotations

import gzip
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..shared.storage import InputObject, SourceError, Storage
from ..transform.records import FramingError, joiner, split

WARM_UP_RECORDS = 4  # a new stack's first requests (TensorFlow's first run of the graph) are not measured


class SampleError(ValueError):
    """The input cannot be listed, read or split; the message names the object."""


@dataclass(frozen=True)
class Sample:
    folder: Path  # the sample's objects, named as in the input
    warm_up: Path  # its first records (or object): run once on each new stack, not measured
    objects: int
    records: int
    stored_bytes: int  # the sample's objects as stored (compressed, when they are)
    input_objects: int
    input_bytes: int | None  # the whole input as stored; None when the listing does not say (a manifest)

    def full_records(self) -> float | None:
        """The whole input's records, from its stored size at the sample's bytes per record."""
        if self.input_bytes is None or not self.stored_bytes:
            return None
        return self.records * self.input_bytes / self.stored_bytes


def take(
    storage: Storage,
    data: str,
    data_type: str,
    split_type: str,
    compression: str | None,
    count: int,
    folder: Path,
) -> Sample:
    """The first `count` records (objects, without a SplitType) of the input, written under `folder`."""
    try:
        listed = storage.list_inputs(data, data_type)
    except SourceError as exc:
        raise SampleError(str(exc)) from None
    sizes = [obj.size for obj in listed]
    input_bytes = None if None in sizes else sum(size or 0 for size in sizes)
    sample, warm_up = folder / "sample", folder / "warm-up"
    for target in (sample, warm_up):
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
    records = objects = stored = 0
    for obj in listed:
        if records >= count:
            break
        try:
            body, _ = storage.read_input(obj, compression)
            kept = _prefix(body, split_type, count - records)
        except (OSError, FramingError) as exc:
            raise SampleError(f"Unable to read the input object {obj.label}: {exc}") from None
        if not kept:
            continue
        stored += _write(sample, obj, kept, split_type, compression)
        if not objects:
            _write(warm_up, obj, kept[:WARM_UP_RECORDS], split_type, compression)
        records += len(kept)
        objects += 1
    if not records:
        raise SampleError(f"The input {data} has no records to sample (every object is empty)")
    return Sample(sample, warm_up, objects, records, stored, len(listed), input_bytes)


def _prefix(body: bytes, split_type: str, count: int) -> list[bytes]:
    """At most `count` records of an object, each as its frame (the object itself, without a SplitType)."""
    kept = []
    for record in split(body, split_type):
        kept.append(record.framed)
        if len(kept) == count:
            break
    return kept


def _write(folder: Path, obj: InputObject, records: list[bytes], split_type: str, compression: str | None) -> int:
    """The records as one object under `folder`, framed and compressed as the input; its stored size."""
    body = joiner(split_type).join(records) + (b"\n" if split_type == "Line" else b"")
    stored = gzip.compress(body) if compression == "Gzip" else body
    target = folder / obj.name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(stored)
    return len(stored)
