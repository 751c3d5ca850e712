"""A gunicorn worker class of the app (`SAGEMAKER_GUNICORN_WORKER_CLASS=connections`; the default is `loop`,
loop.py, which shares this module's parser, app call and malloc settings): one thread per connection, each reading
its requests with httptools (C) and calling the WSGI app itself.

nginx keeps its connections to gunicorn open and sends one request at a time on each, so a thread per connection
serves every request start to end without a hand-over: no poller thread passing sockets to a pool (gthread), no
event loop handing blocking handler code to threads. A handler that blocks (requests.post, TensorFlow, time.sleep)
holds its own connection only; nginx opens another for the next request. The measurements behind the choice are in
docs/BENCHMARKS.md.

The main thread accepts connections and keeps gunicorn's heartbeat. A connection silent for --keep-alive seconds
(`serve` gives 75, above nginx's 60 for its idle upstream connections) is closed. On SIGTERM the worker stops
accepting and ends every connection after its current request (`serve` stops nginx first, so no new request
arrives); the arbiter's graceful timeout bounds the wait. Requests gunicorn's own parser would refuse are refused
here with its statuses and messages, as JSON (refusals.py, gunicorn_settings' writer too).
"""

from __future__ import annotations

import ctypes
import io
import os
import select
import selectors
import socket
import sys
import threading
import time
from typing import Any
from urllib.parse import unquote_to_bytes

import httptools
from gunicorn.workers import base

from ..shared.headers import environ_key
from ..shared.sockets import send, timeval
from ..shared.wsgi_call import whole_answer
from .refusals import closing_error

_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_READ_SIZE = 65536  # larger reads allocate (and fault in) a large buffer per call
_LARGE_BODY = 1 << 20  # after a body this large, the connection's thread gives free memory back (_Malloc.trim)


class _Malloc:
    """glibc's malloc, told to give back the memory of large bodies. Two causes keep it resident otherwise: glibc
    raises its mmap threshold to the size of each mapped block freed (up to 32 MB), so after one 10 MB body every
    later buffer below that is carved from the threads' malloc arenas; and the arenas keep what is freed. Fixing the
    threshold and trimming after a large body (malloc_trim also releases free pages inside each arena) took a worker
    from 3 to 10 times its size after 40 concurrent 10 MB requests back to within 10%; either alone did not.
    The threshold is fixed at 1 MB, not glibc's initial 128 kB: numpy's temporaries of a few hundred kB (the binary
    path's arrays, JSON written from them) are then reused from the arena instead of being mapped and faulted in
    afresh each time, which made such work 3 to 6 times slower in a worker thread (docs/BENCHMARKS.md). The heap's
    trim threshold is set to glibc's initial 128 kB (the master's frees may have raised it before the fork): raised
    (to 4 or 32 MB), a worker kept up to 1.23x its memory after the burst. Elsewhere (musl, macOS) nothing to do."""

    MMAP_THRESHOLD = 1 << 20
    TRIM_THRESHOLD = 128 << 10

    def __init__(self) -> None:
        try:
            libc = ctypes.CDLL(None)
            self._mallopt, self._trim = libc.mallopt, libc.malloc_trim
        except (AttributeError, OSError):
            self._mallopt = self._trim = None
            return
        self._mallopt.argtypes, self._mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        self._trim.argtypes, self._trim.restype = [ctypes.c_size_t], ctypes.c_int

    def fix_thresholds(self) -> None:
        if self._mallopt is not None:
            self._mallopt(-3, self.MMAP_THRESHOLD)  # M_MMAP_THRESHOLD
            self._mallopt(-1, self.TRIM_THRESHOLD)  # M_TRIM_THRESHOLD

    def trim(self) -> None:
        if self._trim is not None:
            self._trim(0)


_malloc = _Malloc()


class BadRequest(Exception):
    """A request the worker refuses before the app: (status, reason, message) as gunicorn would answer."""

    def __init__(self, status: int, reason: str, message: str):
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message


class Connection:
    """One client connection: httptools calls back as bytes arrive, and each request's WSGI environ is built as
    its headers are read; complete requests queue in `ready` as (environ, keep-alive)."""

    def __init__(self, sock: socket.socket, base_environ: dict[str, Any], cfg: Any):
        self.sock = sock
        self.parser = httptools.HttpRequestParser(self)
        self.ready: list[tuple[dict[str, Any], bool]] = []
        self._base = base_environ
        # gunicorn's limits (0 means its defaults, as in gunicorn)
        self._max_fields = cfg.limit_request_fields or 32768
        self._max_line = cfg.limit_request_line or 8190
        self._max_field = cfg.limit_request_field_size or 8190
        # what the head of a request may buffer (httptools gathers a header whole before on_header), as gunicorn
        self.max_head = self._max_fields * (self._max_field + 2) + self._max_line
        self.head_started: float | None = None  # when the head of the request being read began (None: not in one)
        self._environ: dict[str, Any] = {}
        self._url: list[bytes] = []
        self._url_size = 0
        self._body: list[bytes] = []
        self._fields = 0
        self._expect = False
        self._version = "1.1"  # of the request being read, once its head is

    # httptools callbacks
    def on_message_begin(self) -> None:
        self._environ = self._base.copy()
        self._url, self._url_size, self._body, self._fields, self._expect = [], 0, [], 0, False
        self.head_started = time.monotonic()

    def on_url(self, url: bytes) -> None:
        self._url.append(url)  # pieces joined once (a long URL in many reads is not copied again at each)
        self._url_size += len(url)
        line = len(self.parser.get_method()) + self._url_size + 10  # "<method> <url> HTTP/1.1"
        if line > self._max_line:
            raise BadRequest(414, "URI Too Long", f"Request Line is too large ({line} > {self._max_line})")

    def on_header(self, name: bytes, value: bytes) -> None:
        self._fields += 1
        if self._fields > self._max_fields:
            raise BadRequest(
                431, "Request Header Fields Too Large", "Error parsing headers: 'limit request headers fields'"
            )
        if len(name) + len(value) + 4 > self._max_field:  # "<name>: <value>\r\n"
            raise BadRequest(
                431, "Request Header Fields Too Large", "Error parsing headers: 'limit request headers fields size'"
            )
        key = _KEYS.get(name)
        if key is None:
            key = _key(name)
        if not key:
            return
        environ = self._environ
        text = value.decode("latin-1")
        if key not in environ:
            environ[key] = text
        elif key in _SINGLE:
            raise BadRequest(
                400, "Bad Request", f"Invalid HTTP Header: '{key.removeprefix('HTTP_')}'".replace("_", "-")
            )
        else:
            environ[key] += "," + text
        if key == "HTTP_EXPECT":
            if text.lower() != "100-continue":
                raise BadRequest(417, "Expectation Failed", f"Unable to comply with expectation: {text!r}")
            self._expect = self.parser.get_http_version() != "1.0"  # HTTP/1.0 clients do not wait for it

    def on_headers_complete(self) -> None:
        self.head_started = None
        version = self._version = self.parser.get_http_version()  # (made by formatting: read once)
        if version not in ("1.1", "1.0"):
            major, _, minor = version.partition(".")
            raise BadRequest(400, "Bad Request", f"Invalid HTTP Version 'Invalid HTTP Version: ({major}, {minor})'")
        if self._expect:
            self.sock.sendall(_CONTINUE)  # curl waits for it before sending a large body

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def feed(self, data: bytes, log: Any) -> tuple[int, str, str] | None:
        """Parse received bytes (complete requests go to `ready`); a refusal (status, reason, message) when the
        connection must end once they are answered: status 0 to end it without a word (the client went away)."""
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            cause = exc.__context__  # what a callback raised
            if isinstance(cause, BadRequest):
                return cause.status, cause.reason, cause.message
            if not isinstance(cause, OSError):  # an OSError: the client went away
                log.error("Error reading a request: %r", cause)
            return 0, "", ""
        except httptools.HttpParserUpgrade:
            return 501, "Not Implemented", "protocol upgrades are not supported"
        except httptools.HttpParserError as exc:
            return 400, "Bad Request", f"Malformed HTTP request: {exc}"
        return None

    def on_message_complete(self) -> None:
        parser = self.parser
        environ = self._environ
        path, _, query = b"".join(self._url).partition(b"?")
        path = path.partition(b"#")[0]
        environ["REQUEST_METHOD"] = parser.get_method().decode("latin-1")
        environ["PATH_INFO"] = (unquote_to_bytes(path) if b"%" in path else path).decode("latin-1")
        environ["QUERY_STRING"] = query.decode("latin-1")
        environ["SERVER_PROTOCOL"] = "HTTP/" + self._version
        body, self._body = self._body, []  # the pieces go once joined (a 100 MB body is not held twice for long)
        environ["wsgi.input"] = io.BytesIO(body[0] if len(body) == 1 else b"".join(body))
        self._environ = {}  # the request is `ready`'s alone: answered, it is freed (not kept until the next one)
        self.ready.append((environ, parser.should_keep_alive()))


class ConnectionsWorker(base.Worker):
    """A gunicorn worker: a thread per connection (up to --worker-connections), the app called in that thread."""

    def init_process(self) -> None:
        self.connections: dict[int, socket.socket] = {}  # fd -> socket, read by the main thread at stop
        _malloc.fix_thresholds()
        super().init_process()

    def run(self) -> None:
        selector = selectors.DefaultSelector()
        for listener in self.sockets:
            listener.setblocking(False)
            selector.register(listener, selectors.EVENT_READ)
        selector.register(self.PIPE[0], selectors.EVENT_READ)
        limit = self.cfg.worker_connections
        interval = max(0.1, min(1.0, self.timeout / 2))
        while self.alive:
            self.notify()
            if self.ppid != os.getppid():
                self.log.info("Parent changed, shutting down: %s", self)
                break
            if len(self.connections) >= limit:  # --worker-connections: accept again once one has ended
                select.select([self.PIPE[0]], [], [], 0.05)
                continue
            for key, _ in selector.select(interval):
                if key.fileobj == self.PIPE[0]:
                    try:
                        os.read(self.PIPE[0], 64)
                    except BlockingIOError:
                        pass
                else:
                    self._accept(key.fileobj)
        selector.close()
        self._drain()

    def _accept(self, listener: socket.socket) -> None:
        try:
            sock, address = listener.accept()
        except (BlockingIOError, InterruptedError, ConnectionAbortedError):
            return
        sock.setblocking(True)
        if sock.family != socket.AF_UNIX:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.cfg.keepalive > 0:  # --keep-alive: a connection silent that long ends (set in the kernel: no poll)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval(self.cfg.keepalive))
        self.connections[sock.fileno()] = sock
        threading.Thread(
            target=self._serve, args=(sock, address, listener.getsockname()), name="connection", daemon=True
        ).start()

    def _drain(self) -> None:
        """Stop accepting; every connection ends after its current request: idle ones at once (a shut read side
        reads as end of stream once what was received is read), busy ones once answered."""
        for listener in self.sockets:
            listener.close()
        for sock in list(self.connections.values()):
            try:
                sock.shutdown(socket.SHUT_RD)
            except OSError:
                pass
        deadline = time.monotonic() + self.cfg.graceful_timeout
        while self.connections and time.monotonic() < deadline:
            self.notify()
            time.sleep(0.05)  # only while stopping

    # one connection, in its own thread
    def _serve(self, sock: socket.socket, address: Any, server: Any) -> None:
        connection = Connection(sock, _base_environ(address, server), self.cfg)
        # The whole head of a request must arrive within this time, however slowly it trickles in (each read waits
        # at most what is left of it): a client sending a byte now and then cannot hold a thread for ever.
        head_time = float(self.cfg.keepalive if self.cfg.keepalive > 0 else self.cfg.timeout)
        head_bytes, shortened = 0, False
        try:
            while True:
                try:
                    data = sock.recv(_READ_SIZE)
                except OSError:
                    return
                if not data:
                    return
                refusal = connection.feed(data, self.log)
                ready = connection.ready
                while ready:  # complete requests before a refused one are answered first
                    environ, keep_alive = ready.pop(0)
                    large = environ["wsgi.input"].getbuffer().nbytes >= _LARGE_BODY
                    answered = self._respond(sock, environ, keep_alive)
                    del environ  # the request and its body go once answered, not when the next one arrives
                    if large:
                        _malloc.trim()
                    if not answered:
                        return
                if refusal is not None:
                    if refusal[0]:
                        _refuse(sock, *refusal)
                    return
                if connection.head_started is None:  # between requests, or reading a body
                    head_bytes = 0
                    if shortened:
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval(self.cfg.keepalive))
                        shortened = False
                    continue
                head_bytes += len(data)
                if head_bytes > connection.max_head:
                    _refuse(sock, 431, "Request Header Fields Too Large", "Error parsing headers: 'max buffer headers'")
                    return
                left = connection.head_started + head_time - time.monotonic()
                if left <= 0:
                    return
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval(left))  # only for a head in pieces
                shortened = True
        finally:
            # The parser and the Connection (its protocol) refer to each other: break the cycle so that reference
            # counting frees both, with any body they still hold, now rather than at the next cycle collection.
            connection.parser = None
            connection.ready.clear()
            self.connections.pop(sock.fileno(), None)
            try:
                sock.close()
            except OSError:
                pass

    def _respond(self, sock: socket.socket, environ: dict, keep_alive: bool) -> bool:
        """Call the app and write its answer; False when the connection ends there (the client's choice, the
        worker stopping, or an error)."""
        answer = call_app(self, environ, keep_alive)
        if answer is None:
            _refuse(sock, 500, "Internal Server Error", "")
            return False
        head, body, keep_alive = answer
        try:
            send(sock, head, body)
        except OSError:
            return False
        return keep_alive


def call_app(worker: base.Worker, environ: dict, keep_alive: bool) -> tuple[bytes, bytes, bool] | None:
    """The worker's app called for one request: the answer's head and body, and whether the connection stays open
    (the client's choice, unless the worker is stopping); None when the app failed (logged)."""
    try:
        status, headers, body = whole_answer(worker.wsgi, environ)
    except Exception:
        worker.log.exception("Error handling request %s", environ.get("PATH_INFO"))
        return None
    lines = [f"HTTP/1.1 {status}\r\n"]
    has_length = False
    for name, value in headers:
        if len(name) == 14 and name.lower() == "content-length":
            has_length = True
        lines.append(f"{name}: {value}\r\n")
    if not has_length and not status.startswith(("1", "204", "304")):
        lines.append(f"Content-Length: {len(body)}\r\n")
    keep_alive = keep_alive and worker.alive  # a stopping worker ends each connection after its request
    lines.append("\r\n" if keep_alive else "Connection: close\r\n\r\n")
    if environ["REQUEST_METHOD"] == "HEAD":
        body = b""
    return "".join(lines).encode("latin-1"), body, keep_alive


def _refuse(sock: socket.socket, status: int, reason: str, message: str) -> None:
    try:
        sock.sendall(closing_error(status, reason, message))
    except OSError:
        pass


def _base_environ(address: Any, server: Any) -> dict[str, Any]:
    """What every request of a connection shares."""
    if isinstance(server, tuple):
        server_name, server_port = str(server[0]), str(server[1])
    else:
        server_name, server_port = "localhost", "80"
    remote = address[0] if isinstance(address, tuple) and address else "127.0.0.1"
    return {
        "SCRIPT_NAME": "",
        "SERVER_NAME": server_name,
        "SERVER_PORT": server_port,
        "REMOTE_ADDR": remote,
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
        "wsgi.input_terminated": True,
    }


_SINGLE = ("CONTENT_TYPE", "CONTENT_LENGTH", "HTTP_HOST")  # a second one is refused, as gunicorn does
_KEYS: dict[bytes, str] = {}  # header name -> environ key ("" for a dropped name), filled as names are seen


def _key(name: bytes) -> str:
    # Names with an underscore are dropped, as gunicorn does: X-Amzn_RequestId would otherwise pass for
    # X-Amzn-RequestId once both become HTTP_X_AMZN_REQUESTID.
    key = "" if b"_" in name or not name else environ_key(name.decode("latin-1"))
    if len(_KEYS) < 1000:
        _KEYS[name] = key
    return key
