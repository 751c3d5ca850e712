"""HTTP/1.1 on asyncio: a raw protocol with httptools, keep-alive, pipelining in order, gzip request bodies.

It knows nothing of TensorFlow Serving: an `Application` (rest.py's RestApi) maps each request to a `Response`,
or to a `Pending` one whose future the connection waits for without a task of its own. Responses keep their
request order on a connection (HTTP/1.1 pipelining). Error pages for what the protocol itself refuses are
libevent's, as TFS's HTTP server (libevent) writes them.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import gzip
import zlib
from typing import Protocol

import httptools

REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
           409: "Conflict", 429: "Too Many Requests", 499: "Client Closed Request", 500: "Internal Server Error",
           501: "Not Implemented", 503: "Service Unavailable", 504: "Gateway Timeout"}


class Response:
    __slots__ = ("status", "body", "content_type")

    def __init__(self, status: int, body: bytes, content_type: bytes = b"application/json"):
        self.status, self.body, self.content_type = status, body, content_type


class Pending:
    """A response still being computed: the connection answers with `response()` once `future` is done (in the
    future's done callback: no second future or task per request)."""

    __slots__ = ("future",)

    def __init__(self, future: asyncio.Future):
        self.future = future

    def response(self) -> Response:
        raise NotImplementedError


class Application(Protocol):
    """What the protocol asks of the API it serves."""

    extra_headers: bytes  # header lines added to every response (CORS), each ending in CRLF

    def handle(self, method: str, path: str, body: bytes) -> Response | Pending:
        """The answer to a request (any method but OPTIONS), its body decompressed."""

    def preflight(self, path: str, origin: bytes | None) -> Response:
        """The answer to an OPTIONS request (CORS preflight)."""

    def bad_request(self, message: str) -> Response:
        """A 400 for a request the protocol cannot read (malformed HTTP, an undecodable gzip body)."""


def html_error(status: int) -> Response:
    """libevent's error page."""
    reason = REASONS[status]
    body = f"<HTML><HEAD>\n<TITLE>{status} {reason}</TITLE>\n</HEAD><BODY>\n<H1>{reason}</H1>\n</BODY></HTML>\n"
    return Response(status, body.encode("ascii"), b"text/html")


@functools.lru_cache(maxsize=64)
def _status_lines(status: int, content_type: bytes) -> bytes:
    """The start of a response head: its status line and Content-Type."""
    reason = REASONS.get(status, "Unknown")
    return b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\n" % (status, reason.encode("ascii"), content_type)


class HttpProtocol(asyncio.Protocol):
    """One HTTP/1.1 connection: parse with httptools, answer in order, keep alive unless told otherwise."""

    MAX_PENDING = 64  # pipelined requests in flight before the connection stops reading

    def __init__(self, app: Application):
        self.app = app
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
            self._send_now(html_error(501), keep_alive=False)
        except httptools.HttpParserError as exc:
            self._send_now(self.app.bad_request(f"Malformed HTTP request: {exc}"), keep_alive=False)

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
            response = self.app.preflight(path, self.origin)
        else:
            if self.encoding and b"gzip" in self.encoding:
                try:
                    body = gzip.decompress(body)
                except (OSError, EOFError, zlib.error) as exc:
                    response = self.app.bad_request(f"Failed to decompress gzip request body: {exc}")
                    self._enqueue(response, keep_alive, method == "HEAD")
                    return
            response = self.app.handle(method, path, body)
        self._enqueue(response, keep_alive, method == "HEAD")

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
            _status_lines(response.status, response.content_type), len(body), self.app.extra_headers,
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


async def start_server(app: Application, port: int, host: str = "0.0.0.0") -> asyncio.AbstractServer:
    loop = asyncio.get_running_loop()
    return await loop.create_server(lambda: HttpProtocol(app), host, port, reuse_address=True, backlog=1024)
