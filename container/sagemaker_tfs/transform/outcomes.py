"""How a job, an object or a record ended, in SageMaker's words (the values are what DescribeTransformJob shows)."""

from __future__ import annotations

from dataclasses import dataclass

from ..shared.str_enum import StrEnum


class Status(StrEnum):
    """TransformJobStatus, also used for each object of the job."""

    IN_PROGRESS = "InProgress"
    COMPLETED = "Completed"
    FAILED = "Failed"
    STOPPED = "Stopped"


class FailureKind(StrEnum):
    """The prefix of a failed job's FailureReason: who is at fault."""

    CLIENT = "ClientError"  # the job's input or settings
    ALGORITHM = "AlgorithmError"  # the container


@dataclass(frozen=True, slots=True)
class Failure:
    message: str
    kind: FailureKind
