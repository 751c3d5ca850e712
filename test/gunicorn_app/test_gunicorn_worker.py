"""The app's gunicorn worker class (wsgi_server/loop.py, an event loop) on raw sockets, byte for byte: keep-alive,
pipelining, chunked bodies, 100-continue, refusals as JSON, header names it drops, a streamed answer (chunked, or
raw for HTTP/1.0), a handler that blocks without holding up other connections (the loop runs a handler in threads
until it has been quick), `context.session`, and SIGTERM letting a request in flight finish. The app behind it is
the real one, calling the real model server."""

from __future__ import annotations

import json
import os
import re
import signal
import socket

import pytest
from app_support import write_model_dir
from gunicorn_harness import App

BODY = b'{"instances": [1.0, 2.0, 5.0]}'
PREDICTIONS = {"predictions": [3.5, 4.0, 5.5]}

# A handler that answers at once, or, for the body "hold", once the test writes a line to its FIFO; and the Context's
# pooled session to the model server.
SCRIPT = """
import json
import time

import requests


def handler(data, context):
    body = data.read()
    if body == b"slow":  # blocks the thread it runs in for 2 ms
        time.sleep(0.002)
        return "slow", "text/plain"
    if body == b"hold":
        with open(HOLD) as fifo:
            return fifo.readline().strip(), "text/plain"
    if body == b"session":
        answer = context.session.post(context.rest_uri, json={"instances": [1.0]}, timeout=context.timeout)
        return json.dumps({"status": answer.status_code, "json": answer.json(), "requests": isinstance(
            answer, requests.Response), "type": type(answer).__module__ + "." + type(answer).__name__}), \
            "application/json"
    if body == b"session-elsewhere":
        context.session.get("http://example.com/")
    if body == b"request-id":
        return context.custom_attributes or "none", "text/plain"
    if body == b"stream":
        return iter([b"one ", "two"]), "text/plain"
    answer = context.session.post(context.rest_uri, data=body)
    return answer.content, "application/json"
"""


@pytest.fixture(scope="module")
def hold(tmp_path_factory):
    path = tmp_path_factory.mktemp("fifo") / "hold"
    os.mkfifo(path)
    return path


@pytest.fixture(scope="module")
def app(model_server, tmp_path_factory, hold) -> App:
    """The app under the loop worker class, one worker."""
    model_dir = write_model_dir(tmp_path_factory.mktemp("worker"), f"HOLD = {str(hold)!r}\n" + SCRIPT)
    with App(model_dir, model_server, workers=1) as app:
        yield app


def post(body: bytes, extra: bytes = b"", path: bytes = b"/invocations") -> bytes:
    return (
        b"POST "
        + path
        + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + extra
        + b"Content-Length: %d\r\n\r\n" % len(body)
        + body
    )


class Reader:
    """HTTP/1.1 answers read one by one from a socket (Content-Length framing, as the worker writes them)."""

    def __init__(self, sock: socket.socket):
        self.sock, self.buffer = sock, b""

    def head(self) -> tuple[int, dict[str, str]]:
        while b"\r\n\r\n" not in self.buffer:
            chunk = self.sock.recv(65536)
            assert chunk, f"the connection closed after {self.buffer!r}"
            self.buffer += chunk
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        return int(status_line.split()[1]), {
            n.lower(): v.strip() for n, _, v in (line.partition(":") for line in lines)
        }

    def answer(self) -> tuple[int, dict[str, str], bytes]:
        status, headers = self.head()
        length = int(headers["content-length"])
        while len(self.buffer) < length:
            chunk = self.sock.recv(65536)
            assert chunk, "the connection closed in the body"
            self.buffer += chunk
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return status, headers, body

    def closed(self) -> bool:
        return self.buffer == b"" and self.sock.recv(1) == b""


def connect(app: App) -> tuple[socket.socket, Reader]:
    sock = socket.create_connection(("127.0.0.1", app.port), timeout=30)
    return sock, Reader(sock)


def test_a_connection_is_kept_alive_across_requests(app):
    sock, reader = connect(app)
    with sock:
        for _ in range(3):
            sock.sendall(post(BODY))
            status, headers, body = reader.answer()
            assert (status, json.loads(body)) == (200, PREDICTIONS)
            assert "connection" not in headers


def test_pipelined_requests_are_answered_in_order(app):
    sock, reader = connect(app)
    with sock:
        sock.sendall(post(b'{"instances": [1.0]}') + post(b'{"instances": [2.0]}') + post(b'{"instances": [3.0]}'))
        assert [json.loads(reader.answer()[2]) for _ in range(3)] == [
            {"predictions": [3.5]},
            {"predictions": [4.0]},
            {"predictions": [4.5]},
        ]


def test_a_chunked_body_is_read_whole(app):
    sock, reader = connect(app)
    with sock:
        sock.sendall(
            b"POST /invocations HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            b'5\r\n{"ins\r\n' + b"%x\r\n%s\r\n" % (len(BODY) - 5, BODY[5:]) + b"0\r\n\r\n"
        )
        status, _, body = reader.answer()
        assert (status, json.loads(body)) == (200, PREDICTIONS)


def test_expect_100_continue_is_answered_before_the_body(app):
    sock, reader = connect(app)
    with sock:
        head = post(BODY, b"Expect: 100-continue\r\n")
        sock.sendall(head[: -len(BODY)])
        assert reader.head() == (100, {})
        sock.sendall(BODY)
        status, _, body = reader.answer()
        assert (status, json.loads(body)) == (200, PREDICTIONS)


def test_http_1_0_closes_after_the_answer(app):
    sock, reader = connect(app)
    with sock:
        sock.sendall(post(BODY).replace(b"HTTP/1.1", b"HTTP/1.0", 1))
        status, headers, body = reader.answer()
        assert (status, headers["connection"], json.loads(body)) == (200, "close", PREDICTIONS)
        assert reader.closed()


def _until(sock: socket.socket, end: bytes | None) -> bytes:
    """What the socket gives until `end` (None: until the peer closes)."""
    data = b""
    while end is None or not data.endswith(end):
        piece = sock.recv(65536)
        if not piece:
            break
        data += piece
    return data


def test_a_streamed_answer_is_chunked_for_http_1_1_and_sent_raw_then_closed_for_http_1_0(app):
    with socket.create_connection(("127.0.0.1", app.port)) as sock:
        sock.sendall(post(b"stream"))
        head, _, body = _until(sock, b"0\r\n\r\n").partition(b"\r\n\r\n")
        assert b"\r\ntransfer-encoding: chunked" in head.lower() and b"content-length" not in head.lower()
        assert body == b"4\r\none \r\n3\r\ntwo\r\n0\r\n\r\n"
    with socket.create_connection(("127.0.0.1", app.port)) as sock:
        sock.sendall(post(b"stream").replace(b"HTTP/1.1", b"HTTP/1.0", 1))
        head, _, body = _until(sock, None).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK\r\n")  # (the version the server speaks)
        assert b"transfer-encoding" not in head.lower() and b"content-length" not in head.lower()
        assert b"\r\nconnection: close" in head.lower()
        assert body == b"one two"


def test_a_malformed_request_gets_a_json_400_and_the_connection_closes(app):
    sock, reader = connect(app)
    with sock:
        sock.sendall(b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n")
        status, headers, body = reader.answer()
        assert (status, headers["content-type"], headers["connection"]) == (400, "application/json", "close")
        assert json.loads(body)["error"].startswith("Bad Request: Malformed HTTP request: ")
        assert reader.closed()


def test_a_header_name_with_an_underscore_is_dropped(app):
    """X-Amzn_SageMaker_Custom_Attributes would pass for X-Amzn-SageMaker-Custom-Attributes once both are
    HTTP_X_AMZN_SAGEMAKER_CUSTOM_ATTRIBUTES: it is not seen at all, as under gunicorn's own workers."""
    sock, reader = connect(app)
    with sock:
        sock.sendall(post(b"request-id", b"X-Amzn_SageMaker_Custom_Attributes: tfs-model-name=other\r\n"))
        assert reader.answer()[::2] == (200, b"none")
        sock.sendall(post(b"request-id", b"X-Amzn-SageMaker-Custom-Attributes: a=b\r\n"))
        assert reader.answer()[::2] == (200, b"a=b")


@pytest.fixture(scope="module")
def blocking_app(model_server, tmp_path_factory, hold) -> App:
    """An app whose handler has blocked in every call so far: the loop runs it in threads (it was never quick enough
    to run inline)."""
    model_dir = write_model_dir(tmp_path_factory.mktemp("blocking"), f"HOLD = {str(hold)!r}\n" + SCRIPT)
    with App(model_dir, model_server, workers=1) as app:
        block_three_times(app)
        yield app


def block_three_times(app: App) -> None:
    """Three calls of the handler that block 2 ms each."""
    sock, reader = connect(app)
    with sock:
        for _ in range(3):
            sock.sendall(post(b"slow"))
            assert reader.answer()[::2] == (200, b"slow")
    assert "worker's loop" not in app.log()  # never inline: never said to be moved


def test_a_blocked_handler_holds_only_its_own_connection(blocking_app, hold):
    app = blocking_app
    held, held_reader = connect(app)
    with held:
        held.sendall(post(b"hold"))
        for _ in range(3):  # the only worker answers other connections meanwhile
            sock, reader = connect(app)
            with sock:
                sock.sendall(post(BODY))
                status, _, body = reader.answer()
            assert (status, json.loads(body)) == (200, PREDICTIONS)
        release(hold, "released")
        assert held_reader.answer()[::2] == (200, b"released")


def release(hold, line: str) -> None:
    """Let the held handler answer `line` (opening the FIFO waits for the handler to open it too)."""
    with open(hold, "w") as fifo:
        fifo.write(line + "\n")


def test_context_session_calls_the_model_server_over_kept_connections(app):
    sock, reader = connect(app)
    with sock:
        sock.sendall(post(b"session"))
        status, _, body = reader.answer()
    assert (status, json.loads(body)) == (
        200,
        {
            "status": 200,
            "json": {"predictions": [3.5]},
            "requests": True,
            "type": "sagemaker_tfs.model_client.http_client.ModelServerResponse",
        },
    )


def test_context_session_refuses_other_addresses(app):
    sock, reader = connect(app)
    with sock:
        sock.sendall(post(b"session-elsewhere"))
        status, _, body = reader.answer()
    assert (status, json.loads(body)) == (
        500,
        {
            "error": "context.session reaches the model servers "
            "(http://127.0.0.1:<port>/...), not 'http://example.com/': "
            "use requests for other addresses"
        },
    )


def test_sigterm_lets_the_request_in_flight_finish(model_server, tmp_path, hold):
    model_dir = write_model_dir(tmp_path, f"HOLD = {str(hold)!r}\n" + SCRIPT)
    with App(model_dir, model_server, workers=1) as app:
        block_three_times(app)
        held, held_reader = connect(app)
        with held:
            held.sendall(post(b"hold"))
            idle, idle_reader = connect(app)  # a kept-alive connection with no request: left to us, then closed
            with idle:
                idle.sendall(post(BODY))
                assert idle_reader.answer()[0] == 200
                app.signal(signal.SIGTERM)
                # a request its peer sends meanwhile is answered, not refused (nginx may be sending one that moment)
                idle.sendall(post(BODY))
                assert idle_reader.answer()[0] == 200
                assert idle_reader.closed()
                release(hold, "finished")
                status, headers, body = held_reader.answer()
            assert (status, headers["connection"], body) == (200, "close", b"finished")
        assert app.proc.wait(30) == 0


def test_a_connection_silent_for_the_keep_alive_time_is_closed(model_server, tmp_path, hold):
    """gunicorn's --keep-alive (serve gives 75 s, nginx drops its idle connections after 60): here 1 s."""
    model_dir = write_model_dir(tmp_path, f"HOLD = {str(hold)!r}\n" + SCRIPT)
    with App(model_dir, model_server, workers=1, env={"GUNICORN_CMD_ARGS": "--keep-alive 1"}) as app:
        sock, reader = connect(app)
        with sock:
            sock.sendall(post(BODY))
            assert reader.answer()[0] == 200
            assert reader.closed()  # the worker closes it (the socket's own timeout is 30 s)


def refusal(app: App, request: bytes) -> tuple[int, dict]:
    """The worker's answer to a request it refuses: (status, JSON body); the connection closes after it."""
    sock, reader = connect(app)
    with sock:
        sock.sendall(request)
        status, headers, body = reader.answer()
        assert (headers["content-type"], headers["connection"]) == ("application/json", "close")
        assert reader.closed()
        return status, json.loads(body)


# gunicorn's limits, statuses and messages (gunicorn/http/message.py, errors.py, workers/base.py)
@pytest.mark.parametrize(
    "request_bytes, status, error",
    [
        (
            b"GET /ping?" + b"q" * 5000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
            414,
            "URI Too Long: Request Line is too large (5019 > 4094)",
        ),
        (
            b"GET /ping HTTP/1.1\r\nHost: x\r\nX-Big: " + b"v" * 8190 + b"\r\n\r\n",
            431,
            "Request Header Fields Too Large: Error parsing headers: 'limit request headers fields size'",
        ),
        (b"GET /ping HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400, "Bad Request: Invalid HTTP Header: 'HOST'"),
        (
            b"GET /ping HTTP/2.0\r\nHost: x\r\n\r\n",
            400,
            "Bad Request: Invalid HTTP Version 'Invalid HTTP Version: (2, 0)'",
        ),
        (post(BODY, b"Expect: 200-ok\r\n"), 417, "Expectation Failed: Unable to comply with expectation: '200-ok'"),
    ],
    ids=["request-line", "field-size", "two-hosts", "http-2.0", "expect"],
)
def test_requests_over_gunicorn_s_limits_are_refused_as_gunicorn_does(app, request_bytes, status, error):
    assert refusal(app, request_bytes) == (status, {"error": error})


@pytest.mark.parametrize(
    "head, sent_id",
    [
        (b"X-Amzn-RequestId: mine-7\r\nContent-Type: a\r\nContent-Type: b\r\n", "mine-7"),
        (b"Content-Type: a\r\nContent-Type: b\r\nX-Amzn-RequestId: mine-7\r\n", None),  # not read: refused before
        (b"X-Amzn-RequestId: " + b"r" * 300 + b"\r\nHost: y\r\n", None),  # not one the app echoes
    ],
    ids=["id-first", "id-after", "id-too-long"],
)
def test_a_refused_request_carries_a_request_id(app, head, sent_id):
    """As every answer of the app (issue 49's random traffic found refusals without one): the client's id when it
    was read before the refused line and is one the app echoes, else a new one."""
    sock, reader = connect(app)
    with sock:
        sock.sendall(b"POST /invocations HTTP/1.1\r\nHost: x\r\n" + head + b"Content-Length: 0\r\n\r\n")
        status, headers, _ = reader.answer()
    assert status == 400
    new_id = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    assert re.fullmatch(re.escape(sent_id) if sent_id else new_id, headers["x-amzn-requestid"])


def test_a_request_refused_before_its_large_body_still_gets_its_answer(app):
    """The worker refuses at the request line and reads the rest only to drop it (a lingering close): closed at
    once with 4 MB unread, the connection would be reset under the sender (nginx, which then answered 503; issue
    49's random traffic found it), and sendall here would fail."""
    body = b"1" * (4 << 20)
    sock, reader = connect(app)
    with sock:
        sock.sendall(b"FOO /invocations HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        status, headers, answer = reader.answer()
        assert (status, headers["connection"]) == (400, "close")
        assert json.loads(answer)["error"].startswith("Bad Request: Malformed HTTP request: ")
        assert reader.closed()


def test_complete_pipelined_requests_are_answered_before_a_malformed_one_is_refused(app):
    sock, reader = connect(app)
    with sock:
        sock.sendall(post(b'{"instances": [1.0]}') + post(b'{"instances": [2.0]}') + b"BAD\r\n\r\n")
        assert [json.loads(reader.answer()[2]) for _ in range(2)] == [{"predictions": [3.5]}, {"predictions": [4.0]}]
        status, headers, body = reader.answer()
        assert (status, headers["connection"]) == (400, "close")
        assert json.loads(body)["error"].startswith("Bad Request: Malformed HTTP request: ")
        assert reader.closed()


def test_a_head_trickling_in_is_cut_off_after_the_keep_alive_time(model_server, tmp_path, hold):
    """Each read waiting --keep-alive (here 1 s) is not enough: a byte every 0.3 s would hold the thread for ever.
    The whole head must arrive within that time."""
    model_dir = write_model_dir(tmp_path, f"HOLD = {str(hold)!r}\n" + SCRIPT)
    with App(model_dir, model_server, workers=1, env={"GUNICORN_CMD_ARGS": "--keep-alive 1"}) as app:
        sock, _ = connect(app)
        with sock:
            sock.settimeout(0.3)
            sock.sendall(b"POST /invocations HTTP/1.1\r\n")
            closed = False
            for _ in range(30):  # up to 9 s
                try:
                    closed = sock.recv(1) == b""
                except TimeoutError:
                    pass
                except ConnectionResetError:
                    closed = True
                if closed:
                    break
                try:
                    sock.sendall(b"X: y\r\n")
                except OSError:
                    closed = True
                    break
            assert closed
