"""A script's stateful sessions and its streamed answers, read by boto3's real clients through the local runtime API
(README, "Sessions" and "Answers that stream"): InvokeEndpointWithResponseStream forwards each part as the container
writes it, and ends a stream the container breaks or lets run over its time with a ModelStreamError event; a session
opened on NEW_SESSION is answered as NewSessionId, every request naming it reaches the worker that opened it, and the
runtime API refuses a session that is not open."""

from __future__ import annotations

import http.client
import json
import re
import socket
import time
from pathlib import Path

import clients
import processes
import pytest
import serve_stack
from botocore.exceptions import EventStreamError
from sagemaker_tfs.runtime_api.realtime import STREAM_BROKEN, STREAM_TIMED_OUT
from sagemaker_tfs.shared import runtime_dir
from stack_support import invoke, model_dir

SCRIPT = """
    import json
    import os
    import time

    STATE = {}  # each session's values, in the memory of the worker that opened it

    def _flagged(path):
        deadline = time.monotonic() + 10
        while not os.path.exists(path):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def _answer(value):
        return json.dumps({"pid": os.getpid(), **value}), "application/json"

    def handler(data, context):
        request = json.loads(data.read())
        kind = request["kind"]
        if kind == "open":
            session = context.open_session(request.get("expires_in"))
            STATE[session] = []
            return _answer({"session": session})
        if kind == "add":
            values = STATE[context.session_id]
            values.append(request["value"])
            return _answer({"values": values})
        if kind == "close":
            context.close_session()
            return _answer({"closed": STATE.pop(context.session_id)})
        if kind == "which":
            return _answer({"session": context.session_id})

        def parts():
            try:
                yield b"first\\n"
                if kind == "broken":
                    raise RuntimeError("broken after the first part")
                if kind == "gap":
                    time.sleep(request["seconds"])
                while kind == "endless":
                    time.sleep(0.1)
                    yield b"more\\n"
                yield b"second\\n" if _flagged(request["flag"]) else b"never flagged\\n"
            finally:
                if "closed" in request:
                    with open(request["closed"], "w") as marker:
                        marker.write("closed")

        return parts(), "text/x-parts"
"""
ON = {
    "SAGEMAKER_LOCAL_RUNTIME_API": "true",
    "SAGEMAKER_LOCAL_RUNTIME_TIMEOUT_SECONDS": "2",
    "SAGEMAKER_LOCAL_RUNTIME_STREAM_TIMEOUT_SECONDS": "4",
    "SAGEMAKER_GUNICORN_WORKERS": "2",
}
NEW_SESSION_ID = re.compile(r"([0-9]+-[0-9a-f]{32}); Expires=([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z)")


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with serve_stack.Stack(model_dir(tmp_path_factory.mktemp("sessions"), SCRIPT), env=ON) as running:
        yield running


def _stream(stack, request: dict, **members):
    answer = clients.runtime_client(stack.port).invoke_endpoint_with_response_stream(
        EndpointName="e", Body=json.dumps(request), ContentType="application/json", **members
    )
    return answer, iter(answer["Body"])


def _part(events) -> bytes:
    event = next(events)
    assert list(event) == ["PayloadPart"], event
    return event["PayloadPart"]["Bytes"]


def test_a_streamed_answer_reaches_boto3_part_by_part_as_the_container_writes_it(stack, tmp_path):
    flag = tmp_path / "flag"
    answer, events = _stream(stack, {"kind": "parts", "flag": str(flag)}, Accept="text/x-parts")
    assert answer["ContentType"] == "text/x-parts"
    assert answer["InvokedProductionVariant"] == "AllTraffic"
    assert _part(events) == b"first\n"  # the script waits for the flag before its second part: sent without it
    flag.touch()
    assert _part(events) == b"second\n"
    assert list(events) == []


def test_a_stream_the_container_breaks_ends_with_a_model_stream_error_event(stack):
    _, events = _stream(stack, {"kind": "broken"})
    assert _part(events) == b"first\n"
    with pytest.raises(EventStreamError) as raised:
        next(events)
    assert raised.value.response["Error"] == {"Code": "ModelStreamError", "Message": STREAM_BROKEN}


def test_a_gap_between_parts_longer_than_the_timeout_ends_the_stream_with_a_model_stream_error(stack, tmp_path):
    closed = tmp_path / "closed"
    _, events = _stream(stack, {"kind": "gap", "seconds": 6, "flag": "none", "closed": str(closed)})
    assert _part(events) == b"first\n"
    with pytest.raises(EventStreamError) as raised:
        next(events)
    assert raised.value.response["Error"] == {"Code": "ModelStreamError", "Message": STREAM_TIMED_OUT}
    processes.wait_for(closed.exists, what="the script's generator closed after the runtime API left")


def test_a_stream_longer_than_its_limit_ends_with_a_model_stream_error_and_the_script_s_generator_closed(
    stack, tmp_path
):
    closed = tmp_path / "closed"
    _, events = _stream(stack, {"kind": "endless", "closed": str(closed)})
    parts = []
    with pytest.raises(EventStreamError) as raised:
        while True:
            parts.append(_part(events))
    assert raised.value.response["Error"] == {"Code": "ModelStreamError", "Message": STREAM_TIMED_OUT}
    text = b"".join(parts)
    assert text.startswith(b"first\nmore\n") and set(text.splitlines()[1:]) == {b"more"}
    processes.wait_for(closed.exists, what="the script's generator closed after the runtime API left")


def _opened(stack, **request) -> tuple[str, str, int]:
    """(session id, its expiry, the opener's pid) of a session opened through InvokeEndpoint."""
    answer = clients.runtime_client(stack.port).invoke_endpoint(
        EndpointName="e", Body=json.dumps({"kind": "open", **request}), SessionId="NEW_SESSION"
    )
    body = json.loads(answer["Body"].read())
    found = NEW_SESSION_ID.fullmatch(answer["NewSessionId"])
    assert found is not None, answer["NewSessionId"]
    assert found[1] == body["session"]
    assert "ClosedSessionId" not in answer
    return found[1], found[2], body["pid"]


def _invoke(stack, session: str, request: dict) -> dict:
    answer = clients.runtime_client(stack.port).invoke_endpoint(
        EndpointName="e", Body=json.dumps(request), SessionId=session
    )
    return {
        **json.loads(answer["Body"].read()),
        **{k: answer[k] for k in ("NewSessionId", "ClosedSessionId") if k in answer},
    }


def test_a_session_is_opened_used_by_every_route_in_its_worker_and_closed(stack):
    session, _, pid = _opened(stack)
    for value in range(1, 6):
        assert _invoke(stack, session, {"kind": "add", "value": value}) == {
            "pid": pid,
            "values": list(range(1, value + 1)),
        }
    answer, events = _stream(stack, {"kind": "which"}, SessionId=session)
    assert json.loads(_part(events)) == {"pid": pid, "session": session}
    direct = invoke(stack, json.dumps({"kind": "add", "value": 6}), X_Amzn_SageMaker_Session_Id=session)
    assert (direct.status, json.loads(direct.body)) == (200, {"pid": pid, "values": [1, 2, 3, 4, 5, 6]})
    assert _invoke(stack, session, {"kind": "close"}) == {
        "pid": pid,
        "closed": [1, 2, 3, 4, 5, 6],
        "ClosedSessionId": session,
    }
    error = clients.client_error(lambda: _invoke(stack, session, {"kind": "which"}))
    assert (error["Error"]["Code"], error["Error"]["Message"]) == (
        "ValidationError",
        f"SessionId {session} is not an open session of endpoint e: its container never opened it, or closed it",
    )


def test_an_expired_or_unknown_session_is_a_validation_error(stack):
    session, expires, _ = _opened(stack, expires_in=1)
    processes.wait_for(
        lambda: time.time() > time.mktime(time.strptime(expires, "%Y-%m-%dT%H:%M:%SZ")) - time.timezone + 0.5
    )
    expired = clients.client_error(lambda: _invoke(stack, session, {"kind": "which"}))
    assert (expired["Error"]["Code"], expired["Error"]["Message"]) == (
        "ValidationError",
        f"SessionId {session} is not an open session of endpoint e: it expired at {expires}",
    )
    unknown = clients.client_error(
        lambda: clients.runtime_client(stack.port).invoke_endpoint_with_response_stream(
            EndpointName="e", Body=b"{}", SessionId="123-abc"
        )
    )
    assert unknown["Error"]["Message"] == (
        "SessionId 123-abc is not an open session of endpoint e: its container never opened it, or closed it"
    )


def test_a_script_opens_a_session_only_when_the_request_asks_for_one(stack):
    answer = invoke(stack, json.dumps({"kind": "open"}))
    assert answer.status == 500
    assert json.loads(answer.body) == {
        "error": "context.open_session(): the request must ask for a new session (SessionId NEW_SESSION, the "
        "X-Amzn-SageMaker-Session-Id header), not None"
    }
    assert "x-amzn-sagemaker-new-session-id" not in answer.headers


def _open_in(stack, pid: int) -> str:
    """A session opened by the worker `pid` itself, on its own socket."""
    body = json.dumps({"kind": "open"}).encode()
    connection = http.client.HTTPConnection("localhost")
    connection.sock = socket.socket(socket.AF_UNIX)
    connection.sock.connect(str(runtime_dir.worker_socket(Path(stack.runtime_dir), pid)))
    connection.request(
        "POST", "/invocations", body, {"Content-Type": "application/json", "X-Amzn-SageMaker-Session-Id": "NEW_SESSION"}
    )
    answer = connection.getresponse()
    assert answer.status == 200
    opened = json.loads(answer.read())
    connection.close()
    assert opened["pid"] == pid
    return opened["session"]


def test_each_worker_s_sessions_reach_it_whichever_worker_nginx_would_pick(stack):
    pids = sorted(
        int(path.name[len("worker-") : -len(".sock")]) for path in Path(stack.runtime_dir).glob("worker-*.sock")
    )
    assert len(pids) == 2
    sessions = {pid: _open_in(stack, pid) for pid in pids}
    for value in range(1, 4):
        for pid, session in sessions.items():  # one keep-alive connection of nginx's would reach one worker only
            answer = invoke(stack, json.dumps({"kind": "add", "value": value}), X_Amzn_SageMaker_Session_Id=session)
            assert (answer.status, json.loads(answer.body)) == (200, {"pid": pid, "values": list(range(1, value + 1))})
