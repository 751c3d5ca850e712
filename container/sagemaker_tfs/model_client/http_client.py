"""A minimal HTTP/1.1 client for servers on the loopback interface (the model servers), fast enough to be
invisible next to the app: each thread keeps one keep-alive connection (TCP_NODELAY) per port, so there is no
pool to lock and no connection set-up per request. One sendall per request and a buffered read of the answer
(Content-Length, chunked, or until close) cost a third of http.client's CPU, most of which goes to parsing
headers with the email package. Answers are real `requests.Response` objects, built directly (the requests
Session machinery costs more than the call), since handler scripts get them.

Errors: TimeoutError when the server does not answer in time, ProtocolError when its answer is not HTTP/1.x,
any other OSError when it cannot be reached (refused, reset, or a connection to itself, see Connection.open).
"""

from __future__ import annotations

import datetime
import errno
import re
import socket
import struct
import threading
import time
from collections import OrderedDict
from http.cookiejar import DefaultCookiePolicy
from typing import Any
from urllib.parse import urlencode

import requests
from requests.cookies import RequestsCookieJar
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

    def open(self, timeout: float) -> None:
        """Connect, or raise OSError. When nothing listens on a port of the kernel's ephemeral range, a
        connect() can be given that very port as its own: TCP's simultaneous open then connects the socket
        to itself, and the socket holds the port, so that a model server restarting there cannot bind it.
        Such a socket is reset (closed without TIME_WAIT) and reported as ECONNREFUSED, which it stands for."""
        sock = socket.create_connection((HOST, self.port), timeout)
        if sock.getsockname() == sock.getpeername():
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET_ON_CLOSE)
            sock.close()
            raise ConnectionRefusedError(errno.ECONNREFUSED, SELF_CONNECT)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(None)
        self.sock, self._buffer, self._timeout = sock, b"", None

    def _closed_by_server(self) -> bool:
        """Whether the idle kept connection has ended: a non-blocking peek reads its end of stream (or a reset,
        or bytes nobody asked for) without waiting."""
        if self._buffer:
            return True
        try:
            self.sock.recv(1, _PEEK)
        except BlockingIOError:
            return False  # nothing to read: open
        except OSError:
            pass
        return True

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock, self._buffer = None, b""

    def _set_timeout(self, timeout: float) -> None:
        value = timeval(timeout)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, value)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, value)
        self._timeout = timeout

    def exchange(
        self, method: str, path: str, body: bytes, headers: dict[str, str], timeout: float
    ) -> tuple[int, str, bytes, str | None, bytes]:
        """Send one request, read its answer (as _read_answer gives it). A kept connection the server
        has closed meanwhile is replaced before sending; once sent, a request is never sent again (a POST may not
        be idempotent: a handler's call would run twice)."""
        if self.sock is not None and self._closed_by_server():
            self.close()
        if self.sock is None:
            self.open(timeout)
        if timeout != self._timeout:
            self._set_timeout(timeout)
        head = [f"{method} {path} HTTP/1.1\r\n".encode(), self._host]
        if body or method == "POST":
            head.append(b"Content-Length: %d\r\n" % len(body))
        for name, value in headers.items():
            head.append(f"{name}: {value}\r\n".encode())
        head.append(b"\r\n")
        request = b"".join(head)
        try:
            self._send(request, body)
            return self._read_answer(method)
        except BlockingIOError:  # SO_RCVTIMEO or SO_SNDTIMEO expired
            raise TimeoutError("timed out") from None

    def _send(self, head: bytes, body: Any) -> None:
        send(self.sock, head, body)

    def _recv(self) -> bytes:
        return self.sock.recv(65536)

    def _receive(self) -> bytes:
        data = self._recv()
        if not data:
            raise ConnectionResetError("the model server closed the connection")
        return data

    def _read_answer(self, method: str) -> tuple[int, str, bytes, str | None, bytes]:
        """(status, reason, header lines, content type, content) of the answer: the header lines as received
        (each after its CRLF), read for the framing only (Content-Length, Transfer-Encoding, Connection) and the
        type; the rest is parsed only if a handler reads the headers (ModelServerResponse)."""
        data = self._buffer or self._receive()
        while True:  # interim answers (1xx, e.g. 100 Continue) are skipped: the final one follows
            while (end := data.find(b"\r\n\r\n")) < 0:
                if len(data) > 65536:
                    raise ProtocolError("the answer's headers are incomplete or too many")
                data += self._receive()
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
                data = self._receive()
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
            content, data = self._read_chunks(data)
        elif length is not None:
            while len(data) < length:
                try:
                    data += self._receive()
                except ConnectionResetError:
                    raise ProtocolError(f"the answer ended after {len(data)} of {length} bytes") from None
            content, data = data[:length], data[length:]
        else:
            parts = [data]
            while chunk := self._recv():
                parts.append(chunk)
            content, data, keep_alive = b"".join(parts), b"", False
        self._buffer = data
        if not keep_alive:
            self.close()
        return status, reason, head, content_type, content

    def _read_chunks(self, data: bytes) -> tuple[bytes, bytes]:
        """(content, what follows) of a chunked body starting in `data`."""
        chunks = []
        while True:
            while (end := data.find(b"\r\n")) < 0:
                if len(data) > 65536:
                    raise ProtocolError(f"invalid chunk size {data[:100]!r}")
                data += self._receive_in_body()
            try:
                size = int(data[:end].split(b";", 1)[0], 16)
            except ValueError:
                raise ProtocolError(f"invalid chunk size {data[: min(end, 100)]!r}") from None
            data = data[end + 2 :]
            if size == 0:
                while not data.startswith(b"\r\n"):  # trailers, then the empty line
                    while (end := data.find(b"\r\n")) < 0:
                        data += self._receive_in_body()
                    if end == 0:  # the empty line arrived in a later read
                        break
                    data = data[end + 2 :]
                return b"".join(chunks), data[2:]
            while len(data) < size + 2:
                data += self._receive_in_body()
            if data[size : size + 2] != b"\r\n":
                raise ProtocolError("a chunk of the answer is incomplete")
            chunks.append(data[:size])
            data = data[size + 2 :]

    def _receive_in_body(self) -> bytes:
        try:
            return self._receive()
        except ConnectionResetError:
            raise ProtocolError("a chunk of the answer is incomplete") from None


class LoopConnection(Connection):
    """A Connection used by the request greenlets of the app worker's loop (shared/cooperative.py): its socket is
    non-blocking and registered with the loop for good, so that waiting for the answer hands the thread to other
    requests, and a server closing it while it is idle is seen by the loop (no peek before each request)."""

    def __init__(self, port: int, hub: cooperative.Hub):
        super().__init__(port)
        self._hub = hub
        self._watch: cooperative.Watch | None = None
        self._sent = False  # a request was just sent

    def open(self, timeout: float) -> None:
        super().open(timeout)
        self.sock.setblocking(False)
        self._watch = self._hub.watch(self.sock, self.close)

    def _closed_by_server(self) -> bool:
        return bool(self._buffer)  # bytes nobody asked for; an end of stream closed it already (Watch.on_idle)

    def close(self) -> None:
        if self.sock is not None:
            self._hub.unregister(self.sock)
        super().close()

    def _set_timeout(self, timeout: float) -> None:
        self._timeout = timeout

    def _wait(self, events: int) -> None:
        if not self._hub.wait(self.sock, self._watch, events, self._timeout):
            raise TimeoutError("timed out")

    def _send(self, head: bytes, body: Any) -> None:
        if not self._hub.send_all(self.sock, self._watch, head, body, self._timeout):
            raise TimeoutError("timed out")
        self._sent = True

    def _recv(self) -> bytes:
        if self._sent:  # the answer cannot be there yet: wait for it rather than try a read that fails
            self._sent = False
            self._wait(cooperative.READ)
        while True:
            try:
                return self.sock.recv(65536)
            except BlockingIOError:
                self._wait(cooperative.READ)


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
        return ModelServerResponse.of(
            status, reason, head, content_type, content, connection.base_uri + path, time.perf_counter() - started
        )

    def close(self) -> None:
        """Close this thread's connections."""
        for connection in getattr(self._local, "connections", {}).values():
            connection.close()
        self._local.connections = {}


class ModelServerResponse(requests.Response):
    """A model server's answer as the requests.Response that handler scripts get, built without Response.__init__
    (its empty header dict and cookie jar would cost more than the rest of the call), and without what most handlers
    never read: its `headers`, `cookies`, `elapsed` and `encoding` are made when first read, as __init__ and
    requests' adapter would have made them (test/app/test_http_client_requests_internals.py guards the requests
    internals used here). Until then the header lines wait as received, in slots (not in vars(), which then holds
    what Response.__init__ sets)."""

    __slots__ = ("_head", "_type", "_seconds")

    @classmethod
    def of(
        cls,
        status: int,
        reason: str,
        head: bytes,
        content_type: str | None,
        content: bytes | bool,
        url: str,
        seconds: float,
    ) -> ModelServerResponse:
        """`head`: the header lines, each after its CRLF; `content_type`: the Content-Type's value, None without
        one; `content` False: not read yet (requests' own marker)."""
        response = requests.Response.__new__(cls)
        response._head, response._type, response._seconds = head, content_type, seconds
        response.__dict__.update(
            _content=content,
            _content_consumed=True,
            _next=None,
            status_code=status,
            raw=None,
            url=url,
            history=[],
            reason=reason,
            request=None,
        )
        return response

    def __getattr__(self, name: str) -> Any:  # only for what is not set yet
        if name == "headers":
            # CaseInsensitiveDict made as its __init__ would (an empty OrderedDict), without its generic update();
            # a repeated header's values joined and its first spelling kept, as urllib3's headers are
            value = object.__new__(CaseInsensitiveDict)
            value._store = store = OrderedDict()
            for line in self._head.decode("latin-1").split("\r\n")[1:]:
                key, _, text = line.partition(":")
                key, text = key.strip(), text.strip()
                lowered = key.lower()
                store[lowered] = (
                    (store[lowered][0], store[lowered][1] + ", " + text) if lowered in store else (key, text)
                )
        elif name == "encoding":  # requests' rule, short-cut for the model server's own type
            value = "utf-8" if self._type == "application/json" else get_encoding_from_headers(self.headers)
        elif name == "cookies":
            # a jar with a new default policy, no cookies and its lock, as CookieJar.__init__ makes it
            value = object.__new__(RequestsCookieJar)
            value._policy, value._cookies, value._cookies_lock = DefaultCookiePolicy(), {}, threading.RLock()
        elif name == "elapsed":
            value = datetime.timedelta(seconds=self._seconds)
        else:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        self.__dict__[name] = value
        return value


# The header lines the client reads itself (each after its CRLF): the framing, and the type for the encoding.
_FRAMING = re.compile(
    rb"\r\n[ \t]*(content-length|transfer-encoding|connection|content-type)[ \t]*:([^\r\n]*)", re.IGNORECASE
)
