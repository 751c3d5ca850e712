"""The direct route (nginx -> model server for plain TFS JSON, no handler script) answers exactly as the app does.

Two stacks on the same models: `direct` (the route on, the default; 2 model server instances) and `app`
(SAGEMAKER_NGINX_DIRECT_INVOCATIONS=false: every request through the app). The default handler's request table
goes through both and every answer must be the same (status, Content-Type, body); a few rows also have their exact
expected answers. Models: half_plus_three (the default, y = 0.5 x + 3), half_plus_two (versions 123 and 124, with a
regress signature).
"""

from __future__ import annotations

import http.client
import os
import re
import signal
import uuid
from collections import Counter

import clients
import metrics_pages
import model_dirs
import numpy
import paths
import ports
import processes
import pytest
import serve_stack
from direct_route_cases import APP, ATTRIBUTE_FORMS, BODIES, MODEL_SERVER
from generated_requests import Requests
from sagemaker_tfs.stack import direct_route
from stack_support import ATTRIBUTES, call, invoke, pretty_predictions

JSON = "application/json"
TFS = '{"instances": [1.0, 2.0, 5.0]}'
PREDICTIONS = pretty_predictions("3.5, 4.0, 5.5")


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("direct-route")
    model_dirs.copy_model(paths.HALF_PLUS_THREE, root, "half_plus_three")
    model_dirs.copy_model(paths.HALF_PLUS_TWO_2_VERSIONS, root, "half_plus_two")
    return root


ENV = {"SAGEMAKER_TFS_DEFAULT_MODEL_NAME": "half_plus_three"}


@pytest.fixture(scope="module")
def direct(root):
    # nginx's level warn: a body it keeps in a temp file is a line, which marks a point in its error lines
    env = {
        **ENV,
        "SAGEMAKER_METRICS": "true",
        "SAGEMAKER_METRICS_PORT": str(ports.free_port()),
        "SAGEMAKER_SERVER_TIMING": "true",
        "SAGEMAKER_TFS_NGINX_LOGLEVEL": "warn",
    }
    with serve_stack.Stack(root, env=env, instances=2) as started:
        yield started


@pytest.fixture(scope="module")
def app(root):
    with serve_stack.Stack(root, env={**ENV, "SAGEMAKER_NGINX_DIRECT_INVOCATIONS": "false"}) as started:
        yield started


# (id, body, Content-Type, other headers)
ROWS = [
    ("tfs instances", TFS, JSON, {}),
    ("tfs inputs", '{"inputs": [1.0, 2.0]}', JSON, {}),
    ("tfs examples on predict", '{"examples": [{"x": 1.0}]}', JSON, {}),
    ("charset", TFS, "application/json; charset=utf-8", {}),
    ("upper case type", TFS, "Application/JSON", {}),
    ("flat list", "[1.0, 2.0]", JSON, {}),
    ("list of lists", "[[1.0], [2.0]]", JSON, {}),
    ("scalar", "1.0", JSON, {}),
    ("json lines of tfs requests", '{"instances": [1.0]}\n{"instances": [2.0]}\n', JSON, {}),
    ("two tfs requests on a line", '{"instances": [1.0]} {"instances": [2.0]}', JSON, {}),
    ("two tfs requests with a comma", '{"instances": [1.0]},{"instances": [2.0]}', JSON, {}),
    ("tfs request then bytes", '{"instances": [1.0]}x', JSON, {}),
    ("tfs request then a brace", '{"instances": [1.0]}}', JSON, {}),
    ("nan", '{"instances": [NaN]}', JSON, {}),
    ("infinity", '{"instances": [Infinity, -Infinity]}', JSON, {}),
    ("inf", '{"instances": [Inf]}', JSON, {}),
    ("big integer", '{"instances": [123456789012345678901234567890]}', JSON, {}),
    ("duplicate key", '{"instances": [1.0], "instances": [2.0]}', JSON, {}),
    ("escaped key", '{"\\u0069nstances": [1.0]}', JSON, {}),
    ("json lines as json", "[1.0]\n[2.0]\n", JSON, {}),
    ("json lines of numbers", "1.0\n2.0\n", JSON, {}),
    ("generic object", '{"x": 1.0}', JSON, {}),
    ("byte-order mark", b"\xef\xbb\xbf" + TFS.encode(), JSON, {}),
    ("invalid json", '{"instances": [1.0,', JSON, {}),
    ("not utf-8", b'{"instances": ["\xff"]}', JSON, {}),
    ("empty body", "", JSON, {}),
    ("blank body", "  \n", JSON, {}),
    ("wrong shape", '{"instances": [[[1.0]]]}', JSON, {}),
    ("wrong type", '{"instances": ["a"]}', JSON, {}),
    ("unknown input", '{"inputs": {"y": [1.0]}}', JSON, {}),
    ("unknown signature", '{"signature_name": "nope", "instances": [1.0]}', JSON, {}),
    ("no content type", TFS, None, {}),
    ("csv", "1.0\n2.0", "text/csv", {}),
    ("jsonlines", "1.0\n[2.0]\n", "application/jsonlines", {}),
    ("jsons", "1.0\n2.0", "application/jsons", {}),
    ("npy", clients.npy_body(numpy.array([1.0, 2.0], dtype=numpy.float32)), "application/x-npy", {}),
    ("unsupported type", TFS, "text/plain", {}),
    ("gzip encoded", TFS, JSON, {"Content-Encoding": "gzip"}),
    ("accept any", TFS, JSON, {"Accept": "*/*"}),
    ("accept json", TFS, JSON, {"Accept": JSON}),
    ("accept json with q", TFS, JSON, {"Accept": "application/json;q=0.5"}),
    ("accept json q=0", TFS, JSON, {"Accept": "application/json;q=0"}),
    ("accept csv", TFS, JSON, {"Accept": "text/csv"}),
    ("accept jsonlines", TFS, JSON, {"Accept": "application/jsonlines"}),
    ("accept csv or json", TFS, JSON, {"Accept": "text/csv;q=0.1, application/json"}),
    ("accept unknown", TFS, JSON, {"Accept": "image/png"}),
    ("accept csv, flat list", "[1.0, 2.0]", JSON, {"Accept": "text/csv"}),
    ("other attribute", TFS, JSON, {ATTRIBUTES: "trace=abc"}),
    ("model version", TFS, JSON, {ATTRIBUTES: "tfs-model-version=123"}),
    ("unknown version", TFS, JSON, {ATTRIBUTES: "tfs-model-version=7"}),
    ("other model", TFS, JSON, {ATTRIBUTES: "tfs-model-name=half_plus_two,tfs-model-version=124"}),
    ("regress", '{"examples": [{"x": 1.0}]}', JSON, {ATTRIBUTES: "tfs-model-name=half_plus_two,tfs-method=regress"}),
    ("regress on default", '{"examples": [{"x": 1.0}]}', JSON, {ATTRIBUTES: "tfs-method=regress"}),
    ("invalid method", TFS, JSON, {ATTRIBUTES: "tfs-method=explain"}),
]


def _send(stack: serve_stack.Stack, body, content_type, headers) -> clients.Answer:
    return invoke(
        stack, body, content_type, X_Amzn_RequestId="rid-direct", **{k.replace("-", "_"): v for k, v in headers.items()}
    )


def _seen(answer: clients.Answer) -> tuple:
    return answer.status, answer.content_type, answer.body, answer.headers.get("x-amzn-requestid")


@pytest.mark.parametrize(
    "name, body, content_type, headers", ROWS, ids=[getattr(row, "values", row)[0] for row in ROWS]
)
def test_both_routes_give_the_same_answer(direct, app, name, body, content_type, headers):
    assert _seen(_send(direct, body, content_type, headers)) == _seen(_send(app, body, content_type, headers))


def _answered_by(answer: clients.Answer) -> str:
    """Server-Timing says who answered: the direct route's model_server and total, or the app's stages."""
    return MODEL_SERVER if DIRECT_TIMING.fullmatch(answer.headers["server-timing"]) else APP


DIRECT_TIMING = re.compile(r"model_server;dur=(\d*), total;dur=(\d+)")


@pytest.mark.parametrize("body, route", BODIES, ids=range(len(BODIES)))
def test_the_body_decides_the_route(direct, app, body, route):
    """The fast test's table (test/unit/test_direct_route_rule.py), on real model servers: a body the route takes
    is answered by the model server, unless it answers 400, which sends it to the app."""
    answer = invoke(direct, body)
    assert _answered_by(answer) == (route if answer.status not in direct_route.INVOCATIONS_TO_APP else APP)


@pytest.mark.parametrize("attributes, path", ATTRIBUTE_FORMS, ids=range(len(ATTRIBUTE_FORMS)))
def test_every_custom_attribute_form_gets_one_answer(direct, app, attributes, path):
    assert _seen(_send(direct, TFS, JSON, {ATTRIBUTES: attributes})) == _seen(
        _send(app, TFS, JSON, {ATTRIBUTES: attributes})
    )


def test_a_named_model_version_and_method_take_the_route(direct):
    named = invoke(direct, TFS, attributes="tfs-model-name=half_plus_two,tfs-model-version=124")
    assert (named.status, named.text, _answered_by(named)) == (200, pretty_predictions("2.5, 3.0, 4.5"), MODEL_SERVER)
    regress = invoke(
        direct,
        '{"signature_name": "regress_x_to_y", "examples": [{"x": 2.0}]}',
        attributes="tfs-method=regress,tfs-model-name=half_plus_two",
    )
    assert (regress.status, regress.json(), _answered_by(regress)) == (200, {"results": [3.0]}, MODEL_SERVER)


def test_a_model_the_model_servers_do_not_serve_gets_the_apps_answer(direct, app):
    """The model servers' 404 passes through: it is the answer the app gives, byte for byte."""
    missing = invoke(direct, TFS, attributes="tfs-model-name=missing")
    assert _answered_by(missing) == MODEL_SERVER
    assert _seen(missing) == _seen(
        invoke(app, TFS, attributes="tfs-model-name=missing", X_Amzn_RequestId=missing.headers["x-amzn-requestid"])
    )
    assert missing.status == 404 and missing.content_type == JSON and "missing" in missing.json()["error"]


# SAGEMAKER_TEST_SEED and SAGEMAKER_TEST_REQUESTS explore further; the default is fixed, so that a run cannot fail
# by chance.
SEED = int(os.environ.get("SAGEMAKER_TEST_SEED", "27"))
COUNT = int(os.environ.get("SAGEMAKER_TEST_REQUESTS", "2000"))


def test_generated_requests_get_one_answer_on_both_routes(direct, app):
    """Seeded random requests (test/stack/generated_requests.py): the same status, Content-Type, body and request
    id from the stack with the route and the one without; Server-Timing's total never below model_server."""
    requests = Requests(SEED)
    routes: Counter = Counter()
    differences = []
    log_before = len(direct.log())
    for number in range(COUNT):
        body, headers = requests.make()
        lines = [*headers, ("X-Amzn-RequestId", f"generated-{number}")]
        got, want = (clients.http_call(stack.port, "POST", "/invocations", body, lines) for stack in (direct, app))
        routes[_answered_by(got)] += 1
        timing = DIRECT_TIMING.fullmatch(got.headers["server-timing"])
        if timing and timing.group(1):
            assert int(timing.group(2)) >= int(timing.group(1)), (SEED, number, got.headers["server-timing"])
        if _seen(got) != _seen(want):
            differences.append((number, headers, body[:200], _seen(got), _seen(want)))
    assert not differences, f"seed {SEED}: {len(differences)} of {COUNT} differ; the first: {differences[0]}"
    assert min(routes[MODEL_SERVER], routes[APP]) >= COUNT // 10, routes  # both routes well exercised
    print(f"seed {SEED}: {COUNT} requests, answered by {dict(routes)}")
    # nginx's error lines reach the log through serve (its stderr, forwarded by a thread): the [warn] line of a
    # request sent after the others, its body too large for memory, shows that every earlier line is in the log
    marker = "/invocations?generated-requests-done"
    clients.http_call(direct.port, "POST", marker, b"x" * (7 << 20), {"Content-Type": "text/plain"})
    log = processes.wait_for_log(direct, f'request: "POST {marker} HTTP/1.1"', since=log_before)[log_before:]
    assert not re.search(r"\[(alert|crit|error)\]", log), log[:3000]


def test_exact_answers(direct):
    assert _seen(invoke(direct, TFS))[:3] == (200, JSON, PREDICTIONS.encode())
    flat = invoke(direct, "[1.0, 2.0]")
    assert (flat.status, flat.text) == (200, pretty_predictions("[3.5, 4.0]"))
    invalid = invoke(direct, '{"instances": [1.0,')
    assert (invalid.status, invalid.json()) == (
        400,
        {"error": "the request body is not valid JSON: Expecting value: line 1 column 20 (char 19)"},
    )
    shape = invoke(direct, '{"instances": ["a"]}')  # the model server's answer, as it wrote it
    assert (shape.status, shape.content_type, shape.text) == (
        400,
        JSON,
        (
            '{\n    "error": "Failed to process element: 0 of \'instances\' list. Error: INVALID_ARGUMENT: JSON Value: '
            '\\"a\\" Type: String is not of expected type: float"\n}'
        ),
    )
    csv = invoke(direct, TFS, Accept="text/csv")
    assert (csv.status, csv.content_type, csv.text) == (200, "text/csv", "3.5\n4.0\n5.5")


def test_every_answer_carries_a_request_id(direct):
    """The client's, else one nginx makes (a version 4 UUID's layout, as the app's), on the direct route and on its
    fallback to the app; each new, on new connections and on one kept alive."""
    assert invoke(direct, TFS, X_Amzn_RequestId="mine").headers["x-amzn-requestid"] == "mine"
    assert invoke(direct, "[1.0]", X_Amzn_RequestId="mine-too").headers["x-amzn-requestid"] == "mine-too"
    made = [invoke(direct, body).headers["x-amzn-requestid"] for body in (TFS, TFS, "[1.0]")]
    kept = http.client.HTTPConnection("127.0.0.1", direct.port, timeout=30)
    for _ in range(3):
        kept.request("POST", "/invocations", TFS, {"Content-Type": JSON})
        answer = kept.getresponse()
        assert (answer.status, answer.read().decode()) == (200, PREDICTIONS)
        made.append(answer.headers["x-amzn-requestid"])
    kept.close()
    assert len(set(made)) == 6
    for rid in made:
        parsed = uuid.UUID(rid)
        assert (str(parsed), parsed.version, parsed.variant) == (rid, 4, uuid.RFC_4122)
    fallback = invoke(direct, "[2.0]")
    rid = fallback.headers["x-amzn-requestid"]
    # nginx's access line (written once the answer is sent) and the app agree on the id
    log = processes.wait_for_log(direct, f" id={rid}\n")
    [line] = [line for line in log.splitlines() if line.endswith(f" id={rid}")]
    assert line.startswith('127.0.0.1 "POST /invocations HTTP/1.1" 200 '), line


def test_the_internal_location_is_not_reachable(direct):
    answer = call(direct.url + "/__body_read", TFS, method="POST", Content_Type=JSON)
    assert (answer.status, answer.json()) == (404, {"error": "Not Found"})


def test_plain_tfs_json_does_not_go_through_the_app(direct, app):
    """With every gunicorn process stopped, the direct route still answers plain TFS JSON."""
    group = direct.pid_of("gunicorn-supervised")
    os.killpg(group, signal.SIGSTOP)
    try:
        answer = invoke(direct, TFS)
        assert (answer.status, answer.text) == (200, PREDICTIONS)
    finally:
        os.killpg(group, signal.SIGCONT)
    assert "location @direct" not in (app.runtime_dir / "nginx.conf").read_text()


def test_a_large_body_falls_back_whole(direct):
    """A 10 MB body that is not a TFS request reaches the app whole (nginx keeps it in a temp file)."""
    body = "[" + ", ".join(["1.0"] * 2_500_000) + "]"
    assert len(body) > 10_000_000
    answer = invoke(direct, body)
    assert answer.status == 200
    assert answer.text.count("3.5") == 2_500_000


def test_metrics_count_each_route(root):
    """serve's page counts the direct route's requests (nginx's log datagrams) apart from the app's. On a stack of
    its own, whose counts start at 0: no earlier test's request can still be on its way to the page."""
    port = ports.free_port()
    with serve_stack.Stack(
        root, env={**ENV, "SAGEMAKER_METRICS": "true", "SAGEMAKER_METRICS_PORT": str(port)}
    ) as stack:
        for _ in range(3):
            assert invoke(stack, TFS).status == 200
        assert invoke(stack, "[1.0]").status == 200  # falls back: the app answers it
        # the workers write their totals every 0.5 s; nginx logs a request once it is answered
        counts = "sagemaker_tfs_direct_request_duration_seconds_count", "sagemaker_tfs_request_duration_seconds_count"
        metrics_pages.counted_page(
            port,
            {
                metrics_pages.metric(counts[0], route="/invocations", status="200"): 3,  # direct
                metrics_pages.metric(counts[1], route="/invocations", status="200"): 1,
            },
        )  # the app


def test_server_timing_on_the_direct_route(direct):
    answer = invoke(direct, TFS)
    assert re.fullmatch(r"model_server;dur=\d+, total;dur=\d+", answer.headers["server-timing"])
    fallback = invoke(direct, "[1.0]")  # the app's header, with its stages
    assert "default_input_handler;dur=" in fallback.headers["server-timing"]


def test_model_servers_down_both_routes_answer_as_the_app(direct, app):
    """Killed model servers (serve restarts them): both routes give the app's JSON error, naming the address."""
    answers = []
    for stack in (direct, app):
        low = int(stack.env["SAGEMAKER_SAFE_PORT_RANGE"].split("-")[0])
        pids = [stack.pid_of(f"tfs-{i}") for i in range(len(stack.model_server_ports) // 2)]
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        processes.wait_for(
            lambda low=low, pids=pids: not any(ports.port_is_open(low + 2 * i + 1) for i in range(len(pids))),
            what="the model servers' REST ports to close",
        )
        answer = invoke(stack, TFS)
        answers.append(
            (answer.status, answer.content_type, re.sub(rb"127\.0\.0\.1:\d+", b"127.0.0.1:PORT", answer.body))
        )
    for stack in (direct, app):
        stack.wait_until(stack.ready, timeout=180, what="answering /ping with 200 again")
    assert answers[0] == answers[1]
    assert answers[0][0] in (502, 503) and answers[0][1] == JSON


def _twice_on_one_connection(port: int, body: str, headers: dict[str, str]) -> list[tuple[int, str | None, bytes]]:
    """The body POSTed twice on one keep-alive connection: (status, Connection header, body) of each answer;
    http.client raises on the second request if the server closed the connection after the first unannounced."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    answers = []
    try:
        for _ in range(2):
            connection.request("POST", "/invocations", body, headers)
            response = connection.getresponse()
            answers.append((response.status, response.getheader("Connection"), response.read()))
    finally:
        connection.close()
    return answers


@pytest.fixture(scope="module")
def untouched(root):
    """A stack with the route whose model servers no test kills: after a model server restarts, each nginx worker's
    cached connections to it fail once (a 502, which hands the request to the app with the connection kept)."""
    with serve_stack.Stack(root, env=ENV, instances=2) as started:
        yield started


@pytest.mark.parametrize(
    "body, attributes, status, closes",
    [
        ('{"instances": [1.0, "x"]}', "", 400, True),
        ('{"instances": [1.0], "inputs": [2.0]}', "", 400, True),
        ('{"instances": [1.0,', "", 400, False),  # the route refuses the body: the app answers at once
        (TFS, "tfs-model-version=7", 404, False),
        (TFS, "", 200, False),
    ],
    ids=["a model server 400", "two tfs keys", "invalid json", "a model server 404", "an answer"],
)
def test_the_connection_after_a_model_server_error(untouched, app, body, attributes, status, closes):
    """The same answers on both routes. The connection differs in one case, documented (docs/ARCHITECTURE.md, "The
    direct route"): a model server's 400 goes to the app, and nginx ends the client's connection after an error it
    intercepts (http.client then opens a new one); the app's stack keeps it. Every other error passes through."""
    headers = {"Content-Type": JSON, **({ATTRIBUTES: attributes} if attributes else {})}
    got, want = (_twice_on_one_connection(stack.port, body, headers) for stack in (untouched, app))
    assert [(code, connection) for code, connection, _ in got] == [(status, "close" if closes else "keep-alive")] * 2
    assert [(code, connection) for code, connection, _ in want] == [(status, "keep-alive")] * 2
    assert [(code, answer) for code, _, answer in got] == [(code, answer) for code, _, answer in want]
