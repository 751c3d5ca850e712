"""A script's answer sent as it makes it (README, "Return values and errors"): a handler that returns a generator gets
each part to the client through the loop worker and nginx as it yields it, chunked, buffered nowhere; what it raises
before its first part is the ordinary error answer, after it the answer ends without its last chunk; a client that
goes away closes the generator, and the worker goes on."""

from __future__ import annotations

import http.client
import json
import time
from pathlib import Path

import clients
import processes
import pytest
import serve_stack
from stack_support import model_dir

SCRIPT = """
    import json
    import os
    import time

    def _wait_for(path):
        deadline = time.monotonic() + 30
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.01)

    def handler(data, context):
        request = json.loads(data.read())
        kind = request["kind"]
        if kind == "whole":
            return "whole", "text/plain"
        if kind == "large":  # a part larger than one chunk's write, between small and empty ones
            return iter([b"a", b"", b"x" * 100_000, "z"]), "text/plain"
        if kind == "not bytes":
            return iter([1.5, b"never sent"]), "text/plain"
        if kind == "before":
            def parts():
                raise RuntimeError("no first part")
                yield b""
            return parts(), "text/plain"

        def parts():
            try:
                yield b"first\\n"
                if kind == "after":
                    raise RuntimeError("broken after the first part")
                if kind == "endless":
                    while True:
                        time.sleep(0.01)
                        yield b"more\\n"
                _wait_for(request["flag"])
                yield "second\\n"
            finally:
                with open(request["closed"], "w") as marker:
                    marker.write("closed")

        return parts(), "text/x-parts"
"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with serve_stack.Stack(model_dir(tmp_path_factory.mktemp("streaming"), SCRIPT)) as running:
        yield running


def _post(stack, request: dict) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    connection = http.client.HTTPConnection("127.0.0.1", stack.port, timeout=10)
    connection.request("POST", "/invocations", json.dumps(request), {"Content-Type": "application/json"})
    return connection, connection.getresponse()


def _wait_for_file(path: Path) -> str:
    deadline = time.monotonic() + 30
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return path.read_text()


def test_each_part_reaches_the_client_as_the_script_yields_it(stack, tmp_path):
    flag, closed = tmp_path / "flag", tmp_path / "closed"
    connection, answer = _post(stack, {"kind": "wait", "flag": str(flag), "closed": str(closed)})
    assert answer.status == 200
    assert answer.getheader("Content-Type") == "text/x-parts"
    assert answer.getheader("Transfer-Encoding") == "chunked"
    assert answer.getheader("Content-Length") is None
    assert answer.getheader("X-Accel-Buffering") is None  # nginx's own instruction, not passed on
    # the first part arrives while the script waits for the test before yielding the second (within the 10 s
    # timeout: buffered anywhere, it would come only with the second, after the script's 30 s)
    assert answer.read(6) == b"first\n"
    assert not closed.exists()
    flag.touch()
    assert answer.read() == b"second\n"
    assert _wait_for_file(closed) == "closed"
    # the connection is kept and serves the next request whole
    connection.request("POST", "/invocations", '{"kind": "whole"}', {"Content-Type": "application/json"})
    again = connection.getresponse()
    assert (again.status, again.getheader("Content-Length"), again.read()) == (200, "5", b"whole")
    connection.close()


def test_parts_of_every_size_arrive_whole_and_in_order(stack):
    connection, answer = _post(stack, {"kind": "large"})
    assert (answer.status, answer.getheader("Transfer-Encoding")) == (200, "chunked")
    assert answer.read() == b"a" + b"x" * 100_000 + b"z"
    connection.close()


@pytest.mark.parametrize(
    "kind, error",
    [
        ("before", "no first part"),
        ("not bytes", "handler's iterator gave 1.5: each part must be bytes or str"),
    ],
)
def test_an_error_before_the_first_part_is_the_ordinary_error_answer(stack, kind, error):
    connection, answer = _post(stack, {"kind": kind})
    body = answer.read()
    connection.close()
    assert (answer.status, answer.getheader("Content-Type"), json.loads(body)) == (
        500,
        "application/json",
        {"error": error},
    )
    assert answer.getheader("Content-Length") == str(len(body))


def test_an_error_after_the_first_part_ends_the_answer_unfinished_and_is_logged(stack, tmp_path):
    connection, answer = _post(stack, {"kind": "after", "closed": str(tmp_path / "closed")})
    rid = answer.getheader("X-Amzn-RequestId")
    assert answer.read(6) == b"first\n"
    with pytest.raises(http.client.IncompleteRead):
        answer.read()
    connection.close()
    log = processes.wait_for_log(
        stack, f"request {rid}: the answer's stream failed after its first part; it ends unfinished"
    )
    assert "RuntimeError: broken after the first part" in log
    assert clients.http_status(stack.url + "/ping") == 200


def test_a_client_that_goes_away_closes_the_generator_and_the_worker_goes_on(stack, tmp_path):
    closed = tmp_path / "closed"
    connection, answer = _post(stack, {"kind": "endless", "closed": str(closed)})
    rid = answer.getheader("X-Amzn-RequestId")
    assert answer.read(6) == b"first\n"
    connection.close()
    assert _wait_for_file(closed) == "closed"  # the generator's finally ran: it was closed
    processes.wait_for_log(
        stack, f"request {rid}: the client went away before the answer's last part; the script's iterator is closed"
    )
    for _ in range(4):  # every worker still answers
        again_connection, again = _post(stack, {"kind": "before"})
        assert again.status == 500
        again.read()
        again_connection.close()
