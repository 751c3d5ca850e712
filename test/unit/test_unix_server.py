"""web/unix_server.py, the server of serve's /models API and runtime API: an answer given before the body is read
reaches the client (issue 49's random traffic found nginx answering 503 instead, for a 1.6 MB InvokeEndpointAsync
body the runtime API refused unread)."""

from __future__ import annotations

import socket
from pathlib import Path

from sagemaker_tfs.web.unix_server import UnixAppServer


def refuse_unread(environ: dict, start_response) -> list[bytes]:  # a WSGI app that never reads the body
    body = b'{"error": "refused"}'
    start_response("400 Bad Request", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def test_an_answer_given_before_a_large_body_is_read_reaches_the_client(tmp_path: Path) -> None:
    server = UnixAppServer(tmp_path / "app.sock", refuse_unread, "test-app")
    server.start()
    try:
        body = b"x" * (4 << 20)  # far beyond the socket's buffers: most of it is sent after the answer
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(30)
            sock.connect(str(tmp_path / "app.sock"))
            sock.sendall(b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            received = b""
            while chunk := sock.recv(65536):
                received += chunk
    finally:
        server.shutdown()
        server.server_close()
    assert received.split(b"\r\n", 1)[0] == b"HTTP/1.0 400 Bad Request"
    assert received.endswith(b'\r\n\r\n{"error": "refused"}')
