"""InvokeEndpointAsync: `POST /endpoints/{EndpointName}/async-invocations`, as an endpoint with an
AsyncInferenceConfig answers it.

The request names its input (X-Amzn-SageMaker-InputLocation: `s3://bucket/key` through shared/storage.py, the code
local Batch Transform uses, a `file://` URI or a local path; or an inline Body of at most 128,000 bytes) and is
answered at once: 202, `{"InferenceId": ...}`, X-Amzn-SageMaker-OutputLocation (`<output>/<id>.out`) and
X-Amzn-SageMaker-FailureLocation (`<failure>/<id>-error.out`), `<id>` a UUID new for each request (as SageMaker names
them: an InferenceId may repeat, an output is never overwritten by another request's), where output is
SAGEMAKER_LOCAL_ASYNC_OUTPUT_PATH (the endpoint config's S3OutputPath: a folder or an `s3://` prefix) and failure
SAGEMAKER_LOCAL_ASYNC_FAILURE_PATH (its S3FailurePath; the output path when unset). S3OutputPathExtension goes
between the path and the name of both; Filename replaces `<id>.out` [INF: the service model does not say
whether either applies to the failure location]. Without an output path the operation is a ValidationError.

The invocation then runs in `serve`'s process (the one that owns the runtime API's socket), on a bounded queue
(`queue.Queue(SAGEMAKER_LOCAL_ASYNC_MAX_QUEUED)`: one more request is a ThrottlingException, as SageMaker throttles)
served by SAGEMAKER_LOCAL_ASYNC_MAX_CONCURRENT threads, each sending one invocation at a time to the container's
`/invocations` on nginx's port, as SageMaker's front end does (container.py), with the X-Amzn-SageMaker-Content-Type,
-Accept and -Custom-Attributes of the request as Content-Type, Accept and custom attributes, and its request id and
inference id. An invocation whose request waited past RequestTTLSeconds fails as expired; one the container does not
answer within InvocationTimeoutSeconds (default 900) fails as timed out. A 2xx answer's body is the output; a 4xx or
5xx answer's body (the container's error), or a message saying why (unreadable input, timeout, expiry), is the
failure. Either is written whole or not at all (shared/storage.py's PendingOutput: a temporary file renamed, or
uploaded once complete), and logged once with the inference id.

A local input (under SAGEMAKER_LOCAL_ASYNC_INPUT_PATH) is checked when the request is accepted and read through no
link when it runs (shared/files_beneath.py): a link put on its way meanwhile is refused, never followed.

Every accepted request ends with exactly one object: its output or its failure. At SIGTERM (`stop()`, called while
nginx still answers): no new request is taken (ServiceUnavailable, 503); each invocation still queued ends with a
failure saying that the endpoint stopped before it ran (STOPPED), written before `serve` exits; the invocations in
flight finish and are written, which each invocation's timeout bounds. Nothing is ever half-written.

Not honoured locally: the output object's content type (S3 gets none), SNS notifications, and https:// input URLs.
The container's own routes do not wait for any of this: the real-time path shares no lock with it.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

import falcon

from ..config import Settings
from ..shared import json_bodies, logs
from ..shared.files_beneath import read_beneath
from ..shared.headers import CUSTOM_ATTRIBUTES_HEADER, INFERENCE_ID_HEADER, REQUEST_ID_HEADER
from ..shared.media_types import JSON
from ..shared.storage import Storage
from ..web.answers import Reply
from ..web.metrics import Timings
from . import members
from .container import Answer, Container
from .errors import service_unavailable, throttled, validation

if TYPE_CHECKING:
    from .target_models import TargetModels

log = logging.getLogger("sagemaker_tfs.runtime_api")

OPERATION = "InvokeEndpointAsync"

INPUT_LOCATION_HEADER = "X-Amzn-SageMaker-InputLocation"
CONTENT_TYPE_HEADER = "X-Amzn-SageMaker-Content-Type"
ACCEPT_HEADER = "X-Amzn-SageMaker-Accept"
TTL_HEADER = "X-Amzn-SageMaker-RequestTTLSeconds"
TIMEOUT_HEADER = "X-Amzn-SageMaker-InvocationTimeoutSeconds"
EXTENSION_HEADER = "X-Amzn-SageMaker-S3OutputPathExtension"
FILENAME_HEADER = "X-Amzn-SageMaker-Filename"
OUTPUT_LOCATION_HEADER = "X-Amzn-SageMaker-OutputLocation"
FAILURE_LOCATION_HEADER = "X-Amzn-SageMaker-FailureLocation"

# AWS's documented defaults; the bounds of every member are the service model's (members.py)
TTL_DEFAULT = 21600  # RequestTTLSeconds: 6 hours
TIMEOUT_DEFAULT = 900  # InvocationTimeoutSeconds: 15 minutes
_BODY_MAX = members.member(OPERATION, "Body").max
assert _BODY_MAX is not None  # (botocore's model bounds the Body)
MAX_INLINE_BODY: int = _BODY_MAX
# The request's headers the container gets, under the names it gets them by (container.PASSED_ON)
PASSED_AS = {
    CONTENT_TYPE_HEADER: "Content-Type",
    ACCEPT_HEADER: "Accept",
    CUSTOM_ATTRIBUTES_HEADER: CUSTOM_ATTRIBUTES_HEADER,
}
FILE_SCHEME = "file://"
S3_SCHEME = "s3://"
STOP = None  # what a worker takes from the queue to end
STOPPED = (
    "Request not run: the endpoint stopped (its container received SIGTERM) while this request was queued; "
    "nothing was sent to the model, invoke it again"
)


@dataclass(frozen=True)
class Invocation:
    """One accepted request, as its worker needs it."""

    inference_id: str
    request_id: str
    input_location: str | None  # s3://... or a local path; None when the body came inline
    body: bytes | None
    headers: dict[str, str]  # for the container's /invocations
    output: str
    failure: str
    ttl: int
    timeout: int
    received: float  # time.monotonic() when it was queued
    input_beneath: str | None = None  # a local input's path below SAGEMAKER_LOCAL_ASYNC_INPUT_PATH, links resolved

    @property
    def source(self) -> str:
        return self.input_location or "the inline body"


class AsyncInvocations:
    """The operation of `/endpoints/{endpoint}/async-invocations` (`answer`) and the threads that run what it
    queues."""

    def __init__(self, settings: Settings, container: Container, models: TargetModels | None = None):
        # `models` (the multi-model TargetModels) is unused: InvokeEndpointAsync has no TargetModel member.
        self.container = container
        self.output_path = _local_or_s3(settings.local_async_output_path)
        self.failure_path = _local_or_s3(settings.local_async_failure_path) or self.output_path
        input_path = _local_or_s3(settings.local_async_input_path)
        self.input_root = os.path.realpath(input_path) if input_path is not None else None
        self.concurrency = settings.local_async_max_concurrent
        self.queue: queue.Queue[Invocation | None] = queue.Queue(settings.local_async_max_queued)
        self.storage = Storage()  # s3:// honours the usual AWS settings, AWS_ENDPOINT_URL(_S3) included
        self.stopping = threading.Event()
        self.workers: list[threading.Thread] = []

    # ----- the operation -----

    def answer(self, env: dict, rid: str, timings: Timings | None, endpoint: str) -> Reply:
        """202 and where the output will be (POST); its errors are RuntimeApiErrors, which answer themselves."""
        if self.stopping.is_set():
            raise service_unavailable("The endpoint is shutting down and takes no new asynchronous invocation")
        invocation = self._invocation(falcon.Request(env), rid, endpoint)  # Falcon's parser of the headers
        try:
            self.queue.put_nowait(invocation)
        except queue.Full:
            raise throttled(
                f"The endpoint's asynchronous queue is full ({self.queue.maxsize} requests waiting, "
                "SAGEMAKER_LOCAL_ASYNC_MAX_QUEUED); retry later"
            ) from None
        log.info(
            "request %s: InvokeEndpointAsync %s, inference id %s, input %s: queued, output %s",
            invocation.request_id,
            endpoint,
            invocation.inference_id,
            invocation.source,
            invocation.output,
        )
        return Reply(
            202,
            json_bodies.encode({"InferenceId": invocation.inference_id}),
            JSON,
            [(OUTPUT_LOCATION_HEADER, invocation.output), (FAILURE_LOCATION_HEADER, invocation.failure)],
        )

    def _invocation(self, req: falcon.Request, rid: str, endpoint: str) -> Invocation:
        """The request, checked as SageMaker checks it; RuntimeApiError (ValidationError) says what is wrong."""
        members.check(OPERATION, endpoint, req.get_header)
        if self.output_path is None:
            raise validation(
                "InvokeEndpointAsync needs an output location: set SAGEMAKER_LOCAL_ASYNC_OUTPUT_PATH "
                "(a folder or an s3:// prefix, the endpoint config's AsyncInferenceConfig S3OutputPath) "
                "on the container"
            )
        location, body = _input(req)
        beneath = None
        if location is not None and not location.startswith(S3_SCHEME):
            beneath = self._confined(location, req.get_header(INPUT_LOCATION_HEADER, default=location))
        inference_id = _inference_id(req)
        name, error_name = _output_names(req, str(uuid.uuid4()))
        assert self.failure_path is not None  # (the output path when not set)
        return Invocation(
            inference_id=inference_id,
            request_id=rid,
            input_location=location,
            body=body,
            headers=_container_headers(req, rid, inference_id),
            output=_join(self.output_path, name),
            failure=_join(self.failure_path, error_name),
            ttl=_seconds(req, TTL_HEADER, TTL_DEFAULT),
            timeout=_seconds(req, TIMEOUT_HEADER, TIMEOUT_DEFAULT),
            received=time.monotonic(),
            input_beneath=beneath,
        )

    def _confined(self, path: str, given: str) -> str:
        """A local input is read only inside SAGEMAKER_LOCAL_ASYNC_INPUT_PATH: the API may listen beyond the
        machine, and a request must not make serve read any file it can. Its path below the folder, links resolved
        now; it is read later through no link at all (shared/files_beneath.py), so a link put on the way after
        this check leads nowhere."""
        if self.input_root is None:
            raise validation(
                f"InputLocation '{given}' is a local path: set SAGEMAKER_LOCAL_ASYNC_INPUT_PATH on the "
                "container to the folder local inputs may be read from, or give an s3:// location"
            )
        real = os.path.realpath(path)
        if os.path.commonpath([real, self.input_root]) != self.input_root:
            raise validation(f"InputLocation '{given}' is outside SAGEMAKER_LOCAL_ASYNC_INPUT_PATH ({self.input_root})")
        return os.path.relpath(real, self.input_root)

    # ----- the threads -----

    def start(self) -> None:
        for index in range(self.concurrency):
            worker = threading.Thread(target=self._work, name=f"async-invocation-{index}", daemon=True)
            worker.start()
            self.workers.append(worker)

    def stop(self) -> None:
        """No new request; each queued one ends with a failure saying the endpoint stopped; returns once those in
        flight are written (each bounded by its InvocationTimeoutSeconds and the time to write it)."""
        if self.stopping.is_set():
            return
        self.stopping.set()
        self._end_queued()
        for _ in self.workers:
            self.queue.put(STOP)  # blocks only while racing requests fill the queue: the workers end those
        for worker in self.workers:
            worker.join()
        self._end_queued()  # a request that passed the check as stop() began, queued after the workers ended

    def _end_queued(self) -> None:
        while True:
            try:
                invocation = self.queue.get_nowait()
            except queue.Empty:
                return
            if invocation is not STOP:
                self._write_stopped(invocation)

    def _write_stopped(self, invocation: Invocation) -> None:
        self._write_failure(invocation, STOPPED.encode(), "stopped while queued")

    def _work(self) -> None:
        while (invocation := self.queue.get()) is not STOP:
            if self.stopping.is_set():  # taken between stop()'s flag and its draining
                self._write_stopped(invocation)
                continue
            token = logs.request_id.set(invocation.request_id)  # JSON log lines name the request
            try:
                self._run(invocation)
            except Exception as exc:  # a bug: the worker lives on, the client finds a failure
                log.exception("inference %s: failed", invocation.inference_id)
                self._write_failure(invocation, f"Internal failure: {exc!r}".encode(), "internal failure")
            finally:
                logs.request_id.reset(token)

    # ----- one invocation -----

    def _run(self, invocation: Invocation) -> None:
        started = time.monotonic()
        waited = started - invocation.received
        if waited > invocation.ttl:
            message = (
                f"Request expired: it waited {waited:.0f} s in the queue, more than its RequestTTLSeconds "
                f"({invocation.ttl} s)"
            )
            self._write_failure(invocation, message.encode(), "expired")
            return
        try:
            body = self._input_body(invocation)
        except OSError as exc:  # Storage's own message of an s3:// read names the object already
            message = (
                f"Unable to read the input {invocation.input_location}: {exc.strerror}" if exc.strerror else str(exc)
            )
            self._write_failure(invocation, message.encode(), "unreadable input")
            return
        answer = self._call(invocation, body)
        if answer is None:
            return
        if 200 <= answer.status < 300:
            self._write_output(invocation, answer.body, time.monotonic() - started)
        else:
            body = answer.body or f"The container answered {answer.status} with an empty body".encode()
            self._write_failure(invocation, body, f"the container answered {answer.status}")

    def _input_body(self, invocation: Invocation) -> bytes:
        if invocation.body is not None:
            return invocation.body
        if invocation.input_beneath is not None:
            assert self.input_root is not None  # (a local input is confined beneath it)
            return read_beneath(self.input_root, invocation.input_beneath)
        assert invocation.input_location is not None  # (neither a body nor a local input)
        return self.storage.read(invocation.input_location)

    def _call(self, invocation: Invocation, body: bytes) -> Answer | None:
        """The container's answer, or None once a failure saying why it has none is written."""
        try:
            return self.container.call("POST", "/invocations", body, invocation.headers, invocation.timeout)
        except TimeoutError:
            message = (
                f"Invocation timed out: the container did not answer within InvocationTimeoutSeconds "
                f"({invocation.timeout} s)"
            )
            self._write_failure(invocation, message.encode(), "timed out")
        except OSError as exc:
            self._write_failure(invocation, f"Unable to reach the container: {exc}".encode(), "no answer")
        return None

    def _write_output(self, invocation: Invocation, body: bytes, seconds: float) -> None:
        try:
            self._publish(invocation.output, body)
        except Exception as exc:  # noqa: BLE001 - OSError, or boto3's S3UploadFailedError: told through the failure
            log.error(
                "inference %s: unable to write the output %s: %s", invocation.inference_id, invocation.output, exc
            )
            self._write_failure(
                invocation, f"Unable to write the output {invocation.output}: {exc}".encode(), "output not written"
            )
            return
        log.info(
            "inference %s: output written to %s (%d bytes, %.3f s)",
            invocation.inference_id,
            invocation.output,
            len(body),
            seconds,
        )

    def _write_failure(self, invocation: Invocation, body: bytes, why: str) -> None:
        try:
            self._publish(invocation.failure, body)
        except Exception as exc:  # noqa: BLE001 - logged: nothing else can be told
            log.error(
                "inference %s: failed (%s) and unable to write the failure %s: %s",
                invocation.inference_id,
                why,
                invocation.failure,
                exc,
            )
            return
        log.info("inference %s: failed (%s), failure written to %s", invocation.inference_id, why, invocation.failure)

    def _publish(self, location: str, body: bytes) -> None:
        """`body` at `location`, whole, or nothing there."""
        pending = self.storage.open_output(location)
        try:
            pending.write(body)
            pending.commit()
        except BaseException:
            pending.discard()
            raise


# ----- the request's members -----


def _local_or_s3(path: str | None) -> str | None:
    """A setting's folder or s3:// prefix, a file:// URI taken as its path."""
    return path[len(FILE_SCHEME) :] if path is not None and path.startswith(FILE_SCHEME) else path


def _join(base: str, name: str) -> str:
    """`name` under a folder or an s3:// prefix (`s3://bucket` and `s3://bucket/` give `s3://bucket/<name>`)."""
    return f"{base.rstrip('/')}/{name}"


def _input(req: falcon.Request) -> tuple[str | None, bytes | None]:
    """(input location, None) or (None, inline body): exactly one of them, as the service model says."""
    location = req.get_header(INPUT_LOCATION_HEADER)
    length = req.content_length or 0
    if location is not None and length:
        raise validation(f"Provide exactly one of InputLocation ({INPUT_LOCATION_HEADER}) and Body, not both")
    if location is None:
        if not length:
            raise validation(
                f"Provide exactly one of InputLocation ({INPUT_LOCATION_HEADER}) and Body: the request has neither"
            )
        if length > MAX_INLINE_BODY:
            raise validation(
                f"The inline Body is {length} bytes, more than {MAX_INLINE_BODY}: store it and give "
                f"its InputLocation ({INPUT_LOCATION_HEADER})"
            )
        return None, req.bounded_stream.read()
    return _input_location(location), None


def _input_location(location: str) -> str:
    """The location Storage.read takes: s3://bucket/key or a local path."""
    if location.startswith(S3_SCHEME):
        bucket, _, key = location[len(S3_SCHEME) :].partition("/")
        if not bucket or not key:
            raise validation(f"InputLocation '{location}' ({INPUT_LOCATION_HEADER}) must be s3://bucket/key")
        return location
    if location.startswith(FILE_SCHEME):
        path = location[len(FILE_SCHEME) :]
        if not path.startswith("/"):
            raise validation(
                f"InputLocation '{location}' ({INPUT_LOCATION_HEADER}) must be a file:// URI of an "
                "absolute path: file:///path/to/input"
            )
        return path
    if "://" in location:  # https:// S3 URLs among them: they would need AWS's own addressing rules
        raise validation(
            f"InputLocation '{location}' ({INPUT_LOCATION_HEADER}): the local endpoint reads s3://bucket/"
            "key, file:///path or a local path"
        )
    return location


def _inference_id(req: falcon.Request) -> str:
    given = req.get_header(INFERENCE_ID_HEADER)
    if given is None:
        return str(uuid.uuid4())  # as SageMaker makes one
    if "/" in given:
        raise validation(
            f"InferenceId '{given}' ({INFERENCE_ID_HEADER}) must not hold '/' here: it names the output file"
        )
    return given


def _output_names(req: falcon.Request, unique: str) -> tuple[str, str]:
    """The output's and the failure's names under their paths: [<extension>/]<unique>.out (or Filename) and
    [<extension>/]<unique>-error.out, `unique` being new for each request, as SageMaker names them: two requests
    never write to one object (an InferenceId may repeat), unless they give the same Filename."""
    extension = req.get_header(EXTENSION_HEADER)
    filename = req.get_header(FILENAME_HEADER)
    if extension is not None and ".." in extension.split("/"):
        raise validation(
            f"S3OutputPathExtension '{extension}' ({EXTENSION_HEADER}) must have no '..' segment here: "
            "the output must stay under its path"
        )
    folder = f"{extension.strip('/')}/" if extension and extension.strip("/") else ""
    return folder + (filename or f"{unique}.out"), f"{folder}{unique}-error.out"


def _seconds(req: falcon.Request, header: str, default: int) -> int:
    raw = req.get_header(header)
    return default if raw is None else int(raw)  # an integer in the member's range (members.check)


def _container_headers(req: falcon.Request, rid: str, inference_id: str) -> dict[str, str]:
    """What the container's /invocations gets, as SageMaker passes it (container.PASSED_ON): the request's
    content type, accept and custom attributes under their usual names, its request id and the inference id."""
    headers = {REQUEST_ID_HEADER: rid, INFERENCE_ID_HEADER: inference_id}
    for received, sent in PASSED_AS.items():
        value = req.get_header(received)
        if value is not None:
            headers[sent] = value
    return headers
