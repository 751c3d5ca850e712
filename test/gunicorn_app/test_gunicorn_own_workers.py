"""gunicorn's own worker classes chosen by name (`sync`, `gthread`, `gevent`: wsgi_server/gunicorn_workers.py)
answer the requests gunicorn refuses itself with the stack's JSON body, gunicorn's status and message, and close the
connection; the app's own answers are unchanged. On raw sockets, byte for byte."""

from __future__ import annotations

import importlib.util
import json
import re
import socket

import pytest
from app_support import write_model_dir
from gunicorn_harness import App
from sagemaker_tfs.wsgi_server.gunicorn_workers import gunicorn_refusal

REFUSALS = {
    "two Content-Types": (
        b"POST /ping HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Type: text/csv\r\n"
        b"Content-Length: 3\r\n\r\n[1]",
        400,
        "Bad Request: Invalid HTTP Header: 'CONTENT-TYPE'",  # gunicorn's page escapes the quotes (&#x27;)
    ),
    "more than 100 header fields": (
        b"GET /ping HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(150)) + b"\r\n",
        431,
        "Request Header Fields Too Large: Error parsing headers: 'limit request headers fields'",
    ),
    "a request line over the limit": (
        b"GET /ping?" + b"q" * 5000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
        414,
        "URI Too Long: Request Line is too large (5019 > 4094)",
    ),
}


@pytest.fixture(
    scope="module",
    params=[
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
def app(request, model_server, tmp_path_factory) -> App:
    with App(write_model_dir(tmp_path_factory.mktemp("own-workers")), model_server, worker_class=request.param) as app:
        yield app


def exchange(app: App, request: bytes) -> bytes:
    """Everything the worker sends back to `request` until it closes the connection."""
    with socket.create_connection(("127.0.0.1", app.port), timeout=30) as sock:
        sock.sendall(request)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


@pytest.mark.parametrize("request_bytes, status, error", REFUSALS.values(), ids=REFUSALS.keys())
def test_a_request_gunicorn_refuses_gets_its_status_and_message_as_json(app, request_bytes, status, error):
    head, _, body = exchange(app, request_bytes).partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    assert (status_line, headers["content-type"], headers["connection"]) == (
        f"HTTP/1.1 {status} {error.partition(':')[0]}",
        "application/json",
        "close",
    )
    assert (int(headers["content-length"]), json.loads(body)) == (len(body), {"error": error})


def test_a_request_gunicorn_refuses_gets_a_request_id(app):
    """As every answer of the app: gunicorn's parser gives no request for a head it refuses, so a new id."""
    head = exchange(app, REFUSALS["two Content-Types"][0]).partition(b"\r\n\r\n")[0].decode("latin-1")
    assert re.search(r"\r\nX-Amzn-RequestId: [0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\r\n", head)


def test_the_app_s_answers_are_its_own(app):
    answer = app.call("GET", "/ping")
    assert (answer.status, answer.body) == (200, b"")


def test_a_page_gunicorn_could_not_write_is_an_internal_server_error():
    """What gunicorn answers when the app fails, without its message: the socket held nothing readable."""
    assert gunicorn_refusal(b"") == (500, "Internal Server Error", "")
    assert gunicorn_refusal(b"HTTP/1.1 400 Bad Request\r\n\r\nno page") == (400, "Bad Request", "")
