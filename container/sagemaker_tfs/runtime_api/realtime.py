"""InvokeEndpoint: `POST /endpoints/{EndpointName}/invocations`, as SageMaker's front end runs it. Its own checks first
(the body, the target model), then the container's `/invocations` (a multi-model target's `/models/{name}/invoke`)
with the headers SageMaker passes on; a 2xx answer is passed back with the production variant, any other is
SageMaker's ModelError (424) quoting the container's status and body.

InvokeEndpointWithResponseStream (`/invocations-response-stream`) checks and calls alike, and answers the container's
answer as an event stream of PayloadParts (event_stream.py) as it arrives, its content type in
X-Amzn-SageMaker-Content-Type. A SessionId must name a session the container opened (sessions.py).

Where it runs: in the app's workers (`serve_in`: nginx sends the route to gunicorn, and the worker calls its own app
in-process, container.InProcess), or down the direct route (stack/runtime_route.py); a multi-model target that the
worker's registry view does not route yet is handed to `serve` (server.py), which owns the registry that loads it,
and calls the container over HTTP through nginx."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import falcon

from ..config import Settings
from ..shared import runtime_dir
from ..shared.headers import (
    CLOSED_SESSION_ID_HEADER,
    CUSTOM_ATTRIBUTES_HEADER,
    NEW_SESSION_ID_HEADER,
    REQUEST_ID_HEADER,
    SESSION_ID_HEADER,
    TARGET_MODEL_HEADER,
    environ_key,
)
from ..shared.media_types import JSON
from ..shared.wsgi_call import close
from ..web.answers import Reply
from ..web.app import WebApp
from ..web.metrics import Timings
from . import event_stream, members
from .container import Answer, Container, InProcess, StreamBroken, StreamTimedOut, passed_on
from .errors import RuntimeApiError, model_error, service_unavailable, validation
from .sessions import Sessions
from .target_models import LoadedTargets, LoadFailed, NotLoadedHere, Targets

log = logging.getLogger("sagemaker_tfs.runtime_api")
_T = TypeVar("_T")

OPERATION = "InvokeEndpoint"
ROUTE = "/endpoints/{endpoint}/invocations"
STREAM_OPERATION = "InvokeEndpointWithResponseStream"
STREAM_ROUTE = "/endpoints/{endpoint}/invocations-response-stream"
TARGET_VARIANT_HEADER = members.member(OPERATION, "TargetVariant").location_name
# member -> why: what the service model offers and one container cannot do (headers from the service model's table)
UNSUPPORTED = {
    "TargetContainerHostname": "it serves one container, not a multi-container endpoint with direct invocation",
    "InferenceComponentName": "it has no inference components",
    "EnableExplanations": "it has no SageMaker Clarify explainer",
    "PrefixAwareId": "it has no prefix-aware routing",
}


def _unsupported_keys(operation: str) -> tuple[tuple[str, str, str], ...]:
    """(member, its header's key in a WSGI environ, why) for the UNSUPPORTED members the operation has."""
    names = {member.name for member in members.OPERATIONS[operation]}
    return tuple(
        (name, environ_key(members.member(operation, name).location_name), what)
        for name, what in UNSUPPORTED.items()
        if name in names
    )


# A worker hands a request to serve's InvokeEndpoint with nginx's internal redirect to a named location, which keeps
# the method and the body (stack/nginx.py defines the location).
HAND_OVER_HEADER = "X-Accel-Redirect"
SERVE_HAND_OVER = "@runtime_api"

MIB = 1024 * 1024
VARIANT_HEADER = "x-Amzn-Invoked-Production-Variant"
TIMED_OUT = (
    "Your invocation timed out while waiting for a response from container primary. Review the latency "
    "metrics for each container, resolve the issue, and try again."
)
STREAM_TIMED_OUT = "Your model primary did not complete sending the inference response in the allotted time."
STREAM_BROKEN = "Your model primary closed its connection before the end of the inference response."
STREAM_FAILED = "The stream processing failed: {}. Try your request again."
_STREAM_ERRORS = {  # how a stream ended early -> its ModelStreamError's Message and ErrorCode
    StreamTimedOut: (STREAM_TIMED_OUT, "ModelInvocationTimeExceeded"),
    StreamBroken: (STREAM_BROKEN, "StreamBroken"),
}
STREAM_ACCEPT_HEADER = members.member(STREAM_OPERATION, "Accept").location_name  # X-Amzn-SageMaker-Accept
STREAM_CONTENT_TYPE_HEADER = "X-Amzn-SageMaker-Content-Type"  # the answer's ContentType member


def log_stream_of(settings: Settings) -> Callable[[str], str]:
    """ModelError's LogStreamArn of an endpoint: in SageMaker, its CloudWatch stream; here serve's standard error
    (where the workers' lines go too), which the ARN names by serve's process id, read once."""
    pid = runtime_dir.serve_pid(Path(settings.runtime_dir)) or os.getpid()  # os.getpid(): an app without serve
    prefix = "arn:aws:logs:local:000000000000:log-group:/aws/sagemaker/Endpoints/"
    return lambda endpoint: f"{prefix}{endpoint}:log-stream:{settings.local_runtime_variant}/serve-{pid}"


def serve_in(app: WebApp, settings: Settings, is_ready: Callable[[str], bool] | None = None) -> None:
    """InvokeEndpoint on an app worker's own app, which it calls in-process; on a multi-model endpoint, for targets
    its registry view routes (`is_ready`), the others handed to `serve`, which loads them (SERVE_HAND_OVER)."""
    models = LoadedTargets(is_ready) if is_ready is not None else None
    app.add_route(ROUTE, POST=InvokeEndpoint(settings, InProcess(app), models).answer)


def _sent(req: falcon.Request) -> Callable[[str], str | None]:
    """The request's headers by name, one sent empty as one not sent: nginx's variables cannot tell them apart, and
    both routes of the operation must answer alike (stack/runtime_route.py)."""
    return lambda name: req.get_header(name) or None


class InvokeEndpoint:
    operation = OPERATION

    def __init__(self, settings: Settings, container: Container, models: Targets | None):
        self.settings = settings
        self.container = container
        self.models = models
        self.limit = settings.local_runtime_max_payload_mb * MIB
        self.log_stream = log_stream_of(settings)
        self.sessions = Sessions(Path(settings.runtime_dir))
        self._unsupported = _unsupported_keys(self.operation)

    def answer(self, env: dict, rid: str, timings: Timings | None, endpoint: str) -> Reply:
        """The operation's answer (POST); its errors are RuntimeApiErrors, which answer themselves."""
        header, body = self._checked(env, rid, endpoint)
        target = header(TARGET_MODEL_HEADER)  # (nginx logs the operation: stack/runtime_route.py)
        try:
            path = self._path(target, endpoint)
        except NotLoadedHere:  # nginx sends the request, its body kept, to serve's InvokeEndpoint
            return Reply(200, b"", JSON, [(HAND_OVER_HEADER, SERVE_HAND_OVER)])
        headers = passed_on(env)
        headers[REQUEST_ID_HEADER] = rid  # one id in the client's answer and in every log line of the stack
        result = self._call(endpoint, lambda: self.container.call("POST", path, body, headers, self._timeout))
        if not 200 <= result.status < 300:
            raise self._refused(result, endpoint)
        self.sessions.record(result)
        own = self._own_headers(result)
        if result.new_session is not None:
            own.append((NEW_SESSION_ID_HEADER, result.new_session))
        if result.closed_session is not None:
            own.append((CLOSED_SESSION_ID_HEADER, result.closed_session))
        content_type = JSON if result.content_type is None else result.content_type
        return Reply(200, result.body, content_type, own)

    def _checked(self, env: dict, rid: str, endpoint: str) -> tuple[Callable[[str], str | None], bytes]:
        """The request's headers by name and its body, once the members, what is supported and the body's size
        have been checked."""
        req = falcon.Request(env)  # Falcon's parser of the headers and of Content-Length
        members.check(self.operation, endpoint, header := _sent(req))
        self._check_supported(req, header, endpoint)
        session = header(SESSION_ID_HEADER)
        if session is not None:
            if self.models is not None:
                raise validation(
                    f"SessionId is not supported by the multi-model endpoint {endpoint} (SAGEMAKER_MULTI_MODEL=true): "
                    "its sessions are kept by the worker that serves /invocations"
                )
            self.sessions.check(session, endpoint)
        return header, self._body(req, rid)

    def _refused(self, result: Answer, endpoint: str) -> RuntimeApiError:
        """The error of a container's answer that is not a 2xx."""
        # SageMaker routes no request to a container whose /ping fails: then the error is the endpoint's (asked
        # only after an error answer, so that a request that succeeds pays for no /ping)
        if not self.container.ready():
            return service_unavailable(
                f"The endpoint {endpoint} is not ready: its container does not answer GET /ping with 200"
            )
        return model_error(result.status, result.body, self.log_stream(endpoint))

    def _own_headers(self, result: Answer) -> list[tuple[str, str]]:
        """The production variant, and the custom attributes the container answered with."""
        own = [(VARIANT_HEADER, self.settings.local_runtime_variant)]
        if result.custom_attributes is not None:
            own.append((CUSTOM_ATTRIBUTES_HEADER, result.custom_attributes))
        return own

    def _check_supported(self, req: falcon.Request, header: Callable[[str], str | None], endpoint: str) -> None:
        """Members that ask for what one local container with one variant does not have are refused, not ignored:
        code that relies on them must not pass here and fail in production."""
        variant = header(TARGET_VARIANT_HEADER)
        if variant is not None and variant != self.settings.local_runtime_variant:
            raise validation(
                f"TargetVariant '{variant}' is not a production variant of endpoint {endpoint}: its "
                f"one variant is {self.settings.local_runtime_variant} (SAGEMAKER_LOCAL_RUNTIME_VARIANT)"
            )
        env = req.env
        for name, key, what in self._unsupported:
            if env.get(key):
                raise validation(f"{name} is not supported by the local endpoint {endpoint}: {what}")

    def _body(self, req: falcon.Request, rid: str) -> bytes:
        length = req.content_length
        if length is not None and length > self.limit:
            raise validation(f"Request {rid} has oversize body.")
        body = req.bounded_stream.read(self.limit + 1)
        if len(body) > self.limit:
            raise validation(f"Request {rid} has oversize body.")
        if not body:
            raise validation(
                "1 validation error detected: Value at 'body' failed to satisfy constraint: Member must not be empty"
            )
        return body

    def _path(self, target: str | None, endpoint: str) -> str:
        """The container's route for this request: a multi-model endpoint's needs a target, loaded on first use."""
        if self.models is None:
            if target is not None:
                raise validation(
                    "TargetModel is only valid for a multi-model endpoint: this container serves one "
                    "model (SAGEMAKER_MULTI_MODEL is not true)"
                )
            return "/invocations"
        if target is None:
            raise validation("TargetModel is required: this is a multi-model endpoint (SAGEMAKER_MULTI_MODEL=true)")
        try:
            return f"/models/{self.models.model_for(target)}/invoke"
        except LoadFailed as exc:  # the registry's refusal, as the container's answer
            raise model_error(exc.status, exc.message.encode(), self.log_stream(endpoint)) from None

    @property
    def _timeout(self) -> float:
        return self.settings.local_runtime_timeout_seconds

    def _call(self, endpoint: str, call: Callable[[], _T]) -> _T:
        """`call` to the container; its timeout and a container that cannot be reached as the operation's errors."""
        try:
            return call()
        except TimeoutError:
            raise self._timed_out(endpoint) from None
        except OSError as exc:
            log.warning("InvokeEndpoint %s: the container cannot be reached: %s", endpoint, exc)
            raise service_unavailable(
                f"The endpoint {endpoint} is not ready: its container cannot be reached"
            ) from None

    def _timed_out(self, endpoint: str) -> RuntimeApiError:
        return model_error(0, TIMED_OUT.encode(), self.log_stream(endpoint))


class InvokeEndpointWithResponseStream(InvokeEndpoint):
    """The answer as SageMaker streams it: the container's answer in PayloadPart events as its pieces arrive, each
    event_stream.PART_SIZE bytes at most, read by boto3's EventStream. An error before the answer's head is the
    operation's error; after it, the stream ends with an exception event: ModelStreamError when the container cuts
    its answer (StreamBroken) or lets it run over its time (ModelInvocationTimeExceeded: the first part and each
    next one within SAGEMAKER_LOCAL_RUNTIME_TIMEOUT_SECONDS, the whole within
    SAGEMAKER_LOCAL_RUNTIME_STREAM_TIMEOUT_SECONDS), InternalStreamFailure for a failure of ours. A multi-model
    endpoint is refused, as in SageMaker, where the operation has no TargetModel."""

    operation = STREAM_OPERATION

    def answer(self, env: dict, rid: str, timings: Timings | None, endpoint: str) -> Reply:
        header, body = self._checked(env, rid, endpoint)
        if self.models is not None:
            raise validation(
                f"{STREAM_OPERATION} is not supported by the multi-model endpoint {endpoint} "
                "(SAGEMAKER_MULTI_MODEL=true): it names no TargetModel; use InvokeEndpoint"
            )
        headers = passed_on(env)
        headers.pop(TARGET_MODEL_HEADER, None)  # not members of this operation: SageMaker passes them on not
        headers.pop("Accept", None)
        accept = header(STREAM_ACCEPT_HEADER)
        if accept is not None:
            headers["Accept"] = accept
        headers[REQUEST_ID_HEADER] = rid
        limit = self.settings.local_runtime_stream_timeout_seconds
        head, pieces = self._call(
            endpoint, lambda: self.container.stream("/invocations", body, headers, self._timeout, limit)
        )
        if pieces is None:
            raise self._refused(head, endpoint)
        try:
            self.sessions.record(head)
        except BaseException:
            close(pieces)
            raise
        content_type = JSON if head.content_type is None else head.content_type
        own = [(STREAM_CONTENT_TYPE_HEADER, content_type), *self._own_headers(head)]
        return Reply(200, self._events(pieces, rid, endpoint), event_stream.MEDIA_TYPE, own)

    def _events(self, pieces: Iterator[bytes], rid: str, endpoint: str) -> Iterator[bytes]:
        """The answer's pieces as PayloadParts, then, where it ends early, the exception event that says why."""
        try:
            for piece in pieces:
                yield from event_stream.payload_parts(piece)
        except (StreamTimedOut, StreamBroken) as exc:
            log.warning(
                "request %s: %s %s: %s: the stream ends with a ModelStreamError", rid, self.operation, endpoint, exc
            )
            message, code = _STREAM_ERRORS[type(exc)]
            yield event_stream.exception("ModelStreamError", message, ErrorCode=code)
        except Exception as exc:
            log.exception(
                "request %s: %s %s: the stream failed: it ends with an InternalStreamFailure",
                rid,
                self.operation,
                endpoint,
            )
            yield event_stream.exception("InternalStreamFailure", STREAM_FAILED.format(exc))
        finally:
            close(pieces)

    def _timed_out(self, endpoint: str) -> RuntimeApiError:
        message, code = _STREAM_ERRORS[StreamTimedOut]
        return RuntimeApiError(424, "ModelStreamError", message, ErrorCode=code)
