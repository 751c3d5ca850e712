"""InvokeEndpoint: `POST /endpoints/{EndpointName}/invocations`, as SageMaker's front end runs it. Its own checks first
(the body, the target model), then the container's `/invocations` (a multi-model target's `/models/{name}/invoke`)
with the headers SageMaker passes on; a 2xx answer is passed back with the production variant, any other is
SageMaker's ModelError (424) quoting the container's status and body.

Where it runs: in the app's workers (`serve_in`: nginx sends the route to gunicorn, and the worker calls its own app
in-process, container.InProcess), or down the direct route (stack/runtime_route.py); a multi-model target that the
worker's registry view does not route yet is handed to `serve` (server.py), which owns the registry that loads it,
and calls the container over HTTP through nginx."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import falcon

from ..config import Settings
from ..shared import runtime_dir
from ..shared.headers import CUSTOM_ATTRIBUTES_HEADER, REQUEST_ID_HEADER, TARGET_MODEL_HEADER, environ_key
from ..shared.media_types import JSON
from ..web.answers import Reply
from ..web.app import WebApp
from ..web.metrics import Timings
from . import members
from .container import Answer, Container, InProcess, passed_on
from .errors import model_error, service_unavailable, validation
from .target_models import LoadedTargets, LoadFailed, NotLoadedHere, Targets

log = logging.getLogger("sagemaker_tfs.runtime_api")

OPERATION = "InvokeEndpoint"
ROUTE = "/endpoints/{endpoint}/invocations"
TARGET_VARIANT_HEADER = members.member(OPERATION, "TargetVariant").location_name
# member -> why: what the service model offers and one container cannot do (headers from the service model's table)
UNSUPPORTED = {
    "TargetContainerHostname": "it serves one container, not a multi-container endpoint with direct invocation",
    "InferenceComponentName": "it has no inference components",
    "SessionId": "it has no stateful sessions",
    "EnableExplanations": "it has no SageMaker Clarify explainer",
    "PrefixAwareId": "it has no prefix-aware routing",
}

# (member, its header's key in a WSGI environ, why)
_UNSUPPORTED_KEYS = tuple(
    (name, environ_key(members.member(OPERATION, name).location_name), what) for name, what in UNSUPPORTED.items()
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
    def __init__(self, settings: Settings, container: Container, models: Targets | None):
        self.settings = settings
        self.container = container
        self.models = models
        self.limit = settings.local_runtime_max_payload_mb * MIB
        self.log_stream = log_stream_of(settings)

    def answer(self, env: dict, rid: str, timings: Timings | None, endpoint: str) -> Reply:
        """The operation's answer (POST); its errors are RuntimeApiErrors, which answer themselves."""
        req = falcon.Request(env)  # Falcon's parser of the headers and of Content-Length
        members.check(OPERATION, endpoint, header := _sent(req))
        self._check_supported(req, header, endpoint)
        target = header(TARGET_MODEL_HEADER)  # (nginx logs the operation: stack/runtime_route.py)
        body = self._body(req, rid)
        try:
            path = self._path(target, endpoint)
        except NotLoadedHere:  # nginx sends the request, its body kept, to serve's InvokeEndpoint
            return Reply(200, b"", JSON, [(HAND_OVER_HEADER, SERVE_HAND_OVER)])
        headers = passed_on(env)
        headers[REQUEST_ID_HEADER] = rid  # one id in the client's answer and in every log line of the stack
        result = self._call(path, body, headers, endpoint)
        if not 200 <= result.status < 300:
            # SageMaker routes no request to a container whose /ping fails: then the error is the endpoint's (asked
            # only after an error answer, so that a request that succeeds pays for no /ping)
            if not self.container.ready():
                raise service_unavailable(
                    f"The endpoint {endpoint} is not ready: its container does not answer GET /ping with 200"
                )
            raise model_error(result.status, result.body, self.log_stream(endpoint))
        own = [(VARIANT_HEADER, self.settings.local_runtime_variant)]
        if result.custom_attributes is not None:
            own.append((CUSTOM_ATTRIBUTES_HEADER, result.custom_attributes))
        return Reply(200, result.body, JSON if result.content_type is None else result.content_type, own)

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
        for name, key, what in _UNSUPPORTED_KEYS:
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

    def _call(self, path: str, body: bytes, headers: dict[str, str], endpoint: str) -> Answer:
        timeout = self.settings.local_runtime_timeout_seconds
        try:
            return self.container.call("POST", path, body, headers, timeout)
        except TimeoutError:
            raise model_error(0, TIMED_OUT.encode(), self.log_stream(endpoint)) from None
        except OSError as exc:
            log.warning("InvokeEndpoint %s: the container cannot be reached: %s", endpoint, exc)
            raise service_unavailable(
                f"The endpoint {endpoint} is not ready: its container cannot be reached"
            ) from None
