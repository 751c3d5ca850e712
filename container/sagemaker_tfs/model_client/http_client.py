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
    raise TypeError(f"cannot send {type(data).__name__} {_preview(data)} to the model server: give str, bytes, "
                    "a dict (form-encoded, like requests) or a file")


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

    def exchange(self, method: str, path: str, body: bytes, headers: dict[str, str],
                 timeout: float) -> tuple[int, str, list[tuple[str, str]], bytes]:
        """Send one request, read its answer: (status, reason, headers, content). A kept connection the server
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

    def _read_answer(self, method: str) -> tuple[int, str, list[tuple[str, str]], bytes]:
        data = self._buffer or self._receive()
        while True:  # interim answers (1xx, e.g. 100 Continue) are skipped: the final one follows
            while (end := data.find(b"\r\n\r\n")) < 0:
                if len(data) > 65536:
                    raise ProtocolError("the answer's headers are incomplete or too many")
                data += self._receive()
            status_line, *lines = data[:end].decode("latin-1").split("\r\n")
            data = data[end + 4:]
            version, _, rest = status_line.partition(" ")
            code, _, reason = rest.partition(" ")
            if not version.startswith("HTTP/1.") or not code.isdigit():
                raise ProtocolError(f"invalid status line {status_line[:100]!r}")
            if len(lines) > 200:
                raise ProtocolError("the answer's headers are incomplete or too many")
            status = int(code)
            if status == 101:
                raise ProtocolError("the server switched protocols (101), which was not asked for")
            if not 100 <= status < 200:
                break
            if not data:
                data = self._receive()
        headers = []
        length = None
        chunked = False
        keep_alive = version == "HTTP/1.1"
        for line in lines:
            name, _, value = line.partition(":")
            name, value = name.strip(), value.strip()
            headers.append((name, value))
            lowered = name.lower()
            if lowered == "content-length":
                if not value.isdigit():
                    raise ProtocolError(f"invalid Content-Length {value!r}")
                length = int(value)
            elif lowered == "transfer-encoding":
                chunked = value.lower().endswith("chunked")
            elif lowered == "connection":
                token = value.lower()
                keep_alive = False if token == "close" else True if token == "keep-alive" else keep_alive
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
        return status, reason, headers, content

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
                raise ProtocolError(f"invalid chunk size {data[:min(end, 100)]!r}") from None
            data = data[end + 2:]
            if size == 0:
                while not data.startswith(b"\r\n"):  # trailers, then the empty line
                    while (end := data.find(b"\r\n")) < 0:
                        data += self._receive_in_body()
                    if end == 0:  # the empty line arrived in a later read
                        break
                    data = data[end + 2:]
                return b"".join(chunks), data[2:]
            while len(data) < size + 2:
                data += self._receive_in_body()
            if data[size:size + 2] != b"\r\n":
                raise ProtocolError("a chunk of the answer is incomplete")
            chunks.append(data[:size])
            data = data[size + 2:]

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

    def request(self, port: int, method: str, path: str, data: Any, timeout: float,
                headers: dict[str, str] | None = None) -> requests.Response:
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
            status, reason, answer_headers, content = connection.exchange(method, path, body, headers, timeout)
        except Exception:
            connection.close()
            raise
        finally:
            if hub is not None:
                idle.append(connection)  # closed, it opens again when next used
        return _response(status, reason, answer_headers, content, connection.base_uri + path,
                         time.perf_counter() - started)

    def close(self) -> None:
        """Close this thread's connections."""
        for connection in getattr(self._local, "connections", {}).values():
            connection.close()
        self._local.connections = {}


def _response(status: int, reason: str, headers: list[tuple[str, str]], content: bytes | bool, url: str,
              seconds: float, kind: type[requests.Response] = requests.Response) -> requests.Response:
    """A requests.Response (or subclass `kind`), built without Response.__init__ (whose empty header dict and cookie
    jar would cost more than the rest of the call). `content` False: not read yet (requests' own marker)."""
    response = requests.Response.__new__(kind)
    # CaseInsensitiveDict and RequestsCookieJar made as their __init__ would (an empty OrderedDict; a jar with a new
    # default policy, no cookies and its lock), without going through their generic update() and set-up; the headers
    # stored as CaseInsensitiveDict.update would, a repeated header's values joined and its first spelling kept, as
    # urllib3's headers are (test/app/test_http_client_requests_internals.py guards the internals used here)
    table = object.__new__(CaseInsensitiveDict)
    table._store = store = OrderedDict()
    content_type = ""
    for name, value in headers:
        key = name.lower()
        store[key] = (store[key][0], store[key][1] + ", " + value) if key in store else (name, value)
        if key == "content-type":
            content_type = store[key][1]
    # requests' rule, short-cut for the model server's own type
    encoding = "utf-8" if content_type == "application/json" else get_encoding_from_headers(table)
    cookies = object.__new__(RequestsCookieJar)
    cookies._policy, cookies._cookies, cookies._cookies_lock = DefaultCookiePolicy(), {}, threading.RLock()
    response.__dict__.update(_content=content, _content_consumed=True, _next=None, status_code=status, headers=table,
                             raw=None, url=url, encoding=encoding, history=[], reason=reason,
                             cookies=cookies, elapsed=datetime.timedelta(seconds=seconds), request=None)
    return response
