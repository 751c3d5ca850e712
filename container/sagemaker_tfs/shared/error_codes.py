"""TensorFlow's canonical error codes, and how REST and gRPC report them (TFS's mapping)."""

from __future__ import annotations

import enum


class Code(enum.IntEnum):
    """absl/TensorFlow status codes; the numbers are those of gRPC's status codes."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


# TFS's http_server.cc ToHTTPStatusCode.
HTTP_STATUS = {
    Code.OK: 200,
    Code.CANCELLED: 499,
    Code.UNKNOWN: 500,
    Code.INVALID_ARGUMENT: 400,
    Code.DEADLINE_EXCEEDED: 504,
    Code.NOT_FOUND: 404,
    Code.ALREADY_EXISTS: 409,
    Code.PERMISSION_DENIED: 403,
    Code.RESOURCE_EXHAUSTED: 429,
    Code.FAILED_PRECONDITION: 400,
    Code.ABORTED: 409,
    Code.OUT_OF_RANGE: 400,
    Code.UNIMPLEMENTED: 501,
    Code.INTERNAL: 500,
    Code.UNAVAILABLE: 503,
    Code.DATA_LOSS: 500,
    Code.UNAUTHENTICATED: 401,
}


class ServingError(Exception):
    """A request (or a load) failed with a TensorFlow status: a code and TFS's message."""

    def __init__(self, code: Code, message: str):
        super().__init__(message)
        self.code = Code(code)
        self.message = message

    @property
    def http_status(self) -> int:
        return HTTP_STATUS[self.code]

    def __repr__(self) -> str:
        return f"ServingError({self.code.name}, {self.message!r})"


def invalid_argument(message: str) -> ServingError:
    return ServingError(Code.INVALID_ARGUMENT, message)


def not_found(message: str) -> ServingError:
    return ServingError(Code.NOT_FOUND, message)


def from_tensorflow(exc: BaseException) -> ServingError:
    """A TensorFlow OpError (from a session run or a load) as a ServingError with the same code."""
    code = getattr(exc, "error_code", None)
    message = getattr(exc, "message", None) or str(exc)
    try:
        return ServingError(Code(code), message)  # type: ignore[arg-type]  # (None is not a Code: ValueError)
    except ValueError:
        return ServingError(Code.UNKNOWN, message)
