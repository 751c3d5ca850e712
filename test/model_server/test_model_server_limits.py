"""The model server's limits on what one REST connection may cost (this server's own flags; TFS has none): the
body size, what a gzip body may expand to, a deadline for a request to arrive, idle connections, and write
back-pressure. Against a real model server process."""

from __future__ import annotations

import gzip
import json
import select
import socket
from pathlib import Path

import paths
import pytest
import requests
from model_server_support import ModelServer, model_config

LIMIT = 1_000_000


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("limited")
    config = model_config({"half_plus_two": paths.HALF_PLUS_TWO})
    with ModelServer(
        config,
        workdir,
        f"--rest_api_max_body_bytes={LIMIT}",
        "--rest_api_request_timeout_seconds=2",
        "--rest_api_idle_timeout_seconds=2",
    ) as running:
        yield running


def connect(server: ModelServer) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.rest_port), timeout=30)


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (socket timeout: 30 s)."""
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def error_answer(raw: bytes) -> tuple[str, dict, dict]:
    head, _, body = raw.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines)
    return status, headers, json.loads(body)


def too_large(limit: int, decompressed: bool = False) -> dict:
    return {
        "error": f"Request body too large{' once decompressed' if decompressed else ''}: over {limit} bytes "
        f"(the limit is --rest_api_max_body_bytes)"
    }


def test_a_body_over_the_limit_is_refused_with_413(limited):
    response = requests.post(limited.url + "/v1/models/half_plus_two:predict", data=b" " * (LIMIT + 1), timeout=30)
    assert response.status_code == 413
    assert response.json() == too_large(LIMIT)
    assert response.headers["Content-Type"] == "application/json"
    assert response.headers["Connection"] == "close"


def test_a_chunked_body_over_the_limit_is_refused_with_413(limited):
    chunks = (b" " * 100_000 for _ in range(11))  # no length: requests sends it chunked
    response = requests.post(limited.url + "/v1/models/half_plus_two:predict", data=chunks, timeout=30)
    assert response.status_code == 413
    assert response.json() == too_large(LIMIT)


def test_a_refusal_comes_after_the_answers_to_the_requests_before_it(limited):
    body = b'{"instances": [1.0]}'
    good = b"POST /v1/models/half_plus_two:predict HTTP/1.1\r\nHost: test\r\nContent-Length: %d\r\n\r\n%s" % (
        len(body),
        body,
    )
    big = b"POST /v1/models/half_plus_two:predict HTTP/1.1\r\nHost: test\r\nContent-Length: %d\r\n\r\n" % (LIMIT + 1)
    with connect(limited) as sock:
        sock.sendall(good + big + b" " * 1000)  # pipelined
        raw = read_until_closed(sock)
    first, _, refusal = raw.partition(b"HTTP/1.1 413")
    assert first.startswith(b"HTTP/1.1 200 OK\r\n") and first.endswith(b'{\n    "predictions": [2.5\n    ]\n}')
    status, headers, answer = error_answer(b"HTTP/1.1 413" + refusal)
    assert status == "HTTP/1.1 413 Request Entity Too Large"
    assert (headers["Connection"], answer) == ("close", too_large(LIMIT))


def test_a_body_at_the_limit_is_served(limited):
    body = b'{"instances": [1.0]}'
    body += b" " * (LIMIT - len(body))
    response = requests.post(limited.url + "/v1/models/half_plus_two:predict", data=body, timeout=30)
    assert response.json() == {"predictions": [2.5]}


def test_a_gzip_body_expanding_past_the_limit_is_refused(limited):
    body = gzip.compress(b'{"instances": [1.0]}' + b" " * LIMIT)
    response = requests.post(
        limited.url + "/v1/models/half_plus_two:predict", data=body, headers={"Content-Encoding": "gzip"}, timeout=30
    )
    assert response.status_code == 413
    assert response.json() == too_large(LIMIT, decompressed=True)
    small = gzip.compress(b'{"instances": [1.0]}' + b" " * (LIMIT - 100))
    response = requests.post(
        limited.url + "/v1/models/half_plus_two:predict", data=small, headers={"Content-Encoding": "gzip"}, timeout=30
    )
    assert response.json() == {"predictions": [2.5]}


def resident_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_a_gzip_bomb_is_refused_by_default_without_the_memory_it_would_take(tmp_path):
    """300 kB expanding to 300 MB: refused at the default limit (256 MiB), decompressed a piece at a time."""
    bomb = gzip.compress(b"\0" * (300 * 1024 * 1024), compresslevel=9)
    assert len(bomb) < 400_000
    config = model_config({"half_plus_two": paths.HALF_PLUS_TWO})
    with ModelServer(config, tmp_path) as server:
        assert server.post("/v1/models/half_plus_two:predict", {"instances": [1.0]}).status_code == 200
        before = resident_bytes(server.proc.pid)
        for _ in range(3):
            response = requests.post(
                server.url + "/v1/models/half_plus_two:predict",
                data=bomb,
                headers={"Content-Encoding": "gzip"},
                timeout=60,
            )
            assert response.status_code == 413
            assert response.json() == too_large(256 * 1024 * 1024, decompressed=True)
        grown = resident_bytes(server.proc.pid) - before
        assert grown < 100 * 1024 * 1024, f"the model server's memory grew by {grown / 2**20:.0f} MiB"


def test_a_connection_with_no_request_in_progress_is_closed_when_idle(limited):
    with connect(limited) as sock:  # never sends anything
        assert read_until_closed(sock) == b""
    with connect(limited) as sock:  # after a complete request, kept alive, then idle
        sock.sendall(b"GET /v1/models/half_plus_two HTTP/1.1\r\nHost: test\r\n\r\n")
        assert read_until_closed(sock).startswith(b"HTTP/1.1 200 OK\r\n")


@pytest.mark.parametrize(
    "partial",
    [
        b"POST /v1/models/half_plus_two:predict HTTP/1.1\r\nHost: test\r\n",  # headers never end
        b'POST /v1/models/half_plus_two:predict HTTP/1.1\r\nHost: test\r\nContent-Length: 100\r\n\r\n{"inst',  # body
    ],
    ids=["slow headers", "slow body"],
)
def test_a_request_that_does_not_arrive_in_time_is_answered_408(limited, partial):
    with connect(limited) as sock:
        sock.sendall(partial)
        status, headers, body = error_answer(read_until_closed(sock))
    assert status == "HTTP/1.1 408 Request Timeout"
    assert headers["Connection"] == "close"
    assert body == {"error": "Request timed out: it did not arrive whole within 2 seconds"}


def test_a_client_that_does_not_read_its_answers_is_not_read_from(server):
    """Pipelined requests whose answers are not read: the server stops reading once its write buffer is full,
    so the client's sends block after the kernels' buffers, and every answer comes once it reads."""
    request = b"GET /v1/models/half_plus_two HTTP/1.1\r\nHost: test\r\n\r\n"
    with connect(server) as sock:
        sock.sendall(request)
        answer_size = len(sock.recv(65536))  # one answer, whole (a few hundred bytes)
    batch = request * 1000
    sent = 0
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
        sock.connect(("127.0.0.1", server.rest_port))
        sock.setblocking(False)
        while sent < 64 * 1024 * 1024:
            if not select.select([], [sock], [], 5)[1]:
                break  # not writable for 5 s: the server stopped reading
            try:
                sent += sock.send(batch[sent % len(batch) :])
            except BlockingIOError:
                continue
        assert sent < 48 * 1024 * 1024, f"the server read {sent / 2**20:.0f} MiB of requests it could not answer"
        sock.settimeout(30)
        offset = sent % len(request)
        if offset:
            sock.sendall(request[offset:])  # the last request, whole
        expected = (sent + len(request) - 1) // len(request) * answer_size
        received = 0
        while received < expected:  # every answer comes: the server reads again as the client reads
            chunk = sock.recv(1 << 20)
            assert chunk, f"closed after {received} bytes of answers of {expected}"
            received += len(chunk)
        assert received == expected
