"""SageMaker Runtime's error answers, as its service model (botocore's `sagemaker-runtime` 2017-05-13) describes them:
a status, the error code in `x-amzn-ErrorType`, and a JSON body whose members botocore parses into the exception
(`Message`, and for ModelError `OriginalStatusCode`, `OriginalMessage`, `LogStreamArn`)."""

from __future__ import annotations

import logging
from typing import Any

from ..shared import json_bodies
from ..shared.media_types import JSON
from ..web.answers import AnsweringError, Reply

log = logging.getLogger("sagemaker_tfs.runtime_api")

ERROR_TYPE_HEADER = "x-amzn-ErrorType"
PRIMARY = "primary"  # how SageMaker names a single-container endpoint's container in its messages


class RuntimeApiError(AnsweringError):
    """One of the operations' errors: `code` is the service model's shape name, `members` its other fields."""

    def __init__(self, status: int, code: str, message: str, **members: Any):
        super().__init__(message)
        self.status, self.code, self.message, self.members = status, code, message, members

    def answer(self, rid: str, method: str, path: str) -> Reply:
        """The answer botocore turns into the named exception."""
        log.info("request %s: %s %s: %s %s", rid, method, path, self.code, self.message)
        body = json_bodies.encode({"Message": self.message, **self.members})
        return Reply(self.status, body, JSON, [(ERROR_TYPE_HEADER, self.code)])


def validation(message: str) -> RuntimeApiError:
    return RuntimeApiError(400, "ValidationError", message)


def service_unavailable(message: str) -> RuntimeApiError:
    return RuntimeApiError(503, "ServiceUnavailable", message)


def model_not_ready(message: str) -> RuntimeApiError:
    return RuntimeApiError(429, "ModelNotReadyException", message)


def throttled(message: str) -> RuntimeApiError:
    # Not in the operations' list: AWS's common error of every API, which botocore's retries know
    return RuntimeApiError(400, "ThrottlingException", message)


def internal_failure(message: str) -> RuntimeApiError:
    return RuntimeApiError(500, "InternalFailure", message)


def model_error(status: int, body: bytes, log_stream: str) -> RuntimeApiError:
    """The container answered `status` (4xx or 5xx; 0 when it did not answer in time) with `body`: SageMaker's
    ModelError (424), whose message quotes the body and says where the log is."""
    original = body.decode("utf-8", "replace")
    side = "client" if 400 <= status < 500 else "server"
    message = (
        f'Received {side} error ({status}) from {PRIMARY} with message "{original}". See {log_stream} for '
        "more information."
    )
    return RuntimeApiError(
        424, "ModelError", message, OriginalStatusCode=status, OriginalMessage=original, LogStreamArn=log_stream
    )
