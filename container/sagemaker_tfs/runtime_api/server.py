"""The runtime API's app on its UNIX socket (runtime.sock in the runtime folder), served by threads of `serve`; nginx
sends `/endpoints/` there when SAGEMAKER_LOCAL_RUNTIME_API=true (stack/nginx.py), but for a single-model endpoint's
InvokeEndpoint, which the app's workers answer (realtime.serve_in)."""

from __future__ import annotations

import logging
from pathlib import Path

import falcon

from ..config import Settings
from ..registry.owner import Owner
from ..shared import runtime_dir
from ..shared.media_types import JSON
from ..web import middleware
from ..web.unix_server import UnixAppServer
from .asynchronous import AsyncInvocations
from .container import Container
from .errors import RuntimeApiError, answer, validation
from .realtime import ROUTE, InvokeEndpoint
from .target_models import TargetModels

log = logging.getLogger("sagemaker_tfs.runtime_api")


class NotServed:
    """An operation of SageMaker Runtime this twin does not run: a clear ValidationError rather than a bare 404."""

    def __init__(self, operation: str):
        self.operation = operation

    def on_post(self, req: falcon.Request, resp: falcon.Response, endpoint: str) -> None:
        raise validation(
            f"{self.operation} is not served by the local runtime API (SAGEMAKER_LOCAL_RUNTIME_API): "
            "use InvokeEndpoint or InvokeEndpointAsync"
        )


class RuntimeApi:
    """InvokeEndpoint and InvokeEndpointAsync of one endpoint (this container); `owner` is the multi-model
    registry's, None on a single-model endpoint."""

    def __init__(self, settings: Settings, runtime: Path, owner: Owner | None):
        container = Container(settings.bind_port)
        models = TargetModels(owner, settings) if owner is not None else None
        self.asynchronous = AsyncInvocations(settings, container, models)
        app = falcon.App(media_type=JSON)
        middleware.install(app)  # the request id nginx hands over, in every answer
        app.add_error_handler(RuntimeApiError, answer)
        if models is not None:  # a multi-model endpoint's: its TargetModel loads through the registry, here
            app.add_route(ROUTE, InvokeEndpoint(settings, container, models))
        app.add_route("/endpoints/{endpoint}/async-invocations", self.asynchronous)
        app.add_route(
            "/endpoints/{endpoint}/invocations-response-stream", NotServed("InvokeEndpointWithResponseStream")
        )
        self.server = UnixAppServer(runtime / runtime_dir.RUNTIME_API_SOCKET, app, "runtime-api")

    def start(self) -> None:
        self.asynchronous.start()
        self.server.start()

    def drain(self) -> None:
        """At SIGTERM, before the stack drains (nginx still answers): no new asynchronous invocation; those in
        flight finish and are written, those still queued are dropped and logged (AsyncInvocations.stop)."""
        self.asynchronous.stop()

    def close(self) -> None:
        """After the stack has drained (nginx finished the real-time operations in flight)."""
        self.server.shutdown()
        self.server.server_close()
