"""Every answer of every route, exactly: status line, headers as sent and in their order, body, and the log lines
written meanwhile (web/app.py builds every answer in one place). The apps are the real ones, in-process: the
worker's (single-model with a pair script, a toolkit script, multi-model, the local runtime API), the management
routes' (registry/management.py, with a real Owner) and the runtime API's (runtime_api/server.py), against the
real model server."""

from __future__ import annotations

import calendar
import contextlib
import io
import json
import logging
import os
import re
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import falcon.testing
from app_harness import InProcessApp, multi_model_app
from app_support import OTHER_MODEL, write_model_dir
from sagemaker_tfs.config import Settings
from sagemaker_tfs.registry.management import create_app as management_app
from sagemaker_tfs.registry.owner import Owner
from sagemaker_tfs.registry.publication import Publisher
from sagemaker_tfs.runtime_api.server import RuntimeApi
from sagemaker_tfs.shared.metrics_files import APP_FILE, read_json
from sagemaker_tfs.shared.metrics_files import folder as metrics_folder
from sagemaker_tfs.shared.wsgi_call import whole_answer
from sagemaker_tfs.web import request

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
    if case == "http status, typed":
        raise falcon.HTTPStatus(falcon.HTTP_200, headers={"Content-Type": "text/plain", "Content-Length": "99"},
                                text="typed")
    if case == "bad return":
        return {1, 2}  # a set cannot be sent
    if case == "model error":
        response.raise_for_status()
    return response.content, "application/json"
"""
TOOLKIT_SCRIPT = """\
from sagemaker_tfs import HandlerError


def model_fn(model_dir):
    return "the model"


def transform_fn(model, data, content_type, accept):
    if data == "refuse":
        raise HandlerError(415, "not that")
    return f"{model}: {data}", "text/plain"
"""
REQUEST_ID = "11111111-2222-4333-8444-555555555555"
BODY = '{"instances": [1.0, 2.0]}'
JSON = "application/json"
TIMED = re.compile(r"dur=[0-9]+\.[0-9]{3}")

Exchange = tuple[str, list[tuple[str, str]], bytes, list[str]]


def exchange(
    app: Callable,
    log: Callable[[], str],
    method: str,
    path: str,
    body: str | bytes = BODY,
    headers: dict[str, str] | None = None,
    query: str | None = None,
) -> Exchange:
    """(status line, headers as sent in their order, body, log records written meanwhile) of one request with
    this test's request id; Server-Timing's durations as `dur=*` (no two requests take the same time)."""
    logged = len(log())
    environ = falcon.testing.create_environ(
        path,
        query_string=query,
        method=method,
        body=body,
        headers={"Content-Type": JSON, "X-Amzn-RequestId": REQUEST_ID, **(headers or {})},
    )
    status, sent, content = whole_answer(app, environ)
    return status, [(name, TIMED.sub("dur=*", value)) for name, value in sent], content, records(log()[logged:])


def records(log: str) -> list[str]:
    """The log's records and the last line of each traceback (the frames above name paths of this machine)."""
    lines = log.splitlines()
    return [
        line
        for at, line in enumerate(lines)
        if not line.startswith((" ", "Traceback")) and not (at + 1 < len(lines) and lines[at + 1].startswith(" "))
    ]


@contextlib.contextmanager
def captured_log() -> Iterator[Callable[[], str]]:
    """What the package logs meanwhile (INFO and above), as InProcessApp records it."""
    text = io.StringIO()
    handler = logging.StreamHandler(text)
    handler.setFormatter(logging.Formatter("[%(levelname)s] %(name)s: %(message)s"))
    logger = logging.getLogger("sagemaker_tfs")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield text.getvalue
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def rid(*headers: tuple[str, str]) -> list[tuple[str, str]]:
    """The headers of an answer to this test's requests: the request id, then `headers`."""
    return [("x-amzn-requestid", REQUEST_ID), *headers]


def json_error(message: str) -> bytes:
    return json.dumps({"error": message}, ensure_ascii=False).encode()


R = f"request {REQUEST_ID}"
PREDICTIONS = b'{\n    "predictions": [3.5, 4.0\n    ]\n}'  # the model server's layout, passed on
NOT_ALLOWED = b'{"error": "Method Not Allowed"}'
NOT_FOUND = b'{"error": "Not Found"}'
MODEL_ERROR = (
    b'{\n    "error": "Failed to process element: 0 of \'instances\' list. Error: INVALID_ARGUMENT: JSON Value: '
    b'\\"a\\" Type: String is not of expected type: float"\n}'
)
BAD_RETURN = (
    "output_handler returned {1, 2}, which cannot be sent: return (body, content_type), (body, content_type, status) "
    "or a body (str, bytes, dict or list)"
)
PAIR_CASES = (
    "ok",
    "status",
    "input raises",
    "model error",
    "http error",
    "http error, header pairs",
    "http status",
    "http status, typed",
    "bad return",
)
OTHER_ROUTES = (
    ("GET", "/ping"),
    ("HEAD", "/ping"),
    ("OPTIONS", "/ping"),
    ("POST", "/ping"),
    ("GET", "/invocations"),
    ("HEAD", "/invocations"),
    ("FOO", "/invocations"),
    ("POST", "/invocation"),
    ("GET", "/caf\u00e9"),
    ("GET", "/execution-parameters"),
)


def pair_answers(port: int) -> dict[str, Exchange]:
    """What a pair script's /invocations and the other routes answer (the model server on `port`)."""
    url = f"http://127.0.0.1:{port}/v1/models/half_plus_three:predict"
    return {
        "ok": ("200 OK", rid(("content-type", JSON), ("content-length", "38")), PREDICTIONS, []),
        "status": (
            "207 Multi-Status",
            rid(("content-type", "text/plain; charset=utf-8"), ("content-length", "4")),
            b"made",
            [],
        ),
        "input raises": (
            "500 Internal Server Error",
            rid(("content-type", JSON), ("content-length", "26")),
            b'{"error": "no such input"}',
            [
                f"[ERROR] sagemaker_tfs.app: {R}: 500 ValueError: no such input (POST /invocations)",
                "ValueError: no such input",
            ],
        ),
        "model error": (
            "400 Bad Request",
            rid(("content-type", JSON), ("content-length", "155")),
            MODEL_ERROR,
            [
                f"[WARNING] sagemaker_tfs.app: {R}: output_handler raised HTTPError: 400 Client Error: Bad Request for "
                f"url: {url} on the model server's 400 answer, which is passed on",
                f"requests.exceptions.HTTPError: 400 Client Error: Bad Request for url: {url}",
            ],
        ),
        "http error": (
            "429 Too Many Requests",
            rid(("content-type", JSON), ("retry-after", "5"), ("content-length", "70")),
            b'{"error": "too many", "title": "Slow down", "description": "too many"}',
            [f"[WARNING] sagemaker_tfs.app: {R}: the handler raised falcon.HTTPError 429 Too Many Requests: too many"],
        ),
        "http error, header pairs": (
            "503 Service Unavailable",
            rid(("content-type", JSON), ("retry-after", "1"), ("x-shed", "load"), ("content-length", "68")),
            b'{"error": "Service Unavailable", "title": "503 Service Unavailable"}',
            [f"[WARNING] sagemaker_tfs.app: {R}: the handler raised falcon.HTTPError 503 Service Unavailable: "],
        ),
        "http status": (
            "202 Accepted",
            rid(("content-type", JSON), ("x-queued", "yes"), ("content-length", "6")),
            b"queued",
            [],
        ),
        # its Content-Type replaces the default one; the Content-Length is always the body's
        "http status, typed": ("200 OK", rid(("content-type", "text/plain"), ("content-length", "5")), b"typed", []),
        "bad return": (
            "500 Internal Server Error",
            rid(("content-type", JSON), ("content-length", "161")),
            json_error(BAD_RETURN),
            [
                f"[ERROR] sagemaker_tfs.app: {R}: 500 BadReturnValue: {BAD_RETURN} (POST /invocations)",
                f"sagemaker_tfs.web.answers.BadReturnValue: {BAD_RETURN}",
            ],
        ),
        "GET /ping": ("200 OK", rid(("content-type", JSON), ("content-length", "0")), b"", []),
        "HEAD /ping": (  # the headers of the answer, without its body
            "405 Method Not Allowed",
            rid(("content-type", JSON), ("allow", "GET, OPTIONS"), ("content-length", "31")),
            b"",
            [f"[INFO] sagemaker_tfs.app: {R}: HEAD /ping: 405 Method Not Allowed"],
        ),
        "OPTIONS /ping": ("200 OK", rid(("content-type", JSON), ("allow", "GET"), ("content-length", "0")), b"", []),
        "POST /ping": (
            "405 Method Not Allowed",
            rid(("content-type", JSON), ("allow", "GET, OPTIONS"), ("content-length", "31")),
            NOT_ALLOWED,
            [f"[INFO] sagemaker_tfs.app: {R}: POST /ping: 405 Method Not Allowed"],
        ),
        "GET /invocations": (
            "405 Method Not Allowed",
            rid(("content-type", JSON), ("allow", "POST, OPTIONS"), ("content-length", "31")),
            NOT_ALLOWED,
            [f"[INFO] sagemaker_tfs.app: {R}: GET /invocations: 405 Method Not Allowed"],
        ),
        "HEAD /invocations": (
            "405 Method Not Allowed",
            rid(("content-type", JSON), ("allow", "POST, OPTIONS"), ("content-length", "31")),
            b"",
            [f"[INFO] sagemaker_tfs.app: {R}: HEAD /invocations: 405 Method Not Allowed"],
        ),
        "FOO /invocations": (  # not an HTTP method falcon knows
            "400 Bad Request",
            rid(("content-type", JSON), ("content-length", "94")),
            b'{"error": "Invalid HTTP method", "title": "Bad request", "description": "Invalid HTTP method"}',
            [
                f"[WARNING] sagemaker_tfs.app: {R}: the handler raised falcon.HTTPError 400 Bad Request: Invalid "
                "HTTP method"
            ],
        ),
        "POST /invocation": (
            "404 Not Found",
            rid(("content-type", JSON), ("content-length", "22")),
            NOT_FOUND,
            [f"[INFO] sagemaker_tfs.app: {R}: POST /invocation: 404 Not Found"],
        ),
        "GET /caf\u00e9": (
            "404 Not Found",
            rid(("content-type", JSON), ("content-length", "22")),
            NOT_FOUND,
            [f"[INFO] sagemaker_tfs.app: {R}: GET /caf\u00e9: 404 Not Found"],
        ),
        "GET /execution-parameters": ("200 OK", rid(("content-type", JSON), ("content-length", "2")), b"{}", []),
    }


# The stages each case's Server-Timing names (each `;dur=*`), before its total: a route without a handler chain,
# or a request that failed before the model server, has the total alone.
TWO_STAGES = "input_handler, model_server"
STAGES = {
    "ok": "input_handler, model_server, output_handler",
    "status": "input_handler, model_server, output_handler",
    "bad return": "input_handler, model_server, output_handler",
    "model error": TWO_STAGES,
    "http error": TWO_STAGES,
    "http error, header pairs": TWO_STAGES,
    "http status": TWO_STAGES,
    "http status, typed": TWO_STAGES,
}


def timed(answer: Exchange, stages: str | None) -> Exchange:
    """`answer` with its Server-Timing header, which comes just before the Content-Length."""
    status, headers, body, log = answer
    value = ", ".join(f"{stage};dur=*" for stage in [*(stages.split(", ") if stages else []), "total"])
    return status, [*headers[:-1], ("server-timing", value), headers[-1]], body, log


def pair_exchanges(app: InProcessApp) -> dict[str, Exchange]:
    cases = {
        case: exchange(app.app, app.log, "POST", "/invocations", headers={"X-Amzn-SageMaker-Custom-Attributes": case})
        for case in PAIR_CASES
    }
    for method, path in OTHER_ROUTES:
        cases[f"{method} {path}"] = exchange(app.app, app.log, method, path)
    return cases


def test_the_answers_of_a_pair_script_and_of_the_other_routes(make_app, model_server, tmp_path):
    app = make_app(write_model_dir(tmp_path, STEERED_PAIR))
    assert pair_exchanges(app) == pair_answers(model_server.rest_port)


def test_with_server_timing_every_answer_says_its_stages(make_app, model_server, tmp_path):
    app = make_app(write_model_dir(tmp_path, STEERED_PAIR), env={"SAGEMAKER_SERVER_TIMING": "true"})
    expected = {case: timed(answer, STAGES.get(case)) for case, answer in pair_answers(model_server.rest_port).items()}
    assert pair_exchanges(app) == expected


def test_with_metrics_the_answers_are_the_same_and_counted_by_route(make_app, model_server, tmp_path):
    runtime = tmp_path / "runtime"
    metrics_folder(runtime).mkdir(parents=True)  # as serve makes it
    env = {"SAGEMAKER_METRICS": "true", "SAGEMAKER_RUNTIME_DIR": str(runtime)}
    app = make_app(write_model_dir(tmp_path / "model", STEERED_PAIR), env=env)
    assert pair_exchanges(app) == pair_answers(model_server.rest_port)
    app.app.metrics.flush()
    page = read_json(metrics_folder(runtime) / APP_FILE.format(pid=os.getpid()))
    assert {f"{route} {status}": sum(cells[:-1]) for route, status, cells in page["requests"]} == {
        "/invocations 200": 2,
        "/invocations 207": 1,
        "/invocations 500": 2,
        "/invocations 400": 2,  # the model server's error, and a method falcon does not know
        "/invocations 429": 1,
        "/invocations 503": 1,
        "/invocations 202": 1,
        "/ping 200": 2,  # GET and OPTIONS
        "/ping 405": 2,
        "/invocations 405": 2,
        "other 404": 2,  # no route: one label for all
        "/execution-parameters 200": 1,
    }
    assert {f"{route} {stage}": sum(cells[:-1]) for route, stage, cells in page["stages"]} == {
        "/invocations input_handler": 8,
        "/invocations model_server": 8,
        "/invocations output_handler": 3,
    }
    assert page["in_flight"] == 0


def test_ping_when_the_default_model_is_not_served(make_app, model_server, tmp_path):
    app = make_app(write_model_dir(tmp_path), env={"TFS_DEFAULT_MODEL_NAME": "missing"})
    message = (
        f"not ready: the model server at 127.0.0.1:{model_server.rest_port} answered 404 for model missing: Could "
        "not find any versions of model missing"
    )
    body = json_error(message)
    assert exchange(app.app, app.log, "GET", "/ping") == (
        "503 Service Unavailable",
        rid(("content-type", JSON), ("content-length", str(len(body)))),
        body,
        [f"[WARNING] sagemaker_tfs.app: {R}: /ping 503 {message}"],
    )


def test_the_answers_of_a_toolkit_script(make_app, tmp_path):
    app = make_app(write_model_dir(tmp_path, TOOLKIT_SCRIPT))

    def invoke(body: str) -> Exchange:
        return exchange(app.app, app.log, "POST", "/invocations", body=body, headers={"Content-Type": "text/csv"})

    assert invoke("1,2") == (
        "200 OK",
        rid(("content-type", "text/plain"), ("content-length", "14")),
        b"the model: 1,2",
        [],
    )
    assert invoke("refuse") == (
        "415 Unsupported Media Type",
        rid(("content-type", JSON), ("content-length", "21")),
        b'{"error": "not that"}',
        [f"[WARNING] sagemaker_tfs.app: {R}: 415 not that"],
    )


TOOLKIT_SESSIONS = """\
def model_fn(model_dir):
    return {}


def transform_fn(model, data, content_type, accept, context):
    if data == "open":
        session = context.open_session(60)
        model[session] = 0
        return session, "text/plain"
    model[context.session_id] += 1
    if data == "close":
        context.close_session()
    return str(model[context.session_id]), "text/plain"
"""


def test_a_toolkit_script_s_session_headers(make_app, tmp_path):
    app = make_app(write_model_dir(tmp_path, TOOLKIT_SESSIONS))

    def invoke(body: str, session: str) -> Exchange:
        headers = {"Content-Type": "text/csv", "X-Amzn-SageMaker-Session-Id": session}
        return exchange(app.app, app.log, "POST", "/invocations", body=body, headers=headers)

    asked = time.time()
    status, headers, session, log = invoke("open", "NEW_SESSION")
    assert re.fullmatch(rb"%d-[0-9a-f]{32}" % os.getpid(), session)
    expires = headers[2][1][-20:]
    assert (status, headers, log) == (
        "200 OK",
        rid(
            ("content-type", "text/plain"),
            ("x-amzn-sagemaker-new-session-id", f"{session.decode()}; Expires={expires}"),
            ("content-length", str(len(session))),
        ),
        [],
    )
    assert asked + 60 <= calendar.timegm(time.strptime(expires, "%Y-%m-%dT%H:%M:%SZ")) <= time.time() + 61
    added = invoke("add", session.decode())
    assert added == ("200 OK", rid(("content-type", "text/plain"), ("content-length", "1")), b"1", [])
    assert invoke("close", session.decode()) == (
        "200 OK",
        rid(
            ("content-type", "text/plain"),
            ("x-amzn-sagemaker-closed-session-id", session.decode()),
            ("content-length", "1"),
        ),
        b"2",
        [],
    )


def test_the_answers_of_the_local_runtime_api_in_a_worker(make_app, tmp_path):
    app = make_app(write_model_dir(tmp_path, STEERED_PAIR), env={"SAGEMAKER_LOCAL_RUNTIME_API": "true"})
    path = "/endpoints/e/invocations"
    assert exchange(app.app, app.log, "POST", path) == (
        "200 OK",
        rid(("content-type", JSON), ("x-amzn-invoked-production-variant", "AllTraffic"), ("content-length", "38")),
        PREDICTIONS,
        [],
    )
    empty = "1 validation error detected: Value at 'body' failed to satisfy constraint: Member must not be empty"
    assert exchange(app.app, app.log, "POST", path, body=b"") == (
        "400 Bad Request",
        rid(("content-type", JSON), ("x-amzn-errortype", "ValidationError"), ("content-length", "114")),
        json.dumps({"Message": empty}).encode(),
        [f"[INFO] sagemaker_tfs.runtime_api: {R}: POST {path}: ValidationError {empty}"],
    )
    group = "arn:aws:logs:local:000000000000:log-group:/aws/sagemaker/Endpoints/e"
    stream = f"{group}:log-stream:AllTraffic/serve-{os.getpid()}"
    message = (
        f'Received server error (500) from primary with message "{{"error": "no such input"}}". See {stream} for '
        "more information."
    )
    body = json.dumps(
        {
            "Message": message,
            "OriginalStatusCode": 500,
            "OriginalMessage": '{"error": "no such input"}',
            "LogStreamArn": stream,
        }
    ).encode()
    assert exchange(app.app, app.log, "POST", path, headers={"X-Amzn-SageMaker-Custom-Attributes": "input raises"}) == (
        "424 Failed Dependency",
        rid(("content-type", JSON), ("x-amzn-errortype", "ModelError"), ("content-length", str(len(body)))),
        body,
        [
            # the worker's own call of /invocations
            f"[ERROR] sagemaker_tfs.app: {R}: 500 ValueError: no such input (POST /invocations)",
            "ValueError: no such input",
            f"[INFO] sagemaker_tfs.runtime_api: {R}: POST {path}: ModelError {message}",
        ],
    )
    assert exchange(app.app, app.log, "GET", path) == (
        "405 Method Not Allowed",
        rid(("content-type", JSON), ("allow", "POST, OPTIONS"), ("content-length", "31")),
        NOT_ALLOWED,
        [f"[INFO] sagemaker_tfs.app: {R}: GET {path}: 405 Method Not Allowed"],
    )


def api_folder(tmp_path: Path) -> Path:
    (tmp_path / "api").mkdir()
    return tmp_path / "api"


def test_the_answers_of_the_multi_model_routes(model_server, tmp_path):
    target = {"X-Amzn-SageMaker-Target-Model": "a/model.tar.gz"}
    targeted = f"[INFO] sagemaker_tfs.multi_model: {R}: POST %s, target model a/model.tar.gz"
    with captured_log() as log, multi_model_app(model_server, tmp_path) as (app, publisher):
        publisher.publish(
            [{"name": OTHER_MODEL, "load_id": 1, "state": "ready", "url": "/nowhere", "script": None}],
            time.monotonic() + 10,
        )
        invoke = f"/models/{OTHER_MODEL}/invoke"
        assert exchange(app, log, "POST", invoke, headers=target) == (
            "200 OK",
            rid(("content-type", JSON), ("content-length", "38")),
            b'{\n    "predictions": [2.5, 3.0\n    ]\n}',
            [targeted % invoke],
        )
        assert exchange(app, log, "POST", invoke, body='{"instances": ["a"]}') == (
            "400 Bad Request",
            rid(("content-type", JSON), ("content-length", "155")),
            MODEL_ERROR,
            [],
        )
        assert exchange(app, log, "POST", "/models/nothing/invoke", body="{}", headers=target) == (
            "404 Not Found",
            rid(("content-type", JSON), ("content-length", "45")),
            b'{"error": "Model nothing is not loaded yet."}',
            [
                targeted % "/models/nothing/invoke",
                f"[WARNING] sagemaker_tfs.app: {R}: 404 Model nothing is not loaded yet.",
            ],
        )
        assert exchange(app, log, "POST", "/models/caf\u00e9/invoke", body="{}") == (
            "404 Not Found",
            rid(("content-type", JSON), ("content-length", "43")),
            '{"error": "Model caf\u00e9 is not loaded yet."}'.encode(),
            [f"[WARNING] sagemaker_tfs.app: {R}: 404 Model caf\u00e9 is not loaded yet."],
        )
        assert exchange(app, log, "POST", "/invocations", body="{}", headers=target) == (
            "400 Bad Request",
            rid(("content-type", JSON), ("content-length", "60")),
            b'{"error": "Invocation request does not contain model name."}',
            [
                targeted % "/invocations",
                f"[WARNING] sagemaker_tfs.app: {R}: 400 Invocation request does not contain model name.",
            ],
        )
        assert exchange(app, log, "GET", invoke) == (
            "405 Method Not Allowed",
            rid(("content-type", JSON), ("allow", "POST, OPTIONS"), ("content-length", "31")),
            NOT_ALLOWED,
            [f"[INFO] sagemaker_tfs.app: {R}: GET {invoke}: 405 Method Not Allowed"],
        )
        assert exchange(app, log, "GET", "/ping") == (
            "200 OK",
            rid(("content-type", JSON), ("content-length", "0")),
            b"",
            [],
        )
    with captured_log() as log, multi_model_app(model_server, api_folder(tmp_path), local_runtime_api=True) as (app, _):
        # a target this worker does not route: nginx hands the request to serve's InvokeEndpoint
        assert exchange(app, log, "POST", "/endpoints/e/invocations", headers=target) == (
            "200 OK",
            rid(("content-type", JSON), ("x-accel-redirect", "@runtime_api"), ("content-length", "0")),
            b"",
            [],
        )


def test_the_answers_of_the_management_routes(tmp_path):
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    owner = Owner(
        root=str(tmp_path),
        code_dir=str(tmp_path / "code"),
        instances=[],
        config_file=tmp_path / "models.config",
        publisher=Publisher(runtime / "registry.sock"),
        wait_seconds=5,
        drain_seconds=1,
        max_models=2,
        memory_percent=100,
    )
    app = management_app(owner)
    not_loaded = (
        "404 Not Found",
        rid(("content-type", JSON), ("content-length", "39")),
        b'{"error": "Model m is not loaded yet."}',
        [f"[WARNING] sagemaker_tfs.app: {R}: 404 Model m is not loaded yet."],
    )
    too_large = "The request body is larger than 65536 bytes, the most a /models request may send"
    load_error = 'request body must be a JSON object with "model_name" and "url"'
    with captured_log() as log:
        assert exchange(
            app, log, "GET", "/models", body=b"", headers={"X-Amzn-SageMaker-Target-Model": "a.tar.gz"}
        ) == (
            "200 OK",
            rid(("content-type", JSON), ("content-length", "14")),
            b'{"models": []}',
            [f"[INFO] sagemaker_tfs.multi_model: {R}: GET /models, target model a.tar.gz"],
        )
        assert exchange(app, log, "GET", "/models", body=b"", query="limit=0") == (
            "400 Bad Request",
            rid(("content-type", JSON), ("content-length", "65")),
            b'{"error": "invalid limit \'0\': must be an integer from 1 to 1000"}',
            [f"[WARNING] sagemaker_tfs.app: {R}: 400 invalid limit '0': must be an integer from 1 to 1000"],
        )
        assert exchange(app, log, "POST", "/models", body=b"[]") == (
            "400 Bad Request",
            rid(("content-type", JSON), ("content-length", "79")),
            json_error(load_error),
            [f"[WARNING] sagemaker_tfs.app: {R}: 400 {load_error}"],
        )
        assert exchange(app, log, "POST", "/models", body=b"x" * 65537) == (
            "413 Content Too Large",
            rid(("content-type", JSON), ("content-length", "93")),
            json_error(too_large),
            [f"[WARNING] sagemaker_tfs.app: {R}: 413 {too_large}"],
        )
        assert exchange(app, log, "GET", "/models/m", body=b"") == not_loaded
        assert exchange(app, log, "DELETE", "/models/m", body=b"") == not_loaded
        assert exchange(app, log, "PUT", "/models", body=b"") == (
            "405 Method Not Allowed",
            rid(("content-type", JSON), ("allow", "GET, POST, OPTIONS"), ("content-length", "31")),
            NOT_ALLOWED,
            [f"[INFO] sagemaker_tfs.app: {R}: PUT /models: 405 Method Not Allowed"],
        )
        assert exchange(app, log, "GET", "/nothing", body=b"") == (
            "404 Not Found",
            rid(("content-type", JSON), ("content-length", "22")),
            NOT_FOUND,
            [f"[INFO] sagemaker_tfs.app: {R}: GET /nothing: 404 Not Found"],
        )


def test_the_answers_of_the_runtime_api(tmp_path):
    settings = Settings.from_env({"SAGEMAKER_LOCAL_ASYNC_OUTPUT_PATH": str(tmp_path / "out")})
    api = RuntimeApi(settings, tmp_path, None)  # its threads not started: a request is queued, never run
    app = api.server.get_app()
    try:
        with captured_log() as log:
            path = "/endpoints/e/async-invocations"
            status, headers, body, logged = exchange(
                app, log, "POST", path, headers={"X-Amzn-SageMaker-Inference-Id": "i-1"}
            )
            output = Path(dict(headers)["x-amzn-sagemaker-outputlocation"])
            unique = output.name.removesuffix(".out")
            assert (status, headers, body, logged) == (
                "202 Accepted",
                rid(
                    ("content-type", JSON),
                    ("x-amzn-sagemaker-outputlocation", f"{tmp_path}/out/{unique}.out"),
                    ("x-amzn-sagemaker-failurelocation", f"{tmp_path}/out/{unique}-error.out"),
                    ("content-length", "22"),
                ),
                b'{"InferenceId": "i-1"}',
                [
                    f"[INFO] sagemaker_tfs.runtime_api: {R}: InvokeEndpointAsync e, inference id i-1, input the inline "
                    f"body: queued, output {output}"
                ],
            )
            neither = (
                "Provide exactly one of InputLocation (X-Amzn-SageMaker-InputLocation) and Body: the request has "
                "neither"
            )
            assert exchange(app, log, "POST", path, body=b"") == (
                "400 Bad Request",
                rid(("content-type", JSON), ("x-amzn-errortype", "ValidationError"), ("content-length", "118")),
                json.dumps({"Message": neither}).encode(),
                [f"[INFO] sagemaker_tfs.runtime_api: {R}: POST {path}: ValidationError {neither}"],
            )
            assert exchange(app, log, "GET", path) == (
                "405 Method Not Allowed",
                rid(("content-type", JSON), ("allow", "POST, OPTIONS"), ("content-length", "31")),
                NOT_ALLOWED,
                [f"[INFO] sagemaker_tfs.app: {R}: GET {path}: 405 Method Not Allowed"],
            )
            stream = "/endpoints/e/invocations-response-stream"
            empty = (
                "1 validation error detected: Value at 'body' failed to satisfy constraint: Member must not be empty"
            )
            refused = json.dumps({"Message": empty}).encode()
            assert exchange(app, log, "POST", stream, body=b"") == (
                "400 Bad Request",
                rid(
                    ("content-type", JSON),
                    ("x-amzn-errortype", "ValidationError"),
                    ("content-length", str(len(refused))),
                ),
                refused,
                [f"[INFO] sagemaker_tfs.runtime_api: {R}: POST {stream}: ValidationError {empty}"],
            )
    finally:
        api.server.server_close()


def test_a_request_without_a_sane_id_gets_a_new_one(make_app, tmp_path):
    app = make_app(write_model_dir(tmp_path, STEERED_PAIR))
    for path in ("/invocations", "/ping", "/nothing"):
        answer = falcon.testing.TestClient(app.app).simulate_post(
            path, body=BODY, headers={"X-Amzn-RequestId": "bad\x01id"}
        )
        given = answer.headers["x-amzn-requestid"]
        assert given != "bad\x01id" and uuid.UUID(given).version == 4, path


def test_new_request_ids_are_version_4_uuids_unique_in_the_process_and_redrawn_in_a_forked_child():
    ids = [request.new_request_id() for _ in range(1000)]
    assert len(set(ids)) == len(ids)
    for made in ids[:10]:
        parsed = uuid.UUID(made)
        assert (str(parsed), parsed.version, parsed.variant) == (made, 4, uuid.RFC_4122)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # a gunicorn worker is such a child: its ids must not follow its siblings'
        os.write(write, request.new_request_id().encode())
        os._exit(0)
    os.waitpid(child, 0)
    theirs, ours = os.read(read, 64).decode(), request.new_request_id()
    os.close(read)
    os.close(write)
    assert uuid.UUID(theirs).version == 4 and theirs[:24] != ours[:24]
