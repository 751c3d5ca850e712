"""HTTP/1.1 on asyncio: a raw protocol with httptools, keep-alive, pipelining in order, gzip request bodies.

It knows nothing of TensorFlow Serving: an `Application` (rest.py's RestApi) maps each request to a `Response`,
or to a `Pending` one whose future the connection waits for without a task of its own. Responses keep their
request order on a connection (HTTP/1.1 pipelining). Error pages for what the protocol itself refuses are
libevent's, as TFS's HTTP server (libevent) writes them.

Limits (TFS has none of them; `Limits`, set by this server's own flags): a request body, and what a gzip body
expands to, may not pass `max_body_bytes` (413, the connection then closed); a request must arrive whole within
`request_timeout` of its first byte (408, closed); a connection with no request in progress is closed after
`idle_timeout`; a connection whose answers the client does not read (its transport's write buffer above the high
-water mark) is not read from until they drain.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import zlib
from dataclasses import dataclass
from typing import NoReturn, Protocol, cast

import httptools

from ..shared.media_types import JSON

REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    409: "Conflict",
    413: "Request Entity Too Large",
    429: "Too Many Requests",
    499: "Client Closed Request",
    500: "Internal Server Error",
    501: "Not Implemented",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


class Response:
    __slots__ = ("status", "body", "content_type", "code")

    def __init__(self, status: int, body: bytes, content_type: bytes = JSON.encode(), code: str = "OK"):
        self.status, self.body, self.content_type = status, body, content_type
        self.code = code  # the TFS status code's name (OK, NOT_FOUND...): the request metrics' status label


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

    def refuse(self, status: int, message: str) -> Response:
        """An error answer of the protocol's limits (413, 408), as the API writes its errors."""


@dataclass(frozen=True)
class Limits:
    """What one connection may cost; a value of 0 turns its limit off."""

    max_body_bytes: int = 256 * 1024 * 1024  # a request body, and a gzip body once decompressed
    request_timeout: float = 60.0  # seconds from a request's first byte to its last
    idle_timeout: float = 300.0  # seconds a connection may wait with no request in progress


_GZIP_CHUNK = 1024 * 1024  # a gzip body is decompressed this much at a time, counted against the body limit


class BodyTooLarge(Exception):
    pass


class _Refused(Exception):
    """Raised in a parser callback once a limit has answered: the parser stops."""


def gunzip(body: bytes, limit: int) -> bytes:
    """The decompressed body; BodyTooLarge past `limit` bytes (0: none), found before more is kept. The output
    grows in one buffer (past malloc's mmap threshold, freed back to the system at once when refused): pieces
    kept apart would stay in the heap as hundreds of MB of resident memory."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)  # gzip's header and trailer
    output, data = bytearray(), body
    while True:
        piece = inflater.decompress(data, _GZIP_CHUNK)
        output += piece
        if limit and len(output) > limit:
            del output[:]  # now: the exception's traceback keeps this frame alive
            raise BodyTooLarge
        data = inflater.unconsumed_tail
        if inflater.eof:
            if inflater.unused_data:  # a second gzip member, as gzip.decompress reads it
                data = inflater.unused_data
                inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
                continue
            return bytes(output)
        if not data and not piece:
            raise EOFError("Compressed file ended before the end-of-stream marker was reached")


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
    # seconds a refused connection is read (and dropped) after its answer before it is closed: a close with unread
    # data would reset the connection, and the client could lose the answer
    LINGER = 2.0

    def __init__(self, app: Application, limits: Limits = Limits(), connections: set | None = None):
        self.app, self.limits = app, limits
        self.connections = connections  # the server's open connections, which its watchdog checks
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpRequestParser(self)
        self.pending: collections.deque = collections.deque()  # [Response or Pending, keep_alive, head_only]
        self.paused = False  # too many pipelined requests in flight
        self.writing_paused = False  # the transport's write buffer is above its high-water mark
        self.started: float | None = None  # loop time of the first byte of the request being read
        self.idle_since = 0.0  # loop time of the connection's last activity (a request begun, answers due)
        self.loop: asyncio.AbstractEventLoop  # the running loop, from connection_made on
        self.refused = False  # a limit refused a request: nothing more is read, its answer ends the connection
        self.lingering: float | None = None  # the refusal was sent at this loop time: what arrives is dropped
        self._reset()

    def _reset(self) -> None:
        self.url = b""
        self.body: list[bytes] = []
        self.body_size = 0  # bytes of the body received, counted against the limit
        self.encoding: bytes | None = None
        self.origin: bytes | None = None
        self.expect_continue = False

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream server's
        self.loop = asyncio.get_running_loop()
        self.idle_since = self.loop.time()
        if self.connections is not None:
            self.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.pending.clear()
        self.body = []
        if self.connections is not None:
            self.connections.discard(self)

    def pause_writing(self) -> None:
        self.writing_paused = True
        self.idle_since = self.loop.time()
        self._update_reading()

    def resume_writing(self) -> None:
        self.writing_paused = False
        self.idle_since = self.loop.time()
        if self.started is not None:
            self.started = self.idle_since  # the request's time ran while it was not read
        self._update_reading()

    def _update_reading(self) -> None:
        transport = self.transport
        if transport is None:
            return
        if self.writing_paused or self.paused:
            transport.pause_reading()
        else:
            transport.resume_reading()

    def check_timeouts(self, now: float) -> None:
        """Called by the server's watchdog about once a second: ends a slow request, an idle connection, or one
        whose client has not read its answers for the idle timeout."""
        transport, limits = self.transport, self.limits
        if transport is None:
            return
        if self.lingering is not None:
            if now - self.lingering > self.LINGER:
                transport.close()
                self.transport = None
        elif self.refused:
            return  # the refusal waits for the answers to the requests before it
        elif self.writing_paused:
            if limits.idle_timeout and now - self.idle_since > limits.idle_timeout:
                transport.abort()  # its answers would never drain
                self.transport = None
        elif self.paused:  # reading stopped while answers are computed: not the client's delay
            self.idle_since = now
            if self.started is not None:
                self.started = now
        elif self.started is not None:
            if limits.request_timeout and now - self.started > limits.request_timeout:
                self._refuse(
                    408, f"Request timed out: it did not arrive whole within {limits.request_timeout:g} seconds"
                )
        elif self.pending:
            self.idle_since = now  # answers still due: not idle
        elif limits.idle_timeout and now - self.idle_since > limits.idle_timeout:
            transport.close()
            self.transport = None

    def data_received(self, data: bytes) -> None:
        if self.refused:  # what still arrives is dropped
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._send_now(html_error(501), keep_alive=False)
        except httptools.HttpParserError as exc:
            if self.refused:  # a limit stopped the parser: its answer is queued
                return
            self._send_now(self.app.bad_request(f"Malformed HTTP request: {exc}"), keep_alive=False)

    def _refuse(self, status: int, message: str) -> None:
        """Answer a limit's error after the answers due before it, then end the connection (the rest of the
        request is not read)."""
        self.refused = True
        self.started = None
        self.body = []
        self._enqueue(self.app.refuse(status, message), keep_alive=False, head_only=False)

    # httptools callbacks
    def on_message_begin(self) -> None:
        self._reset()
        self.started = self.idle_since = self.loop.time()

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        lowered = name.lower()
        if lowered == b"content-length":
            limit = self.limits.max_body_bytes
            if limit and value.strip().isdigit() and int(value) > limit:
                self._too_large()
        elif lowered == b"content-encoding":
            self.encoding = value.lower()
        elif lowered == b"origin":
            self.origin = value
        elif lowered == b"expect" and value.lower() == b"100-continue":
            self.expect_continue = True

    def on_headers_complete(self) -> None:
        if self.expect_continue and self.transport is not None:  # once the body's size is known to be allowed
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")  # curl waits for this before a large body

    def on_body(self, body: bytes) -> None:
        self.body_size += len(body)
        if self.limits.max_body_bytes and self.body_size > self.limits.max_body_bytes:
            self._too_large()
            return
        self.body.append(body)

    def _too_large(self, once: str = "") -> NoReturn:
        self._refuse(
            413,
            f"Request body too large{once}: over {self.limits.max_body_bytes} bytes (the limit is "
            f"--rest_api_max_body_bytes)",
        )
        raise _Refused  # stops the parser (feed_data raises it as an HttpParserCallbackError)

    def on_message_complete(self) -> None:
        self.started = None
        method = self.parser.get_method().decode("ascii", "replace")
        path = self.url.decode("utf-8", "replace")
        body = b"".join(self.body)
        self.body = []
        keep_alive = self.parser.should_keep_alive()
        response: Response | Pending
        if method == "OPTIONS":
            response = self.app.preflight(path, self.origin)
        else:
            if self.encoding and b"gzip" in self.encoding:
                try:
                    expanded: bytes | None = gunzip(body, self.limits.max_body_bytes)
                except BodyTooLarge:
                    expanded = None
                except (OSError, EOFError, zlib.error) as exc:
                    response = self.app.bad_request(f"Failed to decompress gzip request body: {exc}")
                    self._enqueue(response, keep_alive, method == "HEAD")
                    return
                if expanded is None:
                    self._too_large(" once decompressed")
                body = expanded
            response = self.app.handle(method, path, body)
        self._enqueue(response, keep_alive, method == "HEAD")

    # responses
    def _enqueue(self, response: Response | Pending, keep_alive: bool, head_only: bool) -> None:
        if not self.pending and isinstance(response, Response):
            self._write(response, keep_alive, head_only)
            return
        entry = [response, keep_alive, head_only]
        self.pending.append(entry)
        if isinstance(response, Pending):
            response.future.add_done_callback(self._flush)
        if len(self.pending) >= self.MAX_PENDING and not self.paused:
            self.paused = True
            self._update_reading()
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
        if self.paused and len(self.pending) < self.MAX_PENDING // 2:
            self.paused = False
            self._update_reading()

    def _send_now(self, response: Response, keep_alive: bool) -> None:
        self.pending.clear()
        self._write(response, keep_alive, False)

    def _write(self, response: Response, keep_alive: bool, head_only: bool) -> None:
        transport = self.transport
        if transport is None:
            return
        body = response.body
        head = b"%sContent-Length: %d\r\n%s%s\r\n" % (
            _status_lines(response.status, response.content_type),
            len(body),
            self.app.extra_headers,
            b"" if keep_alive else b"Connection: close\r\n",
        )
        if head_only or not body:
            transport.write(head)
        elif len(body) < 65536:
            transport.write(head + body)
        else:
            transport.writelines((head, body))
        if not keep_alive:
            if self.refused and transport.can_write_eof():
                transport.write_eof()
                self.lingering = self.loop.time()
                return
            transport.close()
            self.transport = None


async def start_server(
    app: Application, port: int, host: str = "0.0.0.0", limits: Limits = Limits()
) -> asyncio.AbstractServer:
    loop = asyncio.get_running_loop()
    connections: set[HttpProtocol] = set()

    def watch() -> None:  # one timer for every connection's deadlines: none per request
        now = loop.time()
        for connection in list(connections):
            connection.check_timeouts(now)
        loop.call_later(1.0, watch)

    loop.call_later(1.0, watch)
    return await loop.create_server(
        lambda: HttpProtocol(app, limits, connections), host, port, reuse_address=True, backlog=1024
    )
