"""HTTP/1.1 on a client connection of the app's worker class (loop.py): requests parsed by httptools (C) as their
bytes arrive, each into the WSGI environ of PEP 3333, and the app's answer for one of them.

Requests gunicorn's own parser would refuse are refused with its statuses and messages (BadRequest: the worker
answers them as JSON, refusals.py), within gunicorn's limits (--limit-request-line, --limit-request-fields,
--limit-request-field_size). Header names with an underscore are dropped, as gunicorn drops them.
"""

from __future__ import annotations

import io
import socket
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote_to_bytes, urlsplit

import httptools
from gunicorn.workers import base

from ..shared.headers import environ_key
from ..shared.wsgi_call import CONSTANT_ENVIRON, answer, close
from ..web.request import request_id

_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
CHUNK_COPIED = 65536  # a streamed part up to this size is copied into its chunk's one write


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
        self._close = False  # the connection ends after the request whatever the client asks
        self._chunked = False  # a Transfer-Encoding field named chunked
        self._version = "1.1"  # of the request being read, once its head is

    # httptools callbacks
    def on_message_begin(self) -> None:
        self._environ = self._base.copy()
        self._url, self._url_size, self._body, self._fields, self._expect = [], 0, [], 0, False
        self._close = self._chunked = False
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
        if self.head_started is None:  # a field of a chunked body's trailer: not a header (nor in gunicorn's environ)
            if name.upper() in _FORBIDDEN_TRAILER:
                raise BadRequest(400, "Bad Request", f"Invalid HTTP header name: {name.decode('latin-1').upper()!r}")
            return
        key = _KEYS.get(name)
        if key is None:
            key = _key(name)
        if not key:
            return
        environ = self._environ
        text = value.rstrip(b" \t").decode("latin-1")  # httptools keeps the blanks after a value (not its: RFC 9112)
        if key not in environ:
            environ[key] = text
        elif key in _SINGLE:
            raise BadRequest(
                400, "Bad Request", f"Invalid HTTP Header: '{key.removeprefix('HTTP_')}'".replace("_", "-")
            )
        else:
            environ[key] += "," + text
        if key == "HTTP_TRANSFER_ENCODING":
            self._transfer_codings(text)
        if key == "HTTP_EXPECT":
            if text.lower() != "100-continue":
                raise BadRequest(417, "Expectation Failed", f"Unable to comply with expectation: {text!r}")
            self._expect = self.parser.get_http_version() != "1.0"  # HTTP/1.0 clients do not wait for it

    def _transfer_codings(self, text: str) -> None:
        """A Transfer-Encoding field as gunicorn takes it (httptools looks at its last coding only): codings it
        knows, chunked once and last; a compressed body goes to the app as it is, and the connection ends after."""
        for coding in (coding.strip(" \t").lower() for coding in text.split(",")):
            if coding not in _CODINGS:
                raise BadRequest(501, "Not Implemented", f"Unsupported transfer coding: {text!r}")
            if self._chunked:
                raise BadRequest(400, "Bad Request", "Invalid HTTP Header: 'TRANSFER-ENCODING'")
            self._chunked = coding == "chunked"
            self._close = self._close or coding in _COMPRESSED

    def on_headers_complete(self) -> None:
        self.head_started = None
        self._fields = 0  # a trailer's fields are counted apart, as gunicorn counts them
        version = self._version = self.parser.get_http_version()  # (made by formatting: read once)
        self._request_target(version)
        if version not in ("1.1", "1.0"):
            major, _, minor = version.partition(".")
            raise BadRequest(400, "Bad Request", f"Invalid HTTP Version 'Invalid HTTP Version: ({major}, {minor})'")
        if version == "1.0" and "HTTP_TRANSFER_ENCODING" in self._environ:
            # chunked in HTTP/1.0 (any other coding httptools refuses): framing a 1.0 proxy would not share
            raise BadRequest(400, "Bad Request", "Invalid HTTP Header: 'TRANSFER-ENCODING'")
        if self._expect:
            self.sock.sendall(_CONTINUE)  # curl waits for it before sending a large body

    def _request_target(self, version: str) -> None:
        """The target as gunicorn reads it: a path (origin-form), `*` for OPTIONS, or a URL (absolute-form, whose
        path and query are the request's); another one is refused (httptools takes any)."""
        target = b"".join(self._url)
        if target.startswith(b"/"):
            return
        method = self.parser.get_method()
        if target == b"*" and method == b"OPTIONS":
            return
        try:
            parts = urlsplit(target) if b"://" in target else None
        except ValueError:
            parts = None
        if parts is None:
            line = f"{method.decode('latin-1')} {target.decode('latin-1')} HTTP/{version}"
            raise BadRequest(400, "Bad Request", f"Invalid HTTP request line: {line!r}")
        self._url = [parts.path + b"?" + parts.query if parts.query else parts.path]

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def request_id(self) -> str:
        """The id of the request being read (a refused one: reading stops at it), as the app would answer it:
        the client's when sane and already read, else a new one."""
        return request_id(self._environ)

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
        # the fragment first: a "#" in the query ends it, a "?" after one is the fragment's
        path, _, query = b"".join(self._url).partition(b"#")[0].partition(b"?")
        environ["REQUEST_METHOD"] = parser.get_method().decode("latin-1")
        environ["PATH_INFO"] = (unquote_to_bytes(path) if b"%" in path else path).decode("latin-1")
        environ["QUERY_STRING"] = query.decode("latin-1")
        environ["SERVER_PROTOCOL"] = "HTTP/" + self._version
        body, self._body = self._body, []  # the pieces go once joined (a 100 MB body is not held twice for long)
        environ["wsgi.input"] = io.BytesIO(body[0] if len(body) == 1 else b"".join(body))
        self._environ = {}  # the request is `ready`'s alone: answered, it is freed (not kept until the next one)
        self.ready.append((environ, parser.should_keep_alive() and not self._close))


def call_app(worker: base.Worker, environ: dict, keep_alive: bool) -> tuple[bytes, Any, bool] | None:
    """The worker's app called for one request: the answer's head, its body (bytes, or for a streamed answer an
    iterator of the bytes to write, in order, as the app makes them: the caller iterates and closes it), and whether
    the connection stays open (the client's choice, unless the worker is stopping); None when the app failed
    (logged)."""
    try:
        status, headers, body = answer(worker.wsgi, environ)
    except Exception:
        worker.log.exception("Error handling request %s", environ.get("PATH_INFO"))
        return None
    lines = [f"HTTP/1.1 {status}\r\n"]
    has_length = False
    for name, value in headers:
        if len(name) == 14 and name.lower() == "content-length":
            has_length = True
        lines.append(f"{name}: {value}\r\n")
    keep_alive = keep_alive and worker.alive  # a stopping worker ends each connection after its current request
    if not isinstance(body, bytes):
        if environ["SERVER_PROTOCOL"] == "HTTP/1.0":  # no chunks in HTTP/1.0: the body ends with the connection
            keep_alive = False
        else:
            lines.append("Transfer-Encoding: chunked\r\n")
            body = _chunked(body)
    elif not has_length and not status.startswith(("1", "204", "304")):
        lines.append(f"Content-Length: {len(body)}\r\n")
    lines.append("\r\n" if keep_alive else "Connection: close\r\n\r\n")
    if environ["REQUEST_METHOD"] == "HEAD" and isinstance(body, bytes):
        body = b""
    return "".join(lines).encode("latin-1"), body, keep_alive


def _chunked(parts: Any) -> Iterator[bytes]:
    """A streamed answer's parts in HTTP/1.1's chunked coding: a chunk per part that has bytes, then the last chunk
    once the parts have ended (an answer the app breaks off lacks it, so the client can tell). A large part is not
    copied: its size line, the part and its end come one after another. Closed, it closes the parts."""
    try:
        for part in parts:
            if len(part) > CHUNK_COPIED:
                yield b"%x\r\n" % len(part)
                yield part
                yield b"\r\n"
            elif part:
                yield b"%x\r\n%b\r\n" % (len(part), part)
        yield b"0\r\n\r\n"
    finally:
        close(parts)


def base_environ(address: Any, server: Any) -> dict[str, Any]:
    """What every request of a connection shares."""
    if isinstance(server, tuple):
        server_name, server_port = str(server[0]), str(server[1])
    else:
        server_name, server_port = "localhost", "80"
    remote = address[0] if isinstance(address, tuple) and address else "127.0.0.1"
    return {**CONSTANT_ENVIRON, "SERVER_NAME": server_name, "SERVER_PORT": server_port, "REMOTE_ADDR": remote}


# RFC 9110 section 6.5.1: fields that would change routing, framing or authentication: refused in a trailer (gunicorn)
_FORBIDDEN_TRAILER = (b"HOST", b"CONTENT-LENGTH", b"TRANSFER-ENCODING", b"TRAILER", b"AUTHORIZATION", b"TE")
_COMPRESSED = ("compress", "deflate", "gzip")  # passed to the app as sent; the connection ends after it
_CODINGS = ("chunked", "identity", *_COMPRESSED)  # the transfer codings gunicorn takes
_SINGLE = ("CONTENT_TYPE", "CONTENT_LENGTH", "HTTP_HOST")  # a second one is refused, as gunicorn does
_KEYS: dict[bytes, str] = {}  # header name -> environ key ("" for a dropped name), filled as names are seen


def _key(name: bytes) -> str:
    # Names with an underscore are dropped, as gunicorn does: X-Amzn_RequestId would otherwise pass for
    # X-Amzn-RequestId once both become HTTP_X_AMZN_REQUESTID.
    key = "" if b"_" in name or not name else environ_key(name.decode("latin-1"))
    if len(_KEYS) < 1000:
        _KEYS[name] = key
    return key
