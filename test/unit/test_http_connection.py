"""The loop worker's HTTP/1.1 parsing (wsgi_server/http_connection.py) fed bytes directly, without a socket: what
the fuzzer (fuzz/targets/http_connection.py) found it reading unlike gunicorn's own parser."""

from __future__ import annotations

from typing import Any

from gunicorn.config import Config
from sagemaker_tfs.wsgi_server.http_connection import Connection, base_environ


class _Log:
    def error(self, message: str, *args: Any) -> None:
        raise AssertionError(message % args)


def read(data: bytes) -> tuple[list[tuple[dict[str, Any], bool]], tuple[int, str, str] | None]:
    """The complete requests `data` holds (environ, keep-alive), and the refusal if any."""
    environ = base_environ(("192.0.2.1", 1), ("127.0.0.1", 8080))
    connection = Connection(None, environ, Config())  # type: ignore[arg-type]  # (no 100 Continue is written)
    refusal = connection.feed(data, _LOG)
    return connection.ready, refusal


_LOG = _Log()


def test_the_blanks_after_a_header_value_are_not_part_of_it():
    ready, refusal = read(
        b"POST / HTTP/1.1\r\nHost: x \r\nContent-Type: text/csv \t\r\nX-A:v \r\nContent-Length: 1\r\n\r\n1"
    )
    assert refusal is None
    environ = ready[0][0]
    assert (environ["HTTP_HOST"], environ["CONTENT_TYPE"], environ["HTTP_X_A"]) == ("x", "text/csv", "v")


def test_a_target_neither_a_path_nor_a_url_is_refused_as_gunicorn_does():
    for target in (b"*p", b"*", b"http://[/b"):
        assert read(b"GET " + target + b" HTTP/1.1\r\nHost: x\r\n\r\n") == (
            [],
            (400, "Bad Request", f"Invalid HTTP request line: 'GET {target.decode()} HTTP/1.1'"),
        )


def test_a_url_as_target_is_read_for_its_path_and_query():
    ready, refusal = read(b"GET http://a/b%41?q=1#f HTTP/1.1\r\nHost: x\r\n\r\nOPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n")
    assert refusal is None
    assert [(env["REQUEST_METHOD"], env["PATH_INFO"], env["QUERY_STRING"]) for env, _ in ready] == [
        ("GET", "/bA", "q=1"),
        ("OPTIONS", "*", ""),
    ]


def test_a_chunked_body_in_http_1_0_is_refused_as_gunicorn_does():
    request = b"POST / HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    assert read(request) == ([], (400, "Bad Request", "Invalid HTTP Header: 'TRANSFER-ENCODING'"))


def test_the_trailer_of_a_chunked_body_is_not_in_the_headers():
    ready, refusal = read(
        b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\nX: y\r\n\r\n"
    )
    assert refusal is None
    environ = ready[0][0]
    assert (environ["HTTP_HOST"], "HTTP_X" in environ, environ["wsgi.input"].read()) == ("x", False, b"x")


def test_a_compressed_transfer_coding_ends_the_connection_after_the_request():
    ready, refusal = read(
        b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n"
        b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    )
    assert (refusal, [keep_alive for _, keep_alive in ready]) == (None, [False, True])


def test_a_trailer_field_that_would_change_routing_or_framing_is_refused_as_gunicorn_does():
    request = b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nhost: y\r\n\r\n"
    assert read(request) == ([], (400, "Bad Request", "Invalid HTTP header name: 'HOST'"))


def test_the_fragment_is_neither_path_nor_query():
    ready, refusal = read(b"GET /a?q=1#f?x HTTP/1.1\r\nHost: x\r\n\r\nGET /b#f?x HTTP/1.1\r\nHost: x\r\n\r\n")
    assert refusal is None
    assert [(env["PATH_INFO"], env["QUERY_STRING"]) for env, _ in ready] == [("/a", "q=1"), ("/b", "")]


def test_transfer_codings_are_read_as_gunicorn_reads_them():
    def refusal(codings: bytes) -> tuple[int, str, str] | None:
        return read(b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: " + codings + b"\r\n\r\n0\r\n\r\n")[1]

    assert refusal(b"gizp, chunked") == (501, "Not Implemented", "Unsupported transfer coding: 'gizp, chunked'")
    assert refusal(b"identity, chunked") is None
