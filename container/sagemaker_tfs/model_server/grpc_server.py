"""A unary gRPC server on grpc core's completion queue, driven by one Python thread.

gRPC's HTTP/2 transport, ports, channel arguments, deadlines, message limits and compression are grpc core's
(the same core as grpcio's servers). What this module replaces is grpcio's Python layer between the completion
queue and the handlers: the sync server hands every call to a thread pool and back through locks and conditions,
and grpc.aio runs three tasks and an asyncio.wait over every registered method per call. Both cost two to four
times a whole REST request of the model server (measured with a handler that does nothing: about 230 us of CPU
per call for grpc.aio, under 60 us here), so gRPC clients paid several times REST's price for the same prediction.

Here one thread polls the queue and runs each call's handler on it. Handlers are coroutines: one that finishes
without waiting answers at once (a small model's run is inline); one that waits does so with `await
Later(future)` on a concurrent future, and resumes on the thread that completes it (a pool thread, the event
loop's thread for batching), which sends the answer: the serving thread never blocks on a handler. A handler ends
a call with a status by raising Abort. The services are registered by tensorflow-serving-api's generated
`add_*Servicer_to_server` functions, as on a grpc.Server.

Only what the model server's services need: unary calls, no interceptors, insecure ports.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future
from typing import Any, NamedTuple

from grpc._cython import cygrpc  # grpc core's Python binding, as grpcio's own servers use it

log = logging.getLogger(__name__)

# What this module uses of cygrpc (grpcio's private layer, which may change in any release): each name with the
# number of arguments it is called with (None: an attribute read). pyproject.toml pins the grpcio minor versions
# tested, and test_grpc_private_layer.py checks every entry against the grpcio installed.
CYGRPC_USED: tuple[tuple[str, int | None], ...] = (
    ("CompletionQueue", 0),
    ("CompletionQueue.poll", 0),
    ("CompletionQueue.shutdown", 0),
    ("Server", 2),
    ("Server.register_completion_queue", 1),
    ("Server.add_http2_port", 1),
    ("Server.start", 0),
    ("Server.shutdown", 2),
    ("Server.cancel_all_calls", 0),
    ("Server.request_call", 3),
    ("Server.destroy", 0),
    ("Call.start_server_batch", 2),
    ("CompletionType.operation_complete", None),
    ("CompletionType.queue_shutdown", None),
    ("SendInitialMetadataOperation", 2),
    ("SendMessageOperation", 2),
    ("SendStatusFromServerOperation", 4),
    ("ReceiveCloseOnServerOperation", 1),
    ("ReceiveMessageOperation", 1),
    ("ReceiveMessageOperation.message", 0),
    ("RequestCallEvent.completion_type", None),
    ("RequestCallEvent.tag", None),
    ("RequestCallEvent.success", None),
    ("RequestCallEvent.call", None),
    ("RequestCallEvent.call_details", None),
    ("RequestCallEvent.invocation_metadata", None),
    ("BatchOperationEvent.completion_type", None),
    ("BatchOperationEvent.tag", None),
    ("BatchOperationEvent.success", None),
    ("BatchOperationEvent.batch_operations", None),
    ("CallDetails.method", None),
    ("CallDetails.deadline", None),
)

_NO_DEADLINE = 1e12  # grpc core reports an infinite deadline as a date past this (in seconds since the epoch)
_UNIMPLEMENTED, _INTERNAL, _UNKNOWN = 12, 13, 2


class Abort(Exception):
    """Raised by a handler: the call ends with this status code (gRPC's number) and details."""

    def __init__(self, code: int, details: str):
        super().__init__(code, details)
        self.code, self.details = code, details


class Later:
    """`await Later(future)` in a handler: its value once the concurrent future is done (its exception raised)."""

    __slots__ = ("future",)

    def __init__(self, future: Future):
        self.future = future

    def __await__(self):
        if not self.future.done():
            yield self.future
        return self.future.result()


class Context:
    """The part of grpc.ServicerContext that the handlers use."""

    __slots__ = ("_deadline", "_metadata")

    def __init__(self, deadline: float, metadata):
        self._deadline, self._metadata = deadline, metadata

    def time_remaining(self) -> float | None:
        """Seconds left before the call's deadline; None when it has none."""
        return None if self._deadline > _NO_DEADLINE else max(self._deadline - time.time(), 0.0)

    def invocation_metadata(self):
        """The call's metadata: (key, value) pairs."""
        return self._metadata


class _CallDetails(NamedTuple):  # grpc.HandlerCallDetails, for a generic handler's service()
    method: str
    invocation_metadata: Any


class _Call:
    """One call: its request message, then one batch that answers it and waits for its close (a call's last
    completion: the server counts calls in flight by it)."""

    __slots__ = ("server", "call", "method", "handler", "context", "coro")

    def __init__(self, server: GrpcServer, call, method: bytes, handler, context: Context):
        self.server, self.call, self.method, self.handler, self.context = server, call, method, handler, context
        self.coro = None

    def on_message(self, event) -> None:
        message = event.batch_operations[0].message() if event.success else None
        if message is None:  # the client closed (or cancelled) without a request: grpcio's servers answer so
            self.finish_with(
                _UNIMPLEMENTED, f'"{self.method.decode("utf-8", "replace")}" requires exactly one request message.'
            )
            return
        try:
            request = self.handler.request_deserializer(message)
        except Exception:  # noqa: BLE001 - grpcio's servers answer an unreadable request so
            log.exception("cannot deserialize a request of %s", self.method)
            self.finish_with(_INTERNAL, "Exception deserializing request!")
            return
        self.coro = self.handler.unary_unary(request, self.context)
        self.step()

    def step(self, _future: Future | None = None) -> None:
        """Run the handler until it waits (it resumes here, on the thread that completes the future) or ends."""
        try:
            waiting = self.coro.send(None)
        except StopIteration as stop:
            try:
                message = self.handler.response_serializer(stop.value)
            except Exception:  # noqa: BLE001
                log.exception("cannot serialize a response of %s", self.method)
                self.finish_with(_INTERNAL, "Exception serializing response!")
                return
            self.finish(
                (
                    cygrpc.SendInitialMetadataOperation(None, 0),
                    cygrpc.SendMessageOperation(message, 0),
                    cygrpc.SendStatusFromServerOperation(None, 0, "", 0),
                    cygrpc.ReceiveCloseOnServerOperation(0),
                )
            )
        except Abort as abort:
            self.finish_with(abort.code, abort.details)
        except Exception as exc:  # noqa: BLE001 - grpcio's servers answer a handler's exception so
            log.exception("gRPC handler of %s failed", self.method)
            self.finish_with(_UNKNOWN, f"Exception calling application: {exc}")
        else:
            waiting.add_done_callback(self.step)

    def finish_with(self, code: int, details: str) -> None:
        self.finish(
            (
                cygrpc.SendInitialMetadataOperation(None, 0),
                cygrpc.SendStatusFromServerOperation(None, code, details, 0),
                cygrpc.ReceiveCloseOnServerOperation(0),
            )
        )

    def finish(self, operations) -> None:
        self.coro = None
        error = self.call.start_server_batch(operations, self.server.ended)  # ends on the serving thread, sent or not
        if error:  # grpc refused the batch (a bug): the call never ends, and stop() would wait for it
            log.error("gRPC %s: the answer's batch was refused (grpc_call_error %s)", self.method, error)


class GrpcServer:
    """Serves unary handlers registered by generated `add_*Servicer_to_server` functions; start(), then stop()."""

    def __init__(self, options: list[tuple[str, int | str]]):
        self._queue = cygrpc.CompletionQueue()
        self._server = cygrpc.Server(tuple(options), False)
        self._server.register_completion_queue(self._queue)
        self._generic: list = []
        self._handlers: dict[bytes, Any] = {}  # method path -> grpc.RpcMethodHandler, found once
        self._live = 0  # calls not ended: their last batch is due (counted on the serving thread only)
        self._accepting = False  # a request_call is pending
        self._shutting_down = False
        self._destroyed = False
        # cygrpc's Server must not be called from two threads at once: stop()'s shutdown and cancel against the
        # serving thread's request_call and destroy (a shutdown beside a request_call crashed the process). Taken
        # once per call, by the serving thread alone until stop().
        self._server_lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="grpc-serve", daemon=True)

    # what generated code calls on a grpc.Server (stubs of recent grpcio-tools call the second)
    def add_generic_rpc_handlers(self, handlers) -> None:
        self._generic.extend(handlers)

    def add_registered_method_handlers(self, service_name: str, method_handlers: dict) -> None:
        for method, handler in method_handlers.items():
            if not (handler.request_streaming or handler.response_streaming):
                self._handlers[f"/{service_name}/{method}".encode()] = handler

    def add_insecure_port(self, address: str) -> int:
        """The port bound (for a unix: address, 1), or 0 if it cannot be bound."""
        return self._server.add_http2_port(address.encode())

    def start(self) -> None:
        self._server.start()
        self._request_call()
        self._thread.start()

    def stop(self, grace: float) -> None:
        """Refuse new calls, let those in flight finish for up to `grace` seconds, then cancel them; returns once
        every call has ended (blocking: call it off the event loop, which batching calls may still need)."""
        with self._server_lock:
            self._server.shutdown(self._queue, self._on_shutdown)
        if not self._stopped.wait(grace):
            with self._server_lock:
                if not self._destroyed:
                    self._server.cancel_all_calls()
            self._stopped.wait()
        self._thread.join()

    # the serving thread
    def _request_call(self) -> None:
        try:
            with self._server_lock:
                self._server.request_call(self._queue, self._queue, self._on_call)
        except ValueError:  # stop() has begun the shutdown
            return
        self._accepting = True

    def _serve(self) -> None:
        queue = self._queue
        while not (self._shutting_down and self._live == 0 and not self._accepting):
            event = queue.poll()
            if event.completion_type == cygrpc.CompletionType.operation_complete:
                try:
                    event.tag(event)
                except Exception:  # noqa: BLE001 - a bug in one call must not stop the serving
                    log.exception("gRPC serving: an event of %s failed", event.tag)
            event = None  # drop the event's call before the next poll (grpcio's servers do so too)
        with self._server_lock:
            self._server.destroy()
            self._destroyed = True
        queue.shutdown()
        while queue.poll().completion_type != cygrpc.CompletionType.queue_shutdown:
            pass
        self._stopped.set()

    def _on_shutdown(self, _event) -> None:
        self._shutting_down = True

    def _on_call(self, event) -> None:
        self._accepting = False
        if not event.success:  # the server is shutting down
            return
        self._request_call()
        method = event.call_details.method
        handler = self._handler(method, event.invocation_metadata)
        call = _Call(self, event.call, method, handler, Context(event.call_details.deadline, event.invocation_metadata))
        self._live += 1
        if handler is None:  # grpcio's servers' answer to an unknown method (or a streaming one)
            call.finish_with(_UNIMPLEMENTED, "Method not found!")
        else:
            event.call.start_server_batch((cygrpc.ReceiveMessageOperation(0),), call.on_message)

    def _handler(self, method: bytes, metadata):
        handler = self._handlers.get(method)
        if handler is None:
            details = _CallDetails(method.decode("utf-8", "replace"), metadata)
            for generic in self._generic:
                handler = generic.service(details)
                if handler is not None:
                    break
            if handler is None or handler.request_streaming or handler.response_streaming:
                return None
            self._handlers[method] = handler
        return handler

    def ended(self, _event) -> None:
        self._live -= 1
