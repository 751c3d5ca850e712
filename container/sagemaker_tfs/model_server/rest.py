"""The HTTP/REST API of TFS (`/v1/models/...`) on asyncio: a raw protocol with httptools and keep-alive.

Routes, status codes and bodies follow TFS (../shared/specs/tfs-rest-grpc-api.md §1-4): paths are matched
case-insensitively by TFS's regular expressions, methods and verbs case-sensitively; anything else under
`/v1/` is `400 Malformed request`, and paths outside it get a 404 HTML page like libevent's.
Responses keep their request order on a connection (HTTP/1.1 pipelining).
"""

from __future__ import annotations

import asyncio
import collections
import functools
import gzip
import logging
import re
import time
import urllib.parse
import zlib
from typing import Callable

import httptools
from google.protobuf import json_format
from tensorflow_serving.apis import model_pb2

from . import json_request, json_response, signatures
from .metrics import ModelServerMetrics
from .registry import Registry
from .runner import Runner
from .status import Code, ServingError, invalid_argument

log = logging.getLogger(__name__)

_V1 = re.compile(r"/v1/.*", re.I | re.S)
_POST = re.compile(r"/v1/models/([^/:]+)(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?:(classify|regress|predict)",
                   re.I)
_GET = re.compile(r"/v1/models(?:/([^/:]+))?(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?(?:/(metadata))?", re.I)
_ORIGIN = re.compile(r"https?://.+", re.I)
_INT64_MAX = 2**63 - 1

_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
            409: "Conflict", 429: "Too Many Requests", 499: "Client Closed Request", 500: "Internal Server Error",
            501: "Not Implemented", 503: "Service Unavailable", 504: "Gateway Timeout"}


class Response:
    __slots__ = ("status", "body", "content_type", "code")

    def __init__(self, status: int, body: bytes, content_type: bytes = b"application/json", code: str = "OK"):
        self.status, self.body, self.content_type = status, body, content_type
        self.code = code  # the status code's name (OK, NOT_FOUND...): the request_count metric's label


def _error(error: ServingError) -> Response:
    return Response(error.http_status, json_response.error_body(error.message), code=error.code.name)


def _html_error(status: int) -> Response:
    reason = _REASONS[status]
    body = (f"<HTML><HEAD>\n<TITLE>{status} {reason}</TITLE>\n</HEAD><BODY>\n<H1>{reason}</H1>\n</BODY></HTML>\n")
    return Response(status, body.encode("ascii"), b"text/html")


class Pending:
    """A response still being computed: the outputs' future and how to make the body of them. The connection
    formats it when the future is done (in its done callback: no second future or task per request).
    `finished`, when set, is told the response (the request metrics)."""
    __slots__ = ("future", "finish", "finished")

    def __init__(self, future: asyncio.Future, finish: Callable[[object], bytes]):
        self.future, self.finish = future, finish
        self.finished: Callable[[Response], None] | None = None

    def response(self) -> Response:
        try:
            response = Response(200, self.finish(self.future.result()))
        except ServingError as exc:
            response = _error(exc)
        except asyncio.CancelledError:  # the server is stopping
            response = _error(ServingError(Code.CANCELLED, "request cancelled"))
        except Exception as exc:  # a bug must still answer the client
            log.exception("request failed")
            response = _error(ServingError(Code.INTERNAL, f"{type(exc).__name__}: {exc}"))
        if self.finished is not None:
            self.finished(response)
        return response


def _then(future: asyncio.Future, finish: Callable[[object], bytes]) -> Response | Pending:
    """The response made of the outputs by finish(): now if they are ready (an inline run), else a Pending."""
    pending = Pending(future, finish)
    return pending.response() if future.done() else pending


class RestApi:
    """Maps a request (method, raw path, headers, body) to a Response, or a Pending one. With `metrics`, TFS's
    request metrics are recorded and its Prometheus page is served at `metrics_path`."""

    def __init__(self, registry: Registry, runner: Runner, cors: bool = False,
                 metrics: ModelServerMetrics | None = None, metrics_path: str | None = None):
        self.registry = registry
        self.runner = runner
        self.cors_headers = (b"Access-Control-Allow-Origin: *\r\nAccess-Control-Allow-Methods: POST, GET\r\n"
                             b"Access-Control-Allow-Headers: Content-Type\r\n") if cors else b""
        self.metrics = metrics
        self.metrics_path = metrics_path if metrics is not None else None
        self._routes: dict[tuple[str, str], tuple] = {}

    def handle(self, method: str, path: str, body: bytes) -> Response | Pending:
        if self.metrics is None:
            return self._handle(method, path, body)
        started = time.perf_counter()
        result = self._handle(method, path, body)
        route = self._routes.get((method, path))
        if isinstance(result, Pending):
            result.finished = functools.partial(self._record, route, started)
        else:
            self._record(route, started, result)
        return result

    def _record(self, route: tuple | None, started: float, response: Response) -> None:
        """TFS's REST request metrics: the model name and verb as parsed from the path ("" if it did not parse).
        Paths outside /v1/ and the metrics page are not model requests."""
        kind = route[0] if route is not None else ""
        if kind in ("fixed", "metrics"):
            if kind == "metrics" or response.content_type == b"text/html":
                return
            name = ""
        else:
            name = route[1] if route is not None else ""
        api = kind if kind in ("predict", "classify", "regress") else ""
        self.metrics.request(name, api, "REST", response.code, started)

    def _handle(self, method: str, path: str, body: bytes) -> Response | Pending:
        try:
            route = self._routes.get((method, path))
            if route is None:
                route = self._route(method, path)
                if len(self._routes) > 4096:
                    self._routes.clear()
                self._routes[(method, path)] = route
            kind = route[0]
            if kind == "predict":
                return self._predict(route, body)
            if kind in ("classify", "regress"):
                return self._classify_regress(route, body)
            if kind == "status":
                return self._status(route)
            if kind == "metadata":
                return self._metadata(route)
            if kind == "metrics":
                return Response(200, self.metrics.page(), b"text/plain")
            return route[1]  # a fixed response
        except ServingError as exc:
            return _error(exc)
        except Exception as exc:  # a bug must still answer the client with JSON
            log.exception("%s %s failed", method, path)
            return _error(ServingError(Code.INTERNAL, f"{type(exc).__name__}: {exc}"))

    def _route(self, method: str, path: str) -> tuple:
        if self.metrics_path is not None and path.partition("?")[0] == self.metrics_path:
            return ("metrics",)  # TFS's exporter answers any method on its path
        if not _V1.fullmatch(path):
            return "fixed", _html_error(404)
        if method in ("TRACE", "CONNECT"):
            return "fixed", _html_error(501)
        malformed = "fixed", _error(invalid_argument(f"Malformed request: {method} {path}"))
        if method == "POST":
            match = _POST.fullmatch(path)
            if not match or match.group(4) not in ("classify", "regress", "predict"):
                return malformed
            name, version, label = self._target(match)
            return match.group(4), name, version, label
        if method == "GET":
            match = _GET.fullmatch(path)
            if not match:
                return malformed
            if match.group(1) is None:
                return "fixed", _error(invalid_argument("Missing model name in request."))
            name, version, label = self._target(match)
            return ("metadata" if match.group(4) == "metadata" else "status"), name, version, label
        return malformed

    @staticmethod
    def _target(match: re.Match) -> tuple[str, int | None, str | None]:
        version = match.group(2)
        if version is not None:
            version = int(version)
            if version > _INT64_MAX:
                raise invalid_argument(f"Failed to convert version: {match.group(2)} to numeric.")
        label = match.group(3)
        return (urllib.parse.unquote(match.group(1), errors="replace"), version,
                None if label is None else urllib.parse.unquote(label, errors="replace"))

    # ---------------------------------------------------------------------------------------- handlers

    def _predict(self, route: tuple, body: bytes) -> Response | Pending:
        _, name, version, label = route
        doc = json_request.request_object(body)
        signature_name = json_request.signature_name(doc)
        servable = self.registry.resolve(name, version, label)
        signature = signatures.predict_signature(servable, signature_name, rest=True)
        may_hold_bools = b"true" in body or b"false" in body
        tensors, row_format = json_request.predict_inputs(doc, signature.inputs, may_hold_bools)
        feeds = {signature.inputs[alias].name: array for alias, array in tensors.items()}
        outputs = self.runner.run_in_loop(servable, feeds, signature.fetches, "Predict")
        aliases = signature.output_aliases
        return _then(outputs, lambda result: json_response.predict_body(dict(zip(aliases, result)), row_format))

    def _classify_regress(self, route: tuple, body: bytes) -> Response | Pending:
        method, name, version, label = route
        doc = json_request.request_object(body)
        signature_name = json_request.signature_name(doc)
        servable = self.registry.resolve(name, version, label)
        run = (signatures.classify_run if method == "classify" else signatures.regress_run)(servable, signature_name)
        examples = json_request.serialized_examples(doc)
        count = len(examples)
        if self.metrics is not None:
            self.metrics.examples(servable.name, count)
        outputs = self.runner.run_in_loop(servable, {run.input_name: signatures.examples_tensor(examples)},
                                          run.fetches, method.capitalize())
        if method == "classify":
            return _then(outputs, lambda result: json_response.classify_body(
                *signatures.classification(result, run, count), count))
        return _then(outputs, lambda result: json_response.regress_body(signatures.regression(result, count)))

    def _status(self, route: tuple) -> Response:
        _, name, version, _label = route  # TFS ignores the label of a status request
        response = self.registry.status_proto(name, version)
        return Response(200, _proto_json(response).encode("utf-8"))

    def _metadata(self, route: tuple) -> Response:
        _, name, version, label = route
        servable = self.registry.resolve(name, version, label)
        spec = model_pb2.ModelSpec(name=servable.name, signature_name="")
        spec.version.value = servable.version
        signature_map = servable.signature_def_map()
        # TFS concatenates two protobuf JSON texts by hand; the layout below is its, byte for byte.
        body = ('{\n"model_spec":' + _proto_json(spec) + ',\n"metadata": {"signature_def": '
                + _proto_json(signature_map) + "}\n}\n")
        return Response(200, body.encode("utf-8"))


def _proto_json(message) -> str:
    """protobuf's JSON printer as TFS configures it: 1-space indent, defaults printed, trailing newline."""
    return json_format.MessageToJson(message, indent=1, preserving_proto_field_name=True,
                                     always_print_fields_with_no_presence=True) + "\n"


# -------------------------------------------------------------------------------------------- HTTP protocol

@functools.lru_cache(maxsize=64)
def _status_lines(status: int, content_type: bytes) -> bytes:
    """The start of a response head: its status line and Content-Type."""
    reason = _REASONS.get(status, "Unknown")
    return b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\n" % (status, reason.encode("ascii"), content_type)


class HttpProtocol(asyncio.Protocol):
    """One HTTP/1.1 connection: parse with httptools, answer in order, keep alive unless told otherwise."""

    MAX_PENDING = 64  # pipelined requests in flight before the connection stops reading

    def __init__(self, api: RestApi):
        self.api = api
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpRequestParser(self)
        self.pending: collections.deque = collections.deque()  # [Response or Pending, keep_alive, head_only]
        self.paused = False
        self._reset()

    def _reset(self) -> None:
        self.url = b""
        self.body: list[bytes] = []
        self.encoding: bytes | None = None
        self.origin: bytes | None = None

    # asyncio.Protocol
    def connection_made(self, transport) -> None:
        self.transport = transport

    def connection_lost(self, exc) -> None:
        self.transport = None
        self.pending.clear()

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._send_now(_html_error(501), keep_alive=False)
        except httptools.HttpParserError as exc:
            body = json_response.error_body(f"Malformed HTTP request: {exc}")
            self._send_now(Response(400, body), keep_alive=False)

    # httptools callbacks
    def on_message_begin(self) -> None:
        self._reset()

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        lowered = name.lower()
        if lowered == b"content-encoding":
            self.encoding = value.lower()
        elif lowered == b"origin":
            self.origin = value
        elif lowered == b"expect" and value.lower() == b"100-continue" and self.transport is not None:
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")  # curl waits for this before a large body

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        method = self.parser.get_method().decode("ascii", "replace")
        path = self.url.decode("utf-8", "replace")
        body = b"".join(self.body)
        keep_alive = self.parser.should_keep_alive()
        if method == "OPTIONS":
            response = self._preflight(path)
        else:
            if self.encoding and b"gzip" in self.encoding:
                try:
                    body = gzip.decompress(body)
                except (OSError, EOFError, zlib.error) as exc:
                    response = _error(invalid_argument(f"Failed to decompress gzip request body: {exc}"))
                    self._enqueue(response, keep_alive, method == "HEAD")
                    return
            response = self.api.handle(method, path, body)
        self._enqueue(response, keep_alive, method == "HEAD")

    def _preflight(self, path: str) -> Response:
        if not _V1.fullmatch(path):
            return _html_error(404)
        origin = (self.origin or b"").decode("latin-1")
        return Response(200 if _ORIGIN.fullmatch(origin) else 400, b"")

    # responses
    def _enqueue(self, response, keep_alive: bool, head_only: bool) -> None:
        if not self.pending and isinstance(response, Response):
            self._write(response, keep_alive, head_only)
            return
        entry = [response, keep_alive, head_only]
        self.pending.append(entry)
        if isinstance(response, Pending):
            response.future.add_done_callback(self._flush)
        if len(self.pending) >= self.MAX_PENDING and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
        self._flush()

    def _flush(self, _done: asyncio.Future | None = None) -> None:
        while self.pending:
            response, keep_alive, head_only = self.pending[0]
            if isinstance(response, Pending):
                if not response.future.done():
                    break
                response = response.response()
            self.pending.popleft()
            self._write(response, keep_alive, head_only)
        if self.paused and len(self.pending) < self.MAX_PENDING // 2 and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()

    def _send_now(self, response: Response, keep_alive: bool) -> None:
        self.pending.clear()
        self._write(response, keep_alive, False)

    def _write(self, response: Response, keep_alive: bool, head_only: bool) -> None:
        transport = self.transport
        if transport is None:
            return
        body = response.body
        head = b"%sContent-Length: %d\r\n%s%s\r\n" % (
            _status_lines(response.status, response.content_type), len(body), self.api.cors_headers,
            b"" if keep_alive else b"Connection: close\r\n")
        if head_only or not body:
            transport.write(head)
        elif len(body) < 65536:
            transport.write(head + body)
        else:
            transport.writelines((head, body))
        if not keep_alive:
            transport.close()
            self.transport = None


async def start_rest_server(api: RestApi, port: int, host: str = "0.0.0.0") -> asyncio.AbstractServer:
    loop = asyncio.get_running_loop()
    return await loop.create_server(lambda: HttpProtocol(api), host, port, reuse_address=True, backlog=1024)

