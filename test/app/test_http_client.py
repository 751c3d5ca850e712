"""Unit tests of the HTTP client to the model servers: request bodies, keep-alive, answer framing, failures
(against canned loopback servers), and connections that reach themselves (against a real free port). The client's
behaviour is tested as each app worker class calls it (the `run` fixture): from a plain thread (blocking, its
connections kept per thread), and from a request greenlet of the loop worker (waiting through the loop, its
connections shared by the loop's requests). The answers handed to scripts are compared with what requests itself
gives for the same request to the same server (a canned one, and the real model server), read in every way."""

from __future__ import annotations

import datetime
import io
import pickle
import random
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests
from app_support import DEFAULT_MODEL
from ports import free_port
from processes import wait_for
from requests.cookies import RequestsCookieJar
from requests.structures import CaseInsensitiveDict
from sagemaker_tfs.model_client import tensor_calls
from sagemaker_tfs.model_client.http_client import ModelServerResponse, request_body
from sagemaker_tfs.model_client.model_servers import (
    ModelServer,
    ModelServerClient,
    ModelServerError,
    ModelServerSession,
)
from sagemaker_tfs.shared import cooperative


@pytest.mark.parametrize(
    "data, expected",
    [
        (b"raw", (b"raw", {})),
        ("é", ("é".encode(), {})),
        (None, (b"", {})),
        (io.BytesIO(b"file"), (b"file", {})),
        (io.StringIO("text"), (b"text", {})),
        ({"a": "1", "b": ["x", "y"]}, (b"a=1&b=x&b=y", {"Content-Type": "application/x-www-form-urlencoded"})),
        ([("a", "1"), ("a", "2")], (b"a=1&a=2", {"Content-Type": "application/x-www-form-urlencoded"})),
    ],
)
def test_request_body_has_the_semantics_of_requests(data, expected):
    assert request_body(data) == expected


def test_request_body_refuses_what_requests_cannot_send():
    with pytest.raises(TypeError, match="cannot send int 5 to the model server"):
        request_body(5)
    with pytest.raises(TypeError, match="cannot send list"):
        request_body([1, 2])


@pytest.fixture(params=["thread", "loop"])
def run(request):
    """run(call): call() as the app makes it, in a plain thread or in a request greenlet of a loop (a Hub polled
    here until the call ends); its value, or its exception raised again."""
    if request.param == "thread":
        return lambda call: call()
    hub = cooperative.Hub(4)

    def in_loop(call):
        outcome = []

        def task():
            try:
                outcome.append((True, call()))
            except Exception as exc:  # noqa: BLE001 (raised again in the caller, below)
                outcome.append((False, exc))

        hub.spawn(task)
        for _ in range(400):  # 20 s at most: a hang fails the test rather than the suite
            if outcome:
                break
            hub.poll(0.05)
        ok, value = outcome[0]
        if not ok:
            raise value
        return value

    return in_loop


class FakeHttpServer:
    """A loopback server sending canned bytes for each request it reads: `answers` is a list of (raw answer,
    close after it). For the client's protocol handling only; features are tested against the model server."""

    def __init__(self, answers: list[tuple[bytes, bool]], silent: bool = False, before_answer=None):
        self.answers = list(answers)
        self.silent = silent
        self.before_answer = before_answer  # called before each answer (in the connection's thread)
        self.connections = 0
        self.requests = 0  # requests read
        self.ended = 0  # connections closed
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        try:
            self._answer(conn)
        finally:
            conn.close()
            self.ended += 1

    def _answer(self, conn: socket.socket) -> None:
        reader = conn.makefile("rb")
        while True:
            head = b""
            while not head.endswith(b"\r\n\r\n"):
                line = reader.readline()
                if not line:
                    return
                head += line
            length = next(
                (
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ),
                0,
            )
            reader.read(length)
            self.requests += 1
            if self.silent:
                threading.Event().wait(5)
                return
            if self.before_answer is not None:
                self.before_answer()
            answer, close = self.answers.pop(0)
            conn.sendall(answer)
            if close:
                return

    def close(self) -> None:
        self.sock.close()


OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


def test_client_reuses_its_connection_and_reconnects_before_sending_when_the_server_closed_it(run):
    server = FakeHttpServer([(OK, False), (OK, True), (OK, False)])
    try:
        client = ModelServerClient(timeout=5)
        target = ModelServer(server.port, 1)
        for attempt in range(3):  # the second answer closes the connection without saying so
            response = run(lambda: client.request(target, "POST", "/v1/models/m:predict", b"{}"))
            assert (response.status_code, response.json(), response.encoding) == (200, {}, "utf-8")
            if attempt == 1:
                wait_for(lambda: server.ended == 1, what="the server's close")
        assert (server.connections, server.requests) == (2, 3)
    finally:
        server.close()


def test_in_the_loop_a_request_waiting_for_its_answer_lets_others_be_sent():
    """The server answers neither of two requests before it has read both: the loop sends the second while the
    first waits (a thread blocked on the first would never send it), each on a connection of its own, and both
    connections are kept for the next requests."""
    both = threading.Barrier(3)
    server = FakeHttpServer([(OK, False)] * 4, before_answer=lambda: both.wait(10))
    hub = cooperative.Hub(4)
    client = ModelServerClient(timeout=10)
    target = ModelServer(server.port, 1)
    answers = []
    try:
        for _ in range(2):
            hub.spawn(lambda: answers.append(client.request(target, "POST", "/v1/models/m:predict", b"{}").json()))
        threading.Thread(target=both.wait, args=(10,), daemon=True).start()
        for _ in range(400):
            if len(answers) == 2:
                break
            hub.poll(0.05)
        assert answers == [{}, {}] and (server.connections, server.requests) == (2, 2)
        assert len(hub.pools[server.port]) == 2 and all(c.sock is not None for c in hub.pools[server.port])
    finally:
        server.close()


def test_a_request_whose_answer_is_cut_off_is_not_sent_again(run):
    server = FakeHttpServer([(OK, False), (b"", True), (OK, False)])  # the second request gets no answer
    try:
        client = ModelServerClient(timeout=5)
        target = ModelServer(server.port, 1)
        assert run(lambda: client.request(target, "POST", "/v1/models/m:predict", b"{}")).status_code == 200
        with pytest.raises(ModelServerError) as error:
            run(lambda: client.request(target, "POST", "/v1/models/m:predict", b"{}"))
        assert error.value.status == 502 and server.requests == 2  # sent once, not retried
        assert run(lambda: client.request(target, "POST", "/v1/models/m:predict", b"{}")).status_code == 200
        assert (server.connections, server.requests) == (2, 3)
    finally:
        server.close()


def test_interim_answers_are_skipped_and_a_repeated_header_keeps_every_value(run):
    interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
    final = b"HTTP/1.1 200 OK\r\nX-Thing: 1\r\nContent-Length: 2\r\nx-thing: 2\r\n\r\nok"
    server = FakeHttpServer([(interim + final, False), (OK, False)])
    try:
        client = ModelServerClient(timeout=5)
        target = ModelServer(server.port, 1)
        first = run(lambda: client.request(target, "POST", "/v1/models/m:predict", b"{}"))
        assert (first.status_code, first.content, first.headers["X-Thing"]) == (200, b"ok", "1, 2")
        assert run(lambda: client.request(target, "GET", "/v1/models/m")).content == b"{}"
    finally:
        server.close()


def test_client_reads_chunked_answers_and_answers_closed_by_the_server(run):
    chunked = (
        b"HTTP/1.1 400 Bad Request\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n"
        b"3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\n\r\n"
    )
    until_close = b"HTTP/1.0 200 OK\r\nX-Thing: 1\r\n\r\nall of it"
    server = FakeHttpServer([(chunked, False), (until_close, True)])
    try:
        client = ModelServerClient(timeout=5)
        target = ModelServer(server.port, 1)
        first = run(lambda: client.request(target, "GET", "/v1/models/m"))
        assert (first.status_code, first.reason, first.content, first.headers["content-type"]) == (
            400,
            "Bad Request",
            b"abcde",
            "text/plain",
        )
        second = run(lambda: client.request(target, "GET", "/v1/models/m"))
        assert (second.status_code, second.content, second.headers["x-thing"]) == (200, b"all of it", "1")
        assert isinstance(second, requests.Response)
    finally:
        server.close()


def test_client_says_when_the_model_server_is_unreachable_silent_or_broken(run):
    client = ModelServerClient(timeout=0.3)
    port = free_port()  # below the ephemeral range: a connect() there cannot reach itself (see below)
    with pytest.raises(ModelServerError) as error:
        run(lambda: client.request(ModelServer(port, 1), "GET", "/"))
    assert (error.value.status, error.value.message) == (
        502,
        f"the model server at 127.0.0.1:{port} is not reachable (Connection refused); it may be starting or restarting",
    )

    silent = FakeHttpServer([], silent=True)
    broken = FakeHttpServer([(b"SMTP ready\r\n\r\n", True)])
    try:
        with pytest.raises(ModelServerError) as error:
            run(lambda: client.request(ModelServer(silent.port, 1), "POST", "/", b"{}"))
        assert (error.value.status, error.value.message) == (
            504,
            f"the model server at 127.0.0.1:{silent.port} did not answer within 0.3 s",
        )
        with pytest.raises(ModelServerError) as error:
            run(lambda: client.request(ModelServer(broken.port, 1), "GET", "/"))
        assert error.value.status == 502 and "sent an invalid answer: invalid status line" in error.value.message
    finally:
        silent.close()
        broken.close()


def free_ephemeral_port() -> int:
    """A port of the kernel's ephemeral range where nothing listens, of the parity connect() takes its ports
    from first (the low end's: Linux leaves the other parity to bind())."""
    low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    while True:
        port = random.randrange(low, high + 1, 2)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port


def test_a_connection_that_reaches_itself_is_reset_and_reported_as_unreachable():
    """Nothing listens on a port of the ephemeral range: a connect() there is sometimes given that very port as
    its own and connects the socket to itself (issue 11, item 9). The client must not keep such a socket,
    which would hold the port against a model server restarting there."""
    port = free_ephemeral_port()
    client, server = ModelServerClient(timeout=5), ModelServer(port, 1)
    refused = (
        f"the model server at 127.0.0.1:{port} is not reachable (Connection refused); it may be starting or restarting"
    )
    for _ in range(200_000):  # connect() walks the range: a few thousand attempts reach the port itself
        with pytest.raises(ModelServerError) as error:
            client.request(server, "GET", "/v1/models/m")
        if error.value.message != refused:
            break
    assert (error.value.status, error.value.message) == (
        502,
        f"the model server at 127.0.0.1:{port} is not reachable (Connection refused: the connection reached "
        "itself); it may be starting or restarting",
    )
    with socket.socket() as restarted:  # no SO_REUSEADDR: a socket left on the port, even in TIME_WAIT, fails this
        restarted.bind(("127.0.0.1", port))
        restarted.listen()


def test_context_session_errors_are_requests_errors_and_model_server_errors():
    """A script's `except requests.RequestException` catches them; uncaught, they answer 502 / 504."""
    session = ModelServerSession(timeout=0.3)
    port = free_port()  # nothing listens there, and a connect() cannot reach itself
    with pytest.raises(requests.ConnectionError) as refused:
        session.post(f"http://127.0.0.1:{port}/v1/models/m:predict", data=b"{}")
    assert isinstance(refused.value, ModelServerError) and refused.value.status == 502
    silent = FakeHttpServer([], silent=True)
    try:
        with pytest.raises(requests.Timeout) as late:
            session.post(f"http://localhost:{silent.port}/v1/models/m:predict", json={"instances": [1]})
        assert isinstance(late.value, ModelServerError) and (late.value.status, late.value.message) == (
            504,
            f"the model server at 127.0.0.1:{silent.port} did not answer within 0.3 s",
        )
    finally:
        silent.close()
    with pytest.raises(ValueError, match="use requests for other addresses"):
        session.get("https://127.0.0.1:1/")


# ---- the answers handed to scripts: requests.Response objects, as requests itself gives them ----


def seen(response: requests.Response) -> dict[str, Any]:
    """What a script sees of an answer, read in this order."""
    return {
        "status_code": response.status_code,
        "reason": response.reason,
        "ok": response.ok,
        "bool": bool(response),
        "url": response.url,
        "headers": list(response.headers.items()),  # the spellings and the order
        "content": response.content,
        "encoding": response.encoding,
        "apparent_encoding": response.apparent_encoding,
        "text": response.text,
        "cookies": response.cookies.get_dict(),
        "history": response.history,
        "links": response.links,
        "is_redirect": response.is_redirect,
        "repr": repr(response),
    }


def twice(answer: bytes) -> FakeHttpServer:
    """A server giving this answer to two requests: the client's and requests'."""
    return FakeHttpServer([(answer, False), (answer, False)])


def canned(status: str, headers: list[tuple[str, str]], body: bytes) -> bytes:
    lines = "".join(f"{name}: {value}\r\n" for name, value in headers)
    return f"HTTP/1.1 {status}\r\n{lines}Content-Length: {len(body)}\r\n\r\n".encode("latin-1") + body


BODY = b'{"predictions":\n [3.5, 4.0]}'
REPEATED = [("Content-Type", "application/json"), ("X-Thing", "1"), ("x-thing", "2")]


def test_an_answer_is_a_requests_response_equal_to_what_requests_gets(run):
    server = twice(canned("200 OK", REPEATED, BODY))
    url = f"http://127.0.0.1:{server.port}/v1/models/m:predict"
    try:
        ours = run(lambda: ModelServerSession(timeout=5).post(url, data=b"{}"))
        theirs = requests.post(url, data=b"{}", timeout=5)
    finally:
        server.close()
    assert type(ours) is ModelServerResponse and isinstance(ours, requests.Response)
    assert (
        seen(ours)
        == seen(theirs)
        == {
            "status_code": 200,
            "reason": "OK",
            "ok": True,
            "bool": True,
            "url": url,
            # a repeated header's values joined under its first spelling
            "headers": [("Content-Type", "application/json"), ("X-Thing", "1, 2"), ("Content-Length", str(len(BODY)))],
            "content": BODY,
            "encoding": "utf-8",
            "apparent_encoding": "ascii",
            "text": BODY.decode(),
            "cookies": {},
            "history": [],
            "links": {},
            "is_redirect": False,
            "repr": "<Response [200]>",
        }
    )
    assert ours.json() == theirs.json() == {"predictions": [3.5, 4.0]}
    assert type(ours.headers) is type(theirs.headers) is CaseInsensitiveDict
    assert ours.headers["X-THING"] == ours.headers.get("x-thing") == "1, 2" and "content-length" in ours.headers
    assert dict(ours.headers) == dict(theirs.headers)
    assert type(ours.cookies) is type(theirs.cookies) is RequestsCookieJar and len(ours.cookies) == 0
    assert type(ours.elapsed) is type(theirs.elapsed) is datetime.timedelta and ours.elapsed >= datetime.timedelta(0)
    assert ours.raise_for_status() is None and theirs.raise_for_status() is None
    assert ours.next is theirs.next is None  # (an unpickled Response has no `next`: requests' own)
    assert type(pickle.loads(pickle.dumps(ours))) is ModelServerResponse


def _closed(response: requests.Response) -> bytes:
    response.close()
    return response.content


def _in_with(response: requests.Response) -> str:
    with response as same:
        return same.text


def _headers_replaced(response: requests.Response) -> dict[str, str]:
    response.headers = CaseInsensitiveDict({"A": "b"})
    return dict(response.headers)


def _headers_changed(response: requests.Response) -> dict[str, str]:
    response.headers["X-Thing"] = "3"
    response.headers["New"] = "1"
    return dict(response.headers)


def _pickled(response: requests.Response) -> tuple[Any, ...]:
    again = pickle.loads(pickle.dumps(response))
    return seen(again), again.json(), type(again.elapsed), list(again.iter_content(7))


READERS: dict[str, Callable[[requests.Response], Any]] = {
    "iter_content, then content": lambda r: (list(r.iter_content(4)), r.content),
    "iter_content(None), then json": lambda r: (list(r.iter_content(None)), r.json()),
    "iter_content decoded": lambda r: list(r.iter_content(3, decode_unicode=True)),
    "iter_lines, then text": lambda r: (list(r.iter_lines()), r.text),
    "iterated, then json": lambda r: (list(r), r.json()),
    "content, then raw": lambda r: (r.content, r.raw.read()),
    "closed first": _closed,
    "in a with statement": _in_with,
    "headers replaced": _headers_replaced,
    "headers changed": _headers_changed,
    "pickled unread": _pickled,
    "pickled once read": lambda r: (seen(r), _pickled(r)),
}


@pytest.mark.parametrize("reader", READERS.values(), ids=READERS.keys())
def test_an_answer_read_in_any_way_gives_what_requests_gives(reader):
    server = twice(canned("200 OK", REPEATED, BODY))
    url = f"http://127.0.0.1:{server.port}/v1/models/m:predict"
    try:
        ours = ModelServerSession(timeout=5).post(url, data=b"{}")
        theirs = requests.post(url, data=b"{}", timeout=5)
    finally:
        server.close()
    assert reader(ours) == reader(theirs)


@pytest.mark.parametrize(
    "content_type, encoding, text",
    [
        ("application/json", "utf-8", "é ü"),
        ("text/plain", "ISO-8859-1", "Ã© Ã¼"),
        ("text/csv; charset=utf-16", "utf-16", "é ü".encode().decode("utf-16", errors="replace")),
        ("application/octet-stream", None, "é ü"),  # decoded by guessing, as requests does
        (None, None, "é ü"),
    ],
)
def test_the_encoding_and_the_text_are_requests(content_type, encoding, text):
    headers = [] if content_type is None else [("Content-Type", content_type)]
    server = twice(canned("200 OK", headers, "é ü".encode()))
    url = f"http://127.0.0.1:{server.port}/"
    try:
        ours = ModelServerSession(timeout=5).get(url)
        theirs = requests.get(url, timeout=5)
    finally:
        server.close()
    assert (ours.encoding, ours.text) == (theirs.encoding, theirs.text) == (encoding, text)
    assert seen(ours) == seen(theirs)


def test_an_error_answer_of_the_model_server_raises_as_requests_raises_it(model_server):
    url = f"{model_server.url}/v1/models/no_such_model"
    ours = ModelServerSession(timeout=30).get(url)
    theirs = requests.get(url, timeout=30)
    assert seen(ours) == seen(theirs)
    assert (ours.status_code, ours.reason, ours.ok, ours.json()) == (
        404,
        "Not Found",
        False,
        {"error": "Could not find any versions of model no_such_model"},
    )
    with pytest.raises(requests.HTTPError) as raised:
        ours.raise_for_status()
    assert str(raised.value) == f"404 Client Error: Not Found for url: {url}" and raised.value.response is ours
    with pytest.raises(requests.HTTPError, match=f"^{str(raised.value)}$"):
        theirs.raise_for_status()


PREDICTIONS = b'{\n    "predictions": [3.5, 4.0\n    ]\n}'  # half_plus_three's answer to [1.0, 2.0]


def test_the_model_servers_answer_is_what_requests_gets(model_server, run):
    path = f"/v1/models/{DEFAULT_MODEL}:predict"
    ours = run(lambda: ModelServerSession(timeout=30).post(model_server.url + path, json={"instances": [1.0, 2.0]}))
    theirs = requests.post(model_server.url + path, json={"instances": [1.0, 2.0]}, timeout=30)
    client = run(
        lambda: ModelServerClient(30).request(
            ModelServer(model_server.rest_port, 1), "POST", path, b'{"instances": [1.0, 2.0]}'
        )
    )
    assert seen(ours) == seen(theirs) == seen(client)
    assert (ours.status_code, ours.headers, ours.content, ours.json()) == (
        200,
        {"Content-Type": "application/json", "Content-Length": str(len(PREDICTIONS))},
        PREDICTIONS,
        {"predictions": [3.5, 4.0]},
    )
    assert pickle.loads(pickle.dumps(ours)).content == PREDICTIONS


@pytest.mark.parametrize("reader", READERS.values(), ids=READERS.keys())
def test_a_binary_calls_answer_reads_as_the_rest_calls_answer(model_server, reader):
    """The binary path's answer (a TensorResponse, its JSON written when first read) against requests' answer of
    the REST call it stands for: the same, but for the headers (its Content-Length is not known before)."""
    path = f"/v1/models/{DEFAULT_MODEL}:predict"
    server = ModelServer(model_server.rest_port, model_server.grpc_port)
    inputs = np.array([1.0, 2.0], np.float32)
    ours = tensor_calls.answer(server, ModelServerClient(30), path, inputs, 30)
    theirs = requests.post(model_server.url + path, data=tensor_calls.rest_body(inputs), timeout=30)
    assert type(ours) is tensor_calls.TensorResponse and isinstance(ours, requests.Response)
    assert list(ours.outputs) == ["y"] and ours.outputs["y"].tolist() == [3.5, 4.0]
    assert dict(ours.headers) == {"Content-Type": "application/json"} and ours.elapsed == datetime.timedelta(0)
    if reader in (_headers_changed, _headers_replaced):
        ours.headers, theirs.headers = CaseInsensitiveDict(), CaseInsensitiveDict()
    else:
        theirs.headers = CaseInsensitiveDict({"Content-Type": "application/json"})
    assert reader(ours) == reader(theirs)
    assert ours.content == PREDICTIONS and type(pickle.loads(pickle.dumps(ours))) is tensor_calls.TensorResponse
