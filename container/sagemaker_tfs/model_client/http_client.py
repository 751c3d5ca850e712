"""A minimal HTTP/1.1 client for servers on the loopback interface (the model servers), fast enough to be
invisible next to the app: each thread keeps one keep-alive connection (TCP_NODELAY) per port, so there is no
pool to lock and no connection set-up per request. One sendall per request and a buffered read of the answer
(Content-Length, chunked, or until close) cost a third of http.client's CPU, most of which goes to parsing
headers with the email package. Answers are real `requests.Response` objects, since handler scripts get them,
made through requests' public API without its Session machinery (which costs more than the call).

Errors: TimeoutError when the server does not answer in time, ProtocolError when its answer is not HTTP/1.x,
any other OSError when it cannot be reached (refused, reset, or a connection to itself, see Connection.open).
"""

from __future__ import annotations

import datetime
import errno
import functools
import re
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlencode

import requests
from requests.structures import CaseInsensitiveDict
from requests.utils import get_encoding_from_headers

from ..shared import cooperative
from ..shared.sockets import HOST, send, timeval

SELF_CONNECT = "Connection refused: the connection reached itself"  # strerror of a reset self-connect

_PEEK = int(socket.MSG_PEEK | socket.MSG_DONTWAIT)  # (or-ing the flags' enum each time costs a few µs)
# SO_LINGER on with a zero timeout: close() sends a reset and frees the port at once (no TIME_WAIT).
_RESET_ON_CLOSE = struct.pack("ii", 1, 0)


def request_body(data: Any) -> tuple[Any, dict[str, str]]:
    """(body, extra headers) for what a handler gives to send, with the semantics of `requests.post(data=...)`:
    bytes and str (UTF-8) as they are, a dict or a list of pairs form-encoded, a file-like object read."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return data, {}
    if isinstance(data, str):
        return data.encode(), {}
    if data is None:
        return b"", {}
    if hasattr(data, "read"):
        content = data.read()
        return (content.encode() if isinstance(content, str) else content), {}
    if isinstance(data, (dict, list, tuple)):
        items = data.items() if isinstance(data, dict) else data
        try:
            form = urlencode(list(items), doseq=True)
        except (TypeError, ValueError):
            pass
        else:
            return form.encode(), {"Content-Type": "application/x-www-form-urlencoded"}
    raise TypeError(
        f"cannot send {type(data).__name__} {_preview(data)} to the model server: give str, bytes, "
        "a dict (form-encoded, like requests) or a file"
    )


def _preview(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class ProtocolError(Exception):
    """The server's answer is not valid HTTP/1.x."""


class Connection:
    """One HTTP/1.1 keep-alive connection to a loopback port, used by one thread. The socket stays in blocking
    mode with the timeout set in the kernel (SO_RCVTIMEO, SO_SNDTIMEO): a Python socket timeout would add a poll()
    before every send and receive."""

    def __init__(self, port: int):
        self.port = port
        self.sock: socket.socket | None = None
        self._buffer = b""  # received and not yet read
        self._timeout: float | None = None  # the one set on the socket
        self.base_uri = f"http://{HOST}:{port}"
        self._host = f"Host: {HOST}:{port}\r\n".encode()

    def open(self, timeout: float) -> socket.socket:
        """Connect and return the socket, or raise OSError. When nothing listens on a port of the kernel's
        ephemeral range, a connect() can be given that very port as its own: TCP's simultaneous open then connects
        the socket to itself, and the socket holds the port, so that a model server restarting there cannot bind it.
        Such a socket is reset (closed without TIME_WAIT) and reported as ECONNREFUSED, which it stands for."""
        sock = socket.create_connection((HOST, self.port), timeout)
        if sock.getsockname() == sock.getpeername():
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET_ON_CLOSE)
            sock.close()
            raise ConnectionRefusedError(errno.ECONNREFUSED, SELF_CONNECT)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(None)
        self.sock, self._buffer, self._timeout = sock, b"", None
        return sock

    def _closed_by_server(self, sock: socket.socket) -> bool:
        """Whether the idle kept connection has ended: a non-blocking peek reads its end of stream (or a reset,
        or bytes nobody asked for) without waiting."""
        if self._buffer:
            return True
        try:
            sock.recv(1, _PEEK)
        except BlockingIOError:
            return False  # nothing to read: open
        except OSError:
            pass
        return True

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock, self._buffer = None, b""

    def _set_timeout(self, sock: socket.socket, timeout: float) -> None:
        value = timeval(timeout)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, value)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, value)
        self._timeout = timeout

    def exchange(
        self, method: str, path: str, body: bytes, headers: dict[str, str], timeout: float
    ) -> tuple[int, str, bytes, str | None, bytes]:
        """Send one request, read its answer (as _read_answer gives it). A kept connection the server
        has closed meanwhile is replaced before sending; once sent, a request is never sent again (a POST may not
        be idempotent: a handler's call would run twice)."""
        sock = self.sock
        if sock is not None and self._closed_by_server(sock):
            self.close()
            sock = None
        if sock is None:
            sock = self.open(timeout)
        if timeout != self._timeout:
            self._set_timeout(sock, timeout)
        head = [f"{method} {path} HTTP/1.1\r\n".encode(), self._host]
        if body or method == "POST":
            head.append(b"Content-Length: %d\r\n" % len(body))
        for name, value in headers.items():
            head.append(f"{name}: {value}\r\n".encode())
        head.append(b"\r\n")
        request = b"".join(head)
        try:
            self._send(sock, request, body)
            return self._read_answer(sock, method)
        except BlockingIOError:  # SO_RCVTIMEO or SO_SNDTIMEO expired
            raise TimeoutError("timed out") from None

    def _send(self, sock: socket.socket, head: bytes, body: Any) -> None:
        send(sock, head, body)

    def _recv(self, sock: socket.socket) -> bytes:
        return sock.recv(65536)

    def _receive(self, sock: socket.socket) -> bytes:
        data = self._recv(sock)
        if not data:
            raise ConnectionResetError("the model server closed the connection")
        return data

    def _read_answer(self, sock: socket.socket, method: str) -> tuple[int, str, bytes, str | None, bytes]:
        """(status, reason, header lines, content type, content) of the answer: the header lines as received
        (each after its CRLF), read for the framing only (Content-Length, Transfer-Encoding, Connection) and the
        type; the rest is parsed only if a handler reads the headers (ModelServerResponse)."""
        data = self._buffer or self._receive(sock)
        while True:  # interim answers (1xx, e.g. 100 Continue) are skipped: the final one follows
            while (end := data.find(b"\r\n\r\n")) < 0:
                if len(data) > 65536:
                    raise ProtocolError("the answer's headers are incomplete or too many")
                data += self._receive(sock)
            line_end = data.find(b"\r\n")
            status_line = data[:line_end].decode("latin-1")
            head = data[line_end:end]
            data = data[end + 4 :]
            version, _, rest = status_line.partition(" ")
            code, _, reason = rest.partition(" ")
            if not version.startswith("HTTP/1.") or not code.isdigit():
                raise ProtocolError(f"invalid status line {status_line[:100]!r}")
            if head.count(b"\r\n") > 200:
                raise ProtocolError("the answer's headers are incomplete or too many")
            status = int(code)
            if status == 101:
                raise ProtocolError("the server switched protocols (101), which was not asked for")
            if not 100 <= status < 200:
                break
            if not data:
                data = self._receive(sock)
        length = None
        chunked = False
        keep_alive = version == "HTTP/1.1"
        content_type = None
        for name, value in _FRAMING.findall(head):
            name, value = name.lower(), value.strip()
            if name == b"content-length":
                if not value.isdigit():
                    raise ProtocolError(f"invalid Content-Length {value.decode('latin-1')!r}")
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = value.lower().endswith(b"chunked")
            elif name == b"connection":
                token = value.lower()
                keep_alive = False if token == b"close" else True if token == b"keep-alive" else keep_alive
            else:  # repeated, joined as the headers join it
                text = value.decode("latin-1")
                content_type = text if content_type is None else content_type + ", " + text
        if method == "HEAD" or status in (204, 304):
            content = b""
        elif chunked:
            content, data = self._read_chunks(sock, data)
        elif length is not None:
            while len(data) < length:
                try:
                    data += self._receive(sock)
                except ConnectionResetError:
                    raise ProtocolError(f"the answer ended after {len(data)} of {length} bytes") from None
            content, data = data[:length], data[length:]
        else:
            parts = [data]
            while chunk := self._recv(sock):
                parts.append(chunk)
            content, data, keep_alive = b"".join(parts), b"", False
        self._buffer = data
        if not keep_alive:
            self.close()
        return status, reason, head, content_type, content

    def _read_chunks(self, sock: socket.socket, data: bytes) -> tuple[bytes, bytes]:
        """(content, what follows) of a chunked body starting in `data`."""
        chunks: list[bytes] = []
        while True:
            while (end := data.find(b"\r\n")) < 0:
                if len(data) > 65536:
                    raise ProtocolError(f"invalid chunk size {data[:100]!r}")
                data += self._receive_in_body(sock)
            try:
                size = int(data[:end].split(b";", 1)[0], 16)
            except ValueError:
                raise ProtocolError(f"invalid chunk size {data[: min(end, 100)]!r}") from None
            data = data[end + 2 :]
            if size == 0:
                while not data.startswith(b"\r\n"):  # trailers, then the empty line
                    while (end := data.find(b"\r\n")) < 0:
                        data += self._receive_in_body(sock)
                    if end == 0:  # the empty line arrived in a later read
                        break
                    data = data[end + 2 :]
                return b"".join(chunks), data[2:]
            while len(data) < size + 2:
                data += self._receive_in_body(sock)
            if data[size : size + 2] != b"\r\n":
                raise ProtocolError("a chunk of the answer is incomplete")
            chunks.append(data[:size])
            data = data[size + 2 :]

    def _receive_in_body(self, sock: socket.socket) -> bytes:
        try:
            return self._receive(sock)
        except ConnectionResetError:
            raise ProtocolError("a chunk of the answer is incomplete") from None


class LoopConnection(Connection):
    """A Connection used by the request greenlets of the app worker's loop (shared/cooperative.py): its socket is
    non-blocking and registered with the loop for good, so that waiting for the answer hands the thread to other
    requests, and a server closing it while it is idle is seen by the loop (no peek before each request)."""

    _watch: cooperative.Watch  # its socket's registration, made by open(): used only while the socket is open

    def __init__(self, port: int, hub: cooperative.Hub):
        super().__init__(port)
        self._hub = hub
        self._sent = False  # a request was just sent

    def open(self, timeout: float) -> socket.socket:
        sock = super().open(timeout)
        sock.setblocking(False)
        self._watch = self._hub.watch(sock, self.close)
        return sock

    def _closed_by_server(self, sock: socket.socket) -> bool:
        return bool(self._buffer)  # bytes nobody asked for; an end of stream closed it already (Watch.on_idle)

    def close(self) -> None:
        if self.sock is not None:
            self._hub.unregister(self.sock)
        super().close()

    def _set_timeout(self, sock: socket.socket, timeout: float) -> None:
        self._timeout = timeout

    def _wait(self, sock: socket.socket, events: int) -> None:
        if not self._hub.wait(sock, self._watch, events, self._timeout):
            raise TimeoutError("timed out")

    def _send(self, sock: socket.socket, head: bytes, body: Any) -> None:
        if not self._hub.send_all(sock, self._watch, head, body, self._timeout):
            raise TimeoutError("timed out")
        self._sent = True

    def _recv(self, sock: socket.socket) -> bytes:
        if self._sent:  # the answer cannot be there yet: wait for it rather than try a read that fails
            self._sent = False
            self._wait(sock, cooperative.READ)
        while True:
            try:
                return sock.recv(65536)
            except BlockingIOError:
                self._wait(sock, cooperative.READ)


class HttpClient:
    """Requests to loopback ports over keep-alive connections kept per thread (threading.local): no locks. In a
    request greenlet of the app worker's loop, over LoopConnections taken from the loop's idle ones (by port)
    instead."""

    def __init__(self) -> None:
        self._local = threading.local()

    def _connection(self, port: int) -> Connection:
        try:
            connections = self._local.connections
        except AttributeError:
            connections = self._local.connections = {}
        connection = connections.get(port)
        if connection is None:
            connection = connections[port] = Connection(port)
        return connection

    def request(
        self, port: int, method: str, path: str, data: Any, timeout: float, headers: dict[str, str] | None = None
    ) -> requests.Response:
        """The server's answer, whatever its status; `data` as request_body() takes it. Sent once (see
        Connection.exchange); any failure closes the connection."""
        body, extra = request_body(data)
        headers = {**extra, **headers} if headers else extra
        hub = cooperative.hub()
        if hub is None:
            connection = self._connection(port)
        else:
            idle = hub.pools.get(port) or hub.pools.setdefault(port, [])  # used by the loop's thread only
            connection = idle.pop() if idle else LoopConnection(port, hub)
        started = time.perf_counter()
        try:
            status, reason, head, content_type, content = connection.exchange(method, path, body, headers, timeout)
        except Exception:
            connection.close()
            raise
        finally:
            if hub is not None:
                idle.append(connection)  # closed, it opens again when next used
        return ModelServerResponse(
            status, reason, head, content_type, content, connection.base_uri + path, time.perf_counter() - started
        )

    def close(self) -> None:
        """Close this thread's connections."""
        for connection in getattr(self._local, "connections", {}).values():
            connection.close()
        self._local.connections = {}


class ModelServerResponse(requests.Response):
    """A model server's answer as the requests.Response that handler scripts get, as requests gives an answer it
    read whole (not streamed), made through requests' public API: `Response.__init__`, then the public attributes
    its adapter sets. requests' own `content` reads the body from `raw` (a `Content`) when it is first read, by
    any reader; the headers are parsed from the header lines when first read (most handlers never read them)."""

    _head: bytes | None = None  # the header lines not parsed yet, each after its CRLF
    _unread = False  # the content not read yet from `raw`
    _reading = False  # requests' `content` is reading `raw` now

    def __init__(
        self,
        status: int,
        reason: str,
        head: bytes,
        content_type: str | None,
        content: bytes | Callable[[], bytes],
        url: str,
        seconds: float,
    ) -> None:
        """`head`: the header lines, each after its CRLF; `content_type`: the Content-Type's value, None without
        one; `content`: the body, or what writes it when first read."""
        super().__init__()
        self.status_code, self.reason, self.url = status, reason, url
        self.raw = Content(content)
        self.encoding = _encoding(content_type)
        self.elapsed = datetime.timedelta(seconds=seconds)
        self._head, self._unread = head, True

    @property  # requests' attribute, read and written through a property
    def headers(self) -> CaseInsensitiveDict[str]:
        if self._head is not None:
            self._headers, self._head = _header_table(self._head), None
        return self._headers

    @headers.setter
    def headers(self, value: CaseInsensitiveDict[str]) -> None:  # Response.__init__'s, pickle's, or a script's
        self._headers, self._head = value, None

    @property
    def content(self) -> bytes:
        if self._unread:  # requests' content reads `raw` through iter_content (below: in one part)
            self._unread, self._reading = False, True
        return super().content

    def iter_content(self, chunk_size: int | None = 1, decode_unicode: bool = False) -> Iterator[Any]:
        """As requests iterates an answer it read whole: over the content, read first if it is not yet. For
        requests' own `content`, the whole body in one part: what its chunked reading of `raw` would join, without
        its generators (a third of the answer's cost)."""
        if self._reading:
            self._reading = False
            return iter((self.raw.read(),))
        if self._unread:
            self.content  # noqa: B018 (the property reads `raw`)
        return super().iter_content(chunk_size, decode_unicode)


class Content:
    """The content of an answer as its `raw`, read by `Response.content` (a file-like object without `.stream`).
    The whole content to the first read, whatever size is asked (requests joins what it reads: one part is not
    copied), nothing after; a function giving it is called then."""

    __slots__ = ("_body",)

    def __init__(self, body: bytes | Callable[[], bytes]) -> None:
        self._body = body

    def read(self, size: int | None = -1) -> bytes:
        body, self._body = self._body, b""
        return body if isinstance(body, bytes) else body()

    def close(self) -> None:
        """Nothing to release: the connection was given back when the answer was read."""


def _header_table(head: bytes) -> CaseInsensitiveDict[str]:
    """The header lines (each after its CRLF) as requests' headers: a repeated header's values joined with ", "
    under its first spelling, as urllib3 joins them."""
    joined: dict[str, tuple[str, str]] = {}
    for line in head.decode("latin-1").split("\r\n")[1:]:
        name, _, value = line.partition(":")
        name, value = name.strip(), value.strip()
        key = name.lower()
        if key in joined:
            name, value = joined[key][0], joined[key][1] + ", " + value
        joined[key] = (name, value)
    return CaseInsensitiveDict(joined.values())


@functools.lru_cache(maxsize=64)  # the model servers answer few types (application/json)
def _encoding(content_type: str | None) -> str | None:
    """The encoding requests' adapter sets for an answer of this Content-Type."""
    if content_type is None:
        return None
    return get_encoding_from_headers(CaseInsensitiveDict({"content-type": content_type}))


# The header lines the client reads itself (each after its CRLF): the framing, and the type for the encoding.
_FRAMING = re.compile(
    rb"\r\n[ \t]*(content-length|transfer-encoding|connection|content-type)[ \t]*:([^\r\n]*)", re.IGNORECASE
)
