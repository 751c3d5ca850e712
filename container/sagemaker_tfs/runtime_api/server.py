"""The runtime API's app on its UNIX socket (runtime.sock in the runtime folder), served by threads of `serve`; nginx
sends `/endpoints/` there when SAGEMAKER_LOCAL_RUNTIME_API=true (stack/nginx.py), but for a single-model endpoint's
InvokeEndpoint, which the app's workers answer (realtime.serve_in)."""

from __future__ import annotations

import logging
from pathlib import Path

from ..config import Settings
from ..registry.owner import Owner
from ..shared import runtime_dir
from ..web.app import WebApp
from ..web.unix_server import UnixAppServer
from .asynchronous import AsyncInvocations
from .container import Container
from .realtime import ROUTE, STREAM_ROUTE, InvokeEndpoint, InvokeEndpointWithResponseStream
from .target_models import TargetModels

log = logging.getLogger("sagemaker_tfs.runtime_api")


class RuntimeApi:
    """InvokeEndpoint (a multi-model endpoint's), InvokeEndpointWithResponseStream and InvokeEndpointAsync of one
    endpoint (this container); `owner` is the multi-model registry's, None on a single-model endpoint."""

    def __init__(self, settings: Settings, runtime: Path, owner: Owner | None):
        container = Container(settings.bind_port)
        models = TargetModels(owner, settings) if owner is not None else None
        self.asynchronous = AsyncInvocations(settings, container, models)
        app = WebApp()  # the request id nginx hands over, in every answer
        if models is not None:  # a multi-model endpoint's: its TargetModel loads through the registry, here
            app.add_route(ROUTE, POST=InvokeEndpoint(settings, container, models).answer)
        app.add_route("/endpoints/{endpoint}/async-invocations", POST=self.asynchronous.answer)
        app.add_route(STREAM_ROUTE, POST=InvokeEndpointWithResponseStream(settings, container, models).answer)
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
