"""Unit tests of the proxy's parts: custom attributes, return values, request bodies, the model server client."""

from __future__ import annotations

import io
import socket
import threading

import pytest
import requests

from sagemaker_tfs import HandlerError
from sagemaker_tfs.proxy import answers
from sagemaker_tfs.proxy.answers import BadReturnValue
from sagemaker_tfs.proxy.context import model_path, tfs_attributes
from sagemaker_tfs.proxy.model_servers import ModelServer, ModelServerClient, ModelServerError, parse_ports, \
    request_body


@pytest.mark.parametrize("header, expected", [
    ("tfs-model-name=m", ("m", None, None)),
    ("tfs-model-name=m,tfs-model-version=00123,tfs-method=classify", ("m", "00123", "classify")),
    ("tfs-model-version=09223372036854775807", (None, "09223372036854775807", None)),
    ("foo=bar, tfs-method=regress,x", (None, None, "regress")),
    ("tfs-model-name=a.b_c-1,tfs-other=x=y", ("a.b_c-1", None, None)),
    ("tfs-model-name=", (None, None, None)),
    ("model=m", (None, None, None)),
])
def test_tfs_attributes(header, expected):
    assert tfs_attributes(header) == expected


@pytest.mark.parametrize("header, message", [
    ("tfs-model-name=a=b", "invalid tfs-model-name"),
    ("tfs-model-name=.hidden", "invalid tfs-model-name"),
    ("tfs-model-name=" + "a" * 256, "invalid tfs-model-name"),
    ("tfs-model-version=-1", "invalid tfs-model-version: must be a positive integer"),
    ("tfs-model-version=7 ,x", "invalid tfs-model-version: must be a positive integer"),  # nothing is trimmed
    ("tfs-model-version=9223372036854775808", "invalid tfs-model-version: must be at most 9223372036854775807"),
    ("tfs-model-version=" + "9" * 5000, "invalid tfs-model-version: must be at most 9223372036854775807"),
    ("tfs-method=Predict", "invalid tfs-method: must be one of predict|classify|regress"),
])
def test_invalid_tfs_attributes_are_400(header, message):
    with pytest.raises(HandlerError) as error:
        tfs_attributes(header)
    assert (error.value.status, error.value.message) == (400, message)


def test_model_path():
    assert model_path("m") == "/v1/models/m:predict"
    assert model_path("m", "3", "regress") == "/v1/models/m/versions/3:regress"


@pytest.mark.parametrize("result, accept, expected", [
    (("a,b", "text/csv"), "*/*", (200, b"a,b", "text/csv")),
    (("é", None), "*/*", (200, "é".encode(), "application/json")),
    ((b"x", "text/plain", 404), "*/*", (404, b"x", "text/plain")),
    ((bytearray(b"x"), "a/b"), "*/*", (200, b"x", "a/b")),
    (({"a": 1}, "application/x-json"), "*/*", (200, b'{"a": 1}', "application/x-json")),
    ("ab", None, (200, b"ab", "application/json")),
    ("ab", "text/csv;q=0.1, text/plain", (200, b"ab", "text/plain")),
    ("ab", "text/*", (200, b"ab", "application/json")),
    ([1, 2], "text/csv", (200, b"[1, 2]", "application/json")),
])
def test_return_values(result, accept, expected):
    assert answers.from_return_value(result, accept, "handler") == expected


@pytest.mark.parametrize("result, message", [
    (None, "output_handler returned None, which cannot be sent"),
    (("a",), "output_handler returned a tuple of 1 items ('a',)"),
    ((None, "text/plain"), "output_handler returned (None, 'text/plain'): the body must be str, bytes, dict or list, "
                           "not NoneType"),
    (("x", "text/plain\r\nX-Evil: 1"), "the content type must be a string"),
    (("x", "text/plain", True), "the status must be an integer from 100 to 599, not True"),
    (("x", "text/plain", 600), "the status must be an integer from 100 to 599, not 600"),
    (3, "output_handler returned 3, which cannot be sent"),
])
def test_return_values_that_cannot_be_sent(result, message):
    with pytest.raises(BadReturnValue) as error:
        answers.from_return_value(result, "*/*", "output_handler")
    assert message in str(error.value)


def test_error_body():
    assert answers.error(418, 'a "quote" é') == (418, '{"error": "a \\"quote\\" é"}'.encode(), "application/json")


def test_handler_error_needs_an_error_status():
    assert (HandlerError(404, "gone").status, str(HandlerError(404, "gone"))) == (404, "gone")
    for status in (200, 600, "400", True):
        with pytest.raises(ValueError, match="HandlerError status must be an integer from 400 to 599"):
            HandlerError(status, "x")


@pytest.mark.parametrize("data, expected", [
    (b"raw", (b"raw", {})),
    ("é", ("é".encode(), {})),
    (None, (b"", {})),
    (io.BytesIO(b"file"), (b"file", {})),
    (io.StringIO("text"), (b"text", {})),
    ({"a": "1", "b": ["x", "y"]}, (b"a=1&b=x&b=y", {"Content-Type": "application/x-www-form-urlencoded"})),
    ([("a", "1"), ("a", "2")], (b"a=1&a=2", {"Content-Type": "application/x-www-form-urlencoded"})),
])
def test_request_body_has_the_semantics_of_requests(data, expected):
    assert request_body(data) == expected


def test_request_body_refuses_what_requests_cannot_send():
    with pytest.raises(TypeError, match="cannot send int 5 to the model server"):
        request_body(5)
    with pytest.raises(TypeError, match="cannot send list"):
        request_body([1, 2])


def test_parse_ports():
    servers = parse_ports("8501,8503", "9000,9002")
    assert [(s.rest_port, s.grpc_port, s.address) for s in servers] == \
        [(8501, "9000", "127.0.0.1:8501"), (8503, "9002", "127.0.0.1:8503")]
    with pytest.raises(ValueError, match="must list as many ports"):
        parse_ports("1,2", "3")
    with pytest.raises(ValueError, match="TFS_REST_PORTS='x' is not a comma-separated list of ports"):
        parse_ports("x", "3")


class FakeHttpServer:
    """A loopback server sending canned bytes for each request it reads: `answers` is a list of (raw answer,
    close after it). For the client's protocol handling only; features are tested against the model server."""

    def __init__(self, answers: list[tuple[bytes, bool]], silent: bool = False):
        self.answers = list(answers)
        self.silent = silent
        self.connections = 0
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
        with conn:
            reader = conn.makefile("rb")
            while True:
                head = b""
                while not head.endswith(b"\r\n\r\n"):
                    line = reader.readline()
                    if not line:
                        return
                    head += line
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                reader.read(length)
                if self.silent:
                    threading.Event().wait(5)
                    return
                answer, close = self.answers.pop(0)
                conn.sendall(answer)
                if close:
                    return

    def close(self) -> None:
        self.sock.close()


def test_client_reuses_its_connection_and_retries_once_when_the_server_closed_it():
    ok = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
    server = FakeHttpServer([(ok, False), (ok, True), (ok, False)])
    try:
        client = ModelServerClient(timeout=5)
        target = ModelServer(server.port, 1)
        for _ in range(3):  # the second answer closes the connection without saying so
            response = client.request(target, "POST", "/v1/models/m:predict", b"{}")
            assert (response.status_code, response.json(), response.encoding) == (200, {}, "utf-8")
        assert server.connections == 2
    finally:
        server.close()


def test_client_reads_chunked_answers_and_answers_closed_by_the_server():
    chunked = (b"HTTP/1.1 400 Bad Request\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n"
               b"3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\n\r\n")
    until_close = b"HTTP/1.0 200 OK\r\nX-Thing: 1\r\n\r\nall of it"
    server = FakeHttpServer([(chunked, False), (until_close, True)])
    try:
        client = ModelServerClient(timeout=5)
        target = ModelServer(server.port, 1)
        first = client.request(target, "GET", "/v1/models/m")
        assert (first.status_code, first.reason, first.content, first.headers["content-type"]) == \
            (400, "Bad Request", b"abcde", "text/plain")
        second = client.request(target, "GET", "/v1/models/m")
        assert (second.status_code, second.content, second.headers["x-thing"]) == (200, b"all of it", "1")
        assert isinstance(second, requests.Response)
    finally:
        server.close()


def test_client_says_when_the_model_server_is_unreachable_silent_or_broken():
    client = ModelServerClient(timeout=0.3)
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with pytest.raises(ModelServerError) as error:
        client.request(ModelServer(port, 1), "GET", "/")
    assert (error.value.status, error.value.message) == \
        (502, f"the model server at 127.0.0.1:{port} is not reachable (Connection refused); it may be starting or "
              "restarting")

    silent = FakeHttpServer([], silent=True)
    broken = FakeHttpServer([(b"SMTP ready\r\n\r\n", True)])
    try:
        with pytest.raises(ModelServerError) as error:
            client.request(ModelServer(silent.port, 1), "POST", "/", b"{}")
        assert (error.value.status, error.value.message) == \
            (504, f"the model server at 127.0.0.1:{silent.port} did not answer within 0.3 s")
        with pytest.raises(ModelServerError) as error:
            client.request(ModelServer(broken.port, 1), "GET", "/")
        assert error.value.status == 502 and "sent an invalid answer: invalid status line" in error.value.message
    finally:
        silent.close()
        broken.close()
