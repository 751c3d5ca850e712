"""The invocation routes are answered without falcon's request and response objects (app/routes.App,
web/middleware.answer_directly). Each request here goes to one app twice, by that path and by falcon's own
(falcon.App.__call__, the resources' on_post): status, headers, body and log lines must be the same, for answers,
every kind of error a script can raise, the timings of SAGEMAKER_SERVER_TIMING and the multi-model routes (real
model server)."""

from __future__ import annotations

import io
import logging
import os
import time
import uuid
from collections.abc import Callable

import falcon
import falcon.testing
import pytest
from app_harness import multi_model_app
from app_support import OTHER_MODEL, write_model_dir
from sagemaker_tfs.shared.wsgi_call import whole_answer
from sagemaker_tfs.web import middleware

STEERED_PAIR = """\
import falcon


def input_handler(data, context):
    case = context.custom_attributes or "ok"
    if case == "input raises":
        raise ValueError("no such input")
    if case == "model error":
        return '{"instances": ["a"]}'
    return data.read()


def output_handler(response, context):
    case = context.custom_attributes or "ok"
    if case == "status":
        return "made", "text/plain; charset=utf-8", 207
    if case == "http error":
        raise falcon.HTTPError(falcon.HTTP_429, title="Slow down", description="too many",
                               headers={"Retry-After": "5"})
    if case == "http error, header pairs":
        raise falcon.HTTPError(falcon.HTTP_503, headers=[("Retry-After", "1"), ("X-Shed", "load")])
    if case == "http status":
        raise falcon.HTTPStatus(falcon.HTTP_202, headers={"X-Queued": "yes"}, text="queued")
    if case == "bad return":
        return {1, 2}  # a set cannot be sent
    if case == "model error":
        response.raise_for_status()
    return response.content, "application/json"
"""
CASES = [
    "ok",
    "status",
    "input raises",
    "model error",
    "http error",
    "http error, header pairs",
    "http status",
    "bad return",
]
REQUEST_ID = "11111111-2222-4333-8444-555555555555"


def both_ways(
    app: falcon.App, log: Callable[[], str], path: str, headers: dict[str, str], body: str = '{"instances": [1.0, 2.0]}'
):
    """(direct answer, falcon's answer), each (status, headers, body, log lines written meanwhile)."""
    answers = []
    for wsgi in (app, lambda env, start_response: falcon.App.__call__(app, env, start_response)):
        logged = len(log())
        environ = falcon.testing.create_environ(
            path,
            method="POST",
            body=body,
            headers={"Content-Type": "application/json", "X-Amzn-RequestId": REQUEST_ID, **headers},
        )
        status, answer_headers, content = whole_answer(wsgi, environ)  # the headers as sent, in their order
        answers.append((status, answer_headers, content, records(log()[logged:])))
    return answers


def records(log: str) -> list[str]:
    """The log's records and the last line of each traceback (the frames above differ: the paths differ)."""
    lines = log.splitlines()
    return [
        line
        for at, line in enumerate(lines)
        if not line.startswith((" ", "Traceback")) and not (at + 1 < len(lines) and lines[at + 1].startswith(" "))
    ]


def timing_free(answer):
    """The answer without Server-Timing's durations (two requests never take the same time)."""
    status, headers, body, log = answer
    return (
        status,
        [
            (name, [stage.partition(";")[0] for stage in value.split(", ")] if name == "server-timing" else value)
            for name, value in headers
        ],
        body,
        log,
    )


@pytest.mark.parametrize("timed", [False, True], ids=["plain", "server timing"])
def test_every_answer_of_a_pair_is_falcons(make_app, tmp_path, monkeypatch, timed):
    env = {"SAGEMAKER_SERVER_TIMING": "true"} if timed else {}
    app = make_app(write_model_dir(tmp_path, STEERED_PAIR), env=env)
    direct_answers = []
    answer_directly = middleware.answer_directly
    monkeypatch.setattr(middleware, "answer_directly", lambda *args: direct_answers.append(1) or answer_directly(*args))
    seen = set()
    for case in CASES:
        direct, by_falcon = both_ways(app.app, app.log, "/invocations", {"X-Amzn-SageMaker-Custom-Attributes": case})
        assert timing_free(direct) == timing_free(by_falcon), case
        assert direct[1][0] == ("x-amzn-requestid", REQUEST_ID) and direct[2], case
        assert ("server-timing" in dict(direct[1])) is timed, case
        seen.add(direct[0])
    assert seen == {
        "200 OK",
        "207 Multi-Status",
        "500 Internal Server Error",
        "400 Bad Request",
        "429 Too Many Requests",
        "503 Service Unavailable",
        "202 Accepted",
    }
    assert len(direct_answers) == len(CASES)  # one of the two ways was the direct one


def test_a_new_request_id_is_made_and_sent_by_both_paths(make_app, tmp_path):
    app = make_app(write_model_dir(tmp_path, STEERED_PAIR))
    direct = falcon.testing.TestClient(app.app).simulate_post(
        "/invocations", body='{"instances": [1.0]}', headers={"X-Amzn-RequestId": "bad\x01id"}
    )
    assert direct.status_code == 200 and direct.headers["x-amzn-requestid"] != "bad\x01id"
    assert len(direct.headers["x-amzn-requestid"]) == 36


def test_other_methods_and_paths_stay_falcons(make_app, tmp_path):
    app = make_app(write_model_dir(tmp_path, STEERED_PAIR))
    assert app.call("GET", "/invocations").status == 405
    assert app.call("GET", "/invocations").headers["allow"] == "POST, OPTIONS"
    assert app.call("POST", "/invocation").status == 404


def test_multi_model_answers_are_falcons(model_server, tmp_path):
    log = io.StringIO()
    handler = logging.StreamHandler(log)
    logging.getLogger("sagemaker_tfs").addHandler(handler)
    try:
        with multi_model_app(model_server, tmp_path) as (app, publisher):
            publisher.publish(
                [{"name": OTHER_MODEL, "load_id": 1, "state": "ready", "url": "/nowhere", "script": None}],
                time.monotonic() + 10,
            )
            target = {"X-Amzn-SageMaker-Target-Model": "a/model.tar.gz"}
            seen = set()
            for path, headers, body in [
                (f"/models/{OTHER_MODEL}/invoke", target, '{"instances": [1.0, 2.0]}'),
                (f"/models/{OTHER_MODEL}/invoke", {}, '{"instances": ["a"]}'),
                ("/models/nothing/invoke", target, "{}"),
                ("/models/caf\u00e9/invoke", {}, "{}"),
                ("/invocations", target, "{}"),
            ]:
                direct, by_falcon = both_ways(app, log.getvalue, path, headers, body)
                assert direct == by_falcon, path
                seen.add(direct[0])
            assert direct[3] == [
                f"request {REQUEST_ID}: POST /invocations, target model a/model.tar.gz",
                f"request {REQUEST_ID}: 400 Invocation request does not contain model name.",
            ]
            assert seen == {"200 OK", "400 Bad Request", "404 Not Found"}
    finally:
        logging.getLogger("sagemaker_tfs").removeHandler(handler)


def test_new_request_ids_are_version_4_uuids_unique_in_the_process_and_redrawn_in_a_forked_child():
    ids = [middleware.new_request_id() for _ in range(1000)]
    assert len(set(ids)) == len(ids)
    for rid in ids[:10]:
        parsed = uuid.UUID(rid)
        assert (str(parsed), parsed.version, parsed.variant) == (rid, 4, uuid.RFC_4122)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # a gunicorn worker is such a child: its ids must not follow its siblings'
        os.write(write, middleware.new_request_id().encode())
        os._exit(0)
    os.waitpid(child, 0)
    theirs, ours = os.read(read, 64).decode(), middleware.new_request_id()
    os.close(read)
    os.close(write)
    assert uuid.UUID(theirs).version == 4 and theirs[:24] != ours[:24]
