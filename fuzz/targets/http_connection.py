"""The app worker's HTTP/1.1 (wsgi_server/http_connection.py on httptools, driven by loop.py's LoopWorker): raw
client bytes, one or several pipelined requests, possibly truncated, read by one connection of the real worker class
as a socket would deliver them, to a small app that echoes what it saw.

The seam is LoopWorker.read: the worker reads a socket stand-in that hands out the input in reads (their sizes
drawn from the input), and its hub runs each request greenlet at once and collects what is written. So the
worker's own reading, answering, refusing and closing run, without a socket or an event loop.

The oracle:
- what is written parses as HTTP/1.1 responses under h11 (an independent, strict parser): interim 100 Continue
  only for requests that asked for it, then one answer per request the app saw, each with a Content-Length that
  frames its body, then at most one refusal (only refusals.py's, with their statuses: a JSON {"error": ...} and
  Connection: close), then nothing;
- differential: each request the app saw is one gunicorn's own parser (its pure-Python RequestParser and WSGI
  environ, what the `sync` and `gthread` classes give the app; the module says it refuses what gunicorn refuses)
  reads from the same bytes, with the same method, path, query, version, headers, body and keep-alive; a request
  after one that closes the connection is not answered;
- nothing logged as an error by the worker, no other exception.
"""

from __future__ import annotations

import hashlib
import json
import re
import zlib
from typing import Any

import h11
from gunicorn.config import Config
from gunicorn.http import errors as gunicorn_errors
from gunicorn.http import wsgi as gunicorn_wsgi
from gunicorn.http.body import LengthReader
from gunicorn.http.message import Request
from gunicorn.http.parser import RequestParser
from sagemaker_tfs.wsgi_server.http_connection import Connection, base_environ
from sagemaker_tfs.wsgi_server.loop import Client, LoopWorker

MODULES = (
    "sagemaker_tfs.wsgi_server.http_connection",
    "sagemaker_tfs.wsgi_server.loop",
    "sagemaker_tfs.wsgi_server.refusals",
)
MAX_LEN = 4096
TIMEOUT_S = 5

_PEER = ("192.0.2.1", 40000)  # not in forwarded_allow_ips: gunicorn then ignores X-Forwarded-* as our worker does
_SERVER = ("127.0.0.1", 8080)


# gunicorn's settings for both parsers: its pure-Python parser (no C parser: independent of llhttp), and limits
# small enough that inputs of MAX_LEN reach them
class _Settings(Config):
    """gunicorn's settings, each read once: Config looks every read up in its table (most of the reference's time
    otherwise)."""

    def __getattr__(self, name: str) -> Any:
        value = super().__getattr__(name)
        object.__setattr__(self, name, value)  # (Config's own __setattr__ refuses setting names)
        return value


_CFG = _Settings()
for _name, _value in (
    ("http_parser", "python"),
    ("limit_request_line", 256),
    ("limit_request_fields", 12),
    ("limit_request_field_size", 200),
):
    if _name in _CFG.settings:
        _CFG.set(_name, _value)

# What the worker may refuse with (http_connection.py's BadRequest and Connection.feed; loop.py's 500 for an app
# that failed, which this app never does)
REFUSALS = {
    400: "Bad Request",
    414: "URI Too Long",
    417: "Expectation Failed",
    431: "Request Header Fields Too Large",
    501: "Not Implemented",
}
_SEEN_KEYS = ("REQUEST_METHOD", "PATH_INFO", "QUERY_STRING", "SERVER_PROTOCOL", "CONTENT_TYPE", "CONTENT_LENGTH")
_CONTINUE = "100-continue"
# the requests the client side of h11 sends, one before each answer it reads (it reads a HEAD's answer without body)
_GET = h11.Request(method="GET", target="/", headers=[("Host", "x")])
_HEAD = h11.Request(method="HEAD", target="/", headers=[("Host", "x")])


def seeds() -> list[bytes]:
    """The raw requests of test/gunicorn_app (test_gunicorn_worker.py, test_gunicorn_own_workers.py) and
    test/stack/test_stack_error_bodies.py, at this harness's limits."""
    body = b'{"instances": [1.0, 2.0, 5.0]}'

    def post(data: bytes, extra: bytes = b"", path: bytes = b"/invocations") -> bytes:
        return (
            b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + extra
            + b"Content-Length: %d\r\n\r\n" % len(data) + data
        )  # fmt: skip

    def get(extra: bytes = b"", path: bytes = b"/ping", version: bytes = b"HTTP/1.1", method: bytes = b"GET") -> bytes:
        return method + b" " + path + b" " + version + b"\r\n" + extra + b"Connection: close\r\n\r\n"

    return [
        post(body),
        post(b'{"instances": [1.0]}') + post(b'{"instances": [2.0]}') + post(b'{"instances": [3.0]}'),
        b"POST /invocations HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        b'5\r\n{"ins\r\n' + b"%x\r\n%s\r\n" % (len(body) - 5, body[5:]) + b"0\r\n\r\n",
        post(body, b"Expect: 100-continue\r\n"),
        post(body).replace(b"HTTP/1.1", b"HTTP/1.0", 1),
        b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
        post(b"request-id", b"X-Amzn_SageMaker_Custom_Attributes: tfs-model-name=other\r\n")
        + post(b"request-id", b"X-Amzn-SageMaker-Custom-Attributes: a=b\r\n"),
        b"GET /ping?" + b"q" * 300 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /ping HTTP/1.1\r\nHost: x\r\nX-Big: " + b"v" * 200 + b"\r\n\r\n",
        b"GET /ping HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(15)) + b"\r\n",
        b"GET /ping HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
        b"GET /ping HTTP/2.0\r\nHost: x\r\n\r\n",
        post(body, b"Expect: 200-ok\r\n"),
        post(b'{"instances": [1.0]}') + post(b'{"instances": [2.0]}') + b"BAD\r\n\r\n",
        b"POST /ping HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Type: text/csv\r\n"
        b"Content-Length: 3\r\n\r\n[1]",
        b"POST /invocations HTTP/1.1\r\n",
        b"GARBAGE\r\n\r\n",
        get(b"Host: x\r\n", method=b"get"),
        get(b"Host: x\r\nBad Header: 1\r\n"),
        get(b"Host: x\r\nX-A: a\x00b\r\n"),
        get(b"Host: a/b\r\n"),
        post(b"1", b"Content-Length: 1\r\n"),
        post(b"0\r\n\r\n", b"Transfer-Encoding: chunked\r\n"),
        b"POST /invocations HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"POST /invocations HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
        get(b"Host: x\r\n", method=b"TRACE"),
        get(b"Host: x\r\n", path=b"/__errors/400"),
        b"HEAD /ping HTTP/1.1\r\nHost: x\r\n\r\nGET /204 HTTP/1.1\r\nHost: x\r\n\r\nGET /p%41th?a=%42 HTTP/1.1\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n",
    ]


def one_input(data: bytes) -> None:
    written, seen, errors, refused_early = _serve(data)
    assert not errors, f"the worker logged {errors}"
    answers, continues, refusal = _responses(written, [request["REQUEST_METHOD"] for request in seen])
    reference = _reference(data, len(seen) + 1)
    for index, request in enumerate(seen):
        assert index < len(reference), f"request {index} answered, which gunicorn does not read: {request}"
        expected, closes, trailer = reference[index]
        assert request == expected, f"request {index}: the app saw {request}, gunicorn reads {expected}"
        # closing is always the server's to do: httptools also heeds a Connection field of a chunked trailer
        assert answers[index]["close"] in (closes, closes or "close" in _options(trailer)), (
            f"request {index}: Connection: close is {not closes}"
        )
        assert not closes or index == len(seen) - 1, f"request {index} closes the connection, yet more were answered"
    waiting = [index for index, request in enumerate(seen) if _expects(request)]
    # a 100 Continue comes before its request's answer (maybe before earlier ones: written as its head is read); one
    # more for a request whose head was read but not the rest
    assert len(continues) - len(waiting) in (0, 1), (continues, waiting)
    assert all(sent <= wanted for sent, wanted in zip(continues, waiting, strict=False)), (continues, waiting)
    if refusal is None and not refused_early and not (seen and answers[-1]["close"]):
        # the connection ran to the end of the input: every request gunicorn reads whole was answered
        assert len(seen) >= len(reference), f"gunicorn reads {len(reference)} requests, {len(seen)} were answered"


class _Socket:
    """The client's end as the worker sees it: the input in reads, what is written collected."""

    def __init__(self, reads: list[bytes]):
        self.reads, self.written = reads, bytearray()

    def recv(self, size: int) -> bytes:
        return self.reads.pop(0) if self.reads else b""

    def send(self, data: bytes) -> int:
        self.written += data
        return len(data)

    def sendall(self, data: bytes) -> None:
        self.written += data

    def shutdown(self, how: int) -> None:  # a refusal's lingering close: the worker goes on reading
        pass

    def fileno(self) -> int:
        return 3

    def close(self) -> None:
        pass


class _Hub:
    """cooperative.Hub as LoopWorker uses it, synchronous: a request greenlet runs to its end when spawned (the
    loop runs it before reading again, as here), and writes never wait."""

    def __init__(self) -> None:
        self.reading = True

    def spawn(self, task: Any) -> None:
        task()

    def register(self, file: Any, handler: Any) -> None:
        self.reading = True

    def unregister(self, file: Any) -> None:
        self.reading = False

    def send_all(self, sock: _Socket, watch: Any, head: bytes, body: bytes, timeout: float) -> bool:
        sock.sendall(head + body)
        return True


class _Log:
    def __init__(self) -> None:
        self.errors: list[str] = []

    def error(self, message: str, *args: Any) -> None:
        self.errors.append(message % args)

    def exception(self, message: str, *args: Any) -> None:
        self.errors.append(message % args)


def _reads(data: bytes) -> list[bytes]:
    """The input as the socket delivers it: whole, in small reads, or in two; which, drawn from the input."""
    mode = zlib.crc32(data) & 3
    if mode == 0 or len(data) < 2:
        return [data]
    if mode == 3:
        half = len(data) // 2
        return [data[:half], data[half:]]
    step = 1 if mode == 1 else 13
    head = min(len(data), 200)  # byte by byte only through the start: the rest at once (speed)
    cuts = [*range(0, head, step), len(data)]
    return [data[start:end] for start, end in zip(cuts, cuts[1:], strict=False)]


class _Worker(LoopWorker):
    def __init__(self, app: Any) -> None:  # none of gunicorn's Worker set-up: the attributes LoopWorker reads
        self.log, self.cfg, self.wsgi, self.alive = _Log(), _CFG, app, True
        self.clients = {}
        self.limit, self.accepting, self.listeners, self.idle_time, self.keepalive = 1000, True, [], 1.0, 2


def _serve(data: bytes) -> tuple[bytes, list[dict[str, Any]], list[str], bool]:
    """What the worker wrote for `data`, what the app saw of each request, what it logged as errors, and whether
    it stopped reading before the end of the input."""
    seen: list[dict[str, Any]] = []

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        request = {key: value for key, value in environ.items() if key in _SEEN_KEYS or key.startswith("HTTP_")}
        body = request["body"] = environ["wsgi.input"].read()
        seen.append(request)
        if environ["PATH_INFO"] == "/204":
            start_response("204 No Content", [])
            return []
        answer = {"index": len(seen) - 1, "length": len(body), "sha1": hashlib.sha1(body).hexdigest()}
        start_response("200 OK", [("Content-Type", "application/json")])
        return [json.dumps(answer).encode()]

    sock = _Socket(_reads(data))
    worker, hub = _Worker(app), _Hub()
    worker.hub = hub  # type: ignore[assignment]
    client = Client(worker, sock, Connection(sock, base_environ(_PEER, _SERVER), _CFG))  # type: ignore[arg-type]
    worker.clients[client.fd] = client
    for _ in range(len(sock.reads) + 1):  # each read takes one; then the end of the stream
        if client.worker is None or not hub.reading:
            break
        worker.read(client)
    assert client.worker is None, "the connection is open after the end of its input, or no longer read"
    return bytes(sock.written), seen, worker.log.errors, bool(sock.reads)


def _responses(written: bytes, methods: list[str]) -> tuple[list[dict[str, Any]], list[int], int | None]:
    """The answers (one per method, in order), the indexes of the requests each interim 100 Continue came before,
    and the refusal's status if one follows; h11 reads them, as the client would."""
    client = h11.Connection(h11.CLIENT)
    client.receive_data(written)
    client.receive_data(b"")
    answers: list[dict[str, Any]] = []
    continues: list[int] = []
    refusal = None
    index = 0
    while client.trailing_data[0]:  # (what is left unread; the worker has closed its end)
        method = methods[index] if index < len(methods) else "GET"
        client.send(_HEAD if method == "HEAD" else _GET)
        client.send(h11.EndOfMessage())
        event = client.next_event()
        while isinstance(event, h11.InformationalResponse):
            assert event.status_code == 100, f"interim answer {event}"
            continues.append(index)
            if not client.trailing_data[0]:  # a request that expected it, and then ended the connection
                assert index == len(methods), f"request {index} is not answered"
                return answers, continues, None
            event = client.next_event()
        assert isinstance(event, h11.Response), event
        headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in event.headers}
        body = b""
        while isinstance(part := client.next_event(), h11.Data):
            body += part.data
        assert isinstance(part, h11.EndOfMessage), part
        close = headers.get("connection") == "close"
        if index < len(methods):
            if event.status_code == 204:
                assert "content-length" not in headers and not body
            else:
                assert event.status_code == 200, event
                assert int(headers["content-length"]) == len(body) or method == "HEAD", headers
                if method != "HEAD":
                    assert json.loads(body)["index"] == index, body
            answers.append({"close": close})
        else:
            refusal = event.status_code
            reason = REFUSALS.get(refusal)
            assert reason is not None and event.reason.decode() == reason, f"refusal {refusal} {event.reason!r}"
            assert close and headers["content-type"] == "application/json", headers
            assert int(headers["content-length"]) == len(body), headers
            error = json.loads(body)
            assert list(error) == ["error"] and (error["error"] + ":").startswith(reason + ":"), error
        if client.our_state is h11.MUST_CLOSE or client.their_state is h11.MUST_CLOSE:
            assert not client.trailing_data[0], f"written after a closing answer: {client.trailing_data[0]!r}"
            break
        client.start_next_cycle()
        index += 1
    assert len(answers) == len(methods), f"{len(methods)} requests answered, {len(answers)} answers read"
    return answers, continues, refusal


def _reference(data: bytes, most: int) -> list[tuple[dict[str, Any], bool, list[tuple[str, str]]]]:
    """The requests gunicorn reads whole from `data`, in order, as the app would see them (its WSGI environ), each
    with whether it closes the connection; up to the first it refuses or that is cut short, `most` at most."""
    requests: list[tuple[dict[str, Any], bool, list[tuple[str, str]]]] = []
    try:
        for request in _Parser(_CFG, iter([data]), _PEER):
            request.trailers = []  # (set by its chunked body's reader, when it has a trailer)
            if len(requests) == most:
                break
            _, environ = gunicorn_wsgi.create(request, _NoSocket(), _PEER, _SERVER, _CFG)
            seen = {key: value for key, value in environ.items() if key in _SEEN_KEYS or key.startswith("HTTP_")}
            body = seen["body"] = environ["wsgi.input"].read()
            if isinstance(request.body.reader, LengthReader) and len(body) != int(environ.get("CONTENT_LENGTH") or 0):
                break  # cut short (a chunked body cut short raises)
            requests.append((seen, _closes(request), request.trailers))
    except (gunicorn_errors.ParseException, gunicorn_errors.NoMoreData, StopIteration):
        pass
    return requests


class _Request(Request):
    """gunicorn's request, its request line read on words apart from single spaces: RFC 9112 section 3 lets a
    server take any run of spaces as the separator (httptools does; gunicorn wants one)."""

    def parse_request_line(self, line_bytes: bytes) -> None:
        super().parse_request_line(re.sub(rb"  +", b" ", line_bytes))

    def parse(self, unreader: Any) -> Any:
        """Empty lines before a request line are skipped, as RFC 9112 section 2.2 asks of a server (llhttp skips
        any CR and LF there; gunicorn refuses them)."""
        while chunk := unreader.read():
            if chunk := chunk.lstrip(b"\r\n"):
                unreader.unread(chunk)
                break
        return super().parse(unreader)


class _Parser(RequestParser):
    mesg_class = _Request


def _closes(request: Request) -> bool:
    """Whether the connection ends after the request: RFC 9112 section 9.3 (a `close` option in any Connection
    field; HTTP/1.0 without `keep-alive`), or gunicorn ends it (after a compressed body). Not gunicorn's
    should_close, which reads the first Connection field only, and only when it is `close` alone."""
    options = _options(request.headers)
    if request.must_close or "close" in options:
        return True
    return request.version < (1, 1) and "keep-alive" not in options


def _options(fields: list[tuple[str, str]]) -> set[str]:
    """The connection options of (gunicorn's upper-case) fields."""
    values = [value for name, value in fields if name == "CONNECTION"]
    return {option.strip(" \t").lower() for value in values for option in value.split(",")}


class _NoSocket:
    def send(self, data: bytes) -> int:
        return len(data)


def _expects(request: dict[str, Any]) -> bool:
    """Whether the client waits for a 100 Continue (one or more Expect fields, joined: each 100-continue)."""
    expect = request.get("HTTP_EXPECT")
    return (
        expect is not None
        and request["SERVER_PROTOCOL"] == "HTTP/1.1"
        and all(value.strip(" \t").lower() == _CONTINUE for value in expect.split(","))
    )
