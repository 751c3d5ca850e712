"""What the producers and workers of a pipeline tell its collector (pipeline.py), one event per outcome.

Every event names its object by position (`obj_id`) in the job's object list; the collector alone applies them.
"""

from __future__ import annotations

from dataclasses import dataclass

from .batch_strategy import Batch
from .outcomes import Failure


@dataclass(slots=True)
class ObjectRead:
    """An object was read and decompressed: its size is now known."""

    obj_id: int
    size: int


@dataclass(slots=True)
class RecordRefused:
    """A record failed before any request (over the payload limit, or its InputFilter failed)."""

    obj_id: int
    index: int
    failure: Failure
    size: int  # bytes of the input it covers, for the progress bar


@dataclass(slots=True)
class BatchDone:
    """A request's outcome: its output bytes, or why it failed."""

    obj_id: int
    seq: int  # the batch's position within its object
    batch: Batch
    outcome: bytes | Failure  # the output bytes, or why it failed
    retries: int


@dataclass(slots=True)
class ObjectSplit:
    """The producer is done with an object: how many batches it gave out, or why it stopped."""

    obj_id: int
    batches: int
    records: int
    bytes_read: int  # stored bytes
    failure: Failure | None


Event = ObjectRead | RecordRefused | BatchDone | ObjectSplit
