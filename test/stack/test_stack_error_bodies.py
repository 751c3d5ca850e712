"""Every error the stack answers is `{"error": "..."}` with Content-Type application/json, whoever produced it:
nginx refusing a malformed request or a body over SAGEMAKER_NGINX_CLIENT_MAX_BODY_SIZE, or gunicorn refusing
headers before the app sees them (under each worker class: ours, wsgi_server/loop.py, answers as gunicorn's own
do, and gunicorn's own classes answer through wsgi_server/gunicorn_workers.py). The requests are sent on raw
sockets, byte for byte.
"""

from __future__ import annotations

import importlib.util
import json
import socket

import pytest
import serve_stack
from stack_support import model_dir

BAD_REQUEST = "Bad Request: malformed request line, header, Host, Content-Length, Transfer-Encoding or chunked body"
TOO_LARGE = "Bad Request: a request header line, or all the headers together, are too large"
NOT_IMPLEMENTED = "Not Implemented: the request uses a Transfer-Encoding or method that is not supported"
CLOSE = b"Connection: close\r\n"


@pytest.fixture(scope="module")
def stacks(tmp_path_factory):
    """A stack per gunicorn worker class, started on first use; the body limit is 1k."""
    root = model_dir(tmp_path_factory.mktemp("error-bodies"))
    started: dict[str, serve_stack.Stack] = {}

    def stack(worker_class: str = "loop") -> serve_stack.Stack:
        if worker_class not in started:
            env = {
                "SAGEMAKER_NGINX_CLIENT_MAX_BODY_SIZE": "1k",
                "SAGEMAKER_GUNICORN_WORKER_CLASS": worker_class,
                "SAGEMAKER_GUNICORN_WORKERS": "1",
            }
            if worker_class == "gthread":
                env["SAGEMAKER_GUNICORN_THREADS"] = "2"
            started[worker_class] = serve_stack.Stack(root, env=env).start()
        return started[worker_class]

    yield stack
    for running in started.values():
        running.stop()


def send(port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """(status, headers with lower-case names, body) of the answer to `request`, read until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    assert len(body) == int(headers["content-length"])
    return int(status_line.split()[1]), headers, body


def get(extra: bytes = b"", path: bytes = b"/ping", version: bytes = b"HTTP/1.1", method: bytes = b"GET") -> bytes:
    return method + b" " + path + b" " + version + b"\r\n" + extra + CLOSE + b"\r\n"


def post(headers: bytes, body: bytes = b"", path: bytes = b"/invocations") -> bytes:
    return b"POST " + path + b" HTTP/1.1\r\nHost: x\r\n" + headers + CLOSE + b"\r\n" + body


NGINX_ERRORS = {
    "body over the limit": (
        post(b"Content-Type: text/csv\r\nContent-Length: 2000\r\n", b"1\n" * 1000),
        413,
        "The request body is larger than 1k (SAGEMAKER_NGINX_CLIENT_MAX_BODY_SIZE)",
    ),
    "header line too large": (get(b"Host: x\r\nX-Big: " + b"a" * 20_000 + b"\r\n"), 400, TOO_LARGE),
    "headers too large": (
        get(b"Host: x\r\n" + b"".join(b"X-%d: %s\r\n" % (i, b"a" * 7000) for i in range(6))),
        400,
        TOO_LARGE,
    ),
    "malformed request line": (b"GARBAGE\r\n\r\n", 400, BAD_REQUEST),
    "lower-case method": (get(b"Host: x\r\n", method=b"get"), 400, BAD_REQUEST),
    "space in a header name": (get(b"Host: x\r\nBad Header: 1\r\n"), 400, BAD_REQUEST),
    "NUL in a header value": (get(b"Host: x\r\nX-A: a\x00b\r\n"), 400, BAD_REQUEST),
    "missing Host": (get(), 400, BAD_REQUEST),
    "two Hosts": (get(b"Host: a\r\nHost: b\r\n"), 400, BAD_REQUEST),
    "Host with a slash": (get(b"Host: a/b\r\n"), 400, BAD_REQUEST),
    "Content-Length not a number": (post(b"Content-Length: abc\r\n"), 400, BAD_REQUEST),
    "two Content-Lengths": (post(b"Content-Length: 1\r\nContent-Length: 2\r\n", b"1"), 400, BAD_REQUEST),
    "Content-Length and chunked": (
        post(b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n", b"0\r\n\r\n"),
        400,
        BAD_REQUEST,
    ),
    "malformed chunk": (post(b"Transfer-Encoding: chunked\r\n", b"zz\r\n"), 400, BAD_REQUEST),
    "unknown Transfer-Encoding": (post(b"Transfer-Encoding: gzip\r\n"), 501, NOT_IMPLEMENTED),
    # its error page, looked up as a location, once met the body limit: nginx's HTML 413 (issue 49's random traffic)
    "unknown Transfer-Encoding, Content-Length over the limit": (
        post(b"Content-Length: 2000\r\nTransfer-Encoding: gzip\r\n", b"1\n" * 1000),
        501,
        NOT_IMPLEMENTED,
    ),
    "URI too long": (get(b"Host: x\r\n", path=b"/" + b"a" * 20_000), 414, "URI Too Long"),
    "HTTP/2.0 request line": (
        get(b"Host: x\r\n", version=b"HTTP/2.0"),
        505,
        "HTTP Version Not Supported: send HTTP/1.0 or HTTP/1.1",
    ),
    "TRACE": (get(b"Host: x\r\n", method=b"TRACE"), 405, "Method Not Allowed: nginx refuses TRACE"),
    "an internal path": (get(b"Host: x\r\n", path=b"/__errors/400"), 404, "Not Found"),
}


@pytest.mark.parametrize("request_bytes, status, error", NGINX_ERRORS.values(), ids=NGINX_ERRORS.keys())
def test_errors_nginx_answers_are_json(stacks, request_bytes, status, error):
    answer_status, headers, body = send(stacks().port, request_bytes)
    assert (answer_status, headers["content-type"], json.loads(body)) == (status, "application/json", {"error": error})


GUNICORN_ERRORS = {
    # to /ping: nginx before 1.23 hands /invocations the first line only, as its direct route reads it (README)
    "two Content-Types": (
        post(b"Content-Type: application/json\r\nContent-Type: text/csv\r\nContent-Length: 3\r\n", b"[1]", b"/ping"),
        400,
        "Bad Request: Invalid HTTP Header: 'CONTENT-TYPE'",
    ),
    "more than 100 header fields": (
        get(b"Host: x\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(150))),
        431,
        "Request Header Fields Too Large: Error parsing headers: 'limit request headers fields'",
    ),
}


@pytest.mark.parametrize(
    "worker_class",
    [
        "loop",
        "sync",
        "gthread",
        pytest.param(
            "gevent",
            marks=pytest.mark.skipif(
                importlib.util.find_spec("gevent") is None, reason="the gevent package is not installed"
            ),
        ),
    ],
)
@pytest.mark.parametrize("request_bytes, status, error", GUNICORN_ERRORS.values(), ids=GUNICORN_ERRORS.keys())
def test_errors_gunicorn_answers_are_json_under_every_worker_class(stacks, worker_class, request_bytes, status, error):
    answer_status, headers, body = send(stacks(worker_class).port, request_bytes)
    assert (answer_status, headers["content-type"], json.loads(body)) == (status, "application/json", {"error": error})
