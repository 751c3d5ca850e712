"""The direct route's rule, run by the engines nginx runs it with, without a stack: fast.

A bare nginx reads the config serve writes (nginx.write_config), in front of two stand-ins of one component each:
a model server that says which path it was asked for (with the status a model `status-<code>` names, else 200), and
an app on gunicorn's socket
that says which header lines it was handed. nginx's regexes run in its PCRE2, so the body and attribute tables here
are checked by the engine that decides in production; pcre2test checks Server-Timing's comparison. The full stacks'
test (test/stack/test_stack_direct_route.py) proves that both routes give the same answers.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import socketserver
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import clients
import ports
import processes
import pytest
from direct_route_cases import APP, ATTRIBUTE_FORMS, ATTRIBUTES, BODIES, MODEL_SERVER, TFS
from sagemaker_tfs.config import Settings
from sagemaker_tfs.stack import direct_route, nginx

JSON = "application/json"
NGINX_VERSION = nginx.version()


class _StandIn(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # nginx keeps its upstream connections alive
    route = ""

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        self.rfile.read(length)
        handed = {name: self.headers.get_all(name) for name in direct_route.HANDED_OVER}
        named = re.match(r"/v1/models/status-(\d+)", self.path)
        status = int(named.group(1)) if named else 200
        body = json.dumps({"route": self.route, "path": self.path, "length": length, "headers": handed}).encode()
        self.send_response(status)
        self.send_header("Content-Type", JSON)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


class _ModelServer(_StandIn):
    route = MODEL_SERVER


class _App(_StandIn):
    route = APP

    def address_string(self) -> str:
        return "app"


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class Route:
    """A bare nginx with serve's config and the stand-ins; `send` gives (status, what the stand-in said)."""

    def __init__(self, runtime: Path):
        low, high = ports.free_port_range(2)
        self.port = ports.free_port()
        settings = Settings.from_env(
            {
                "SAGEMAKER_RUNTIME_DIR": str(runtime),
                "SAGEMAKER_BIND_TO_PORT": str(self.port),
                "SAGEMAKER_SAFE_PORT_RANGE": f"{low}-{high}",
            }
        )
        settings = settings.resolved(str(runtime), "half_plus_three")
        self.config = nginx.write_config(settings, nginx.direct_model(settings, None), NGINX_VERSION)
        self.servers = [
            ThreadingHTTPServer(("127.0.0.1", settings.model_server_rest_ports[0]), _ModelServer),
            _UnixServer(str(runtime / "gunicorn.sock"), _App),
        ]
        os.chmod(runtime / "gunicorn.sock", 0o777)  # nginx's workers run as another user when the tests are root
        for server in self.servers:
            threading.Thread(target=server.serve_forever, daemon=True).start()
        self.nginx = processes.Background(nginx.command(self.config, NGINX_VERSION), stop_timeout=10).start()
        self.nginx.wait_until(lambda: ports.port_is_open(self.port), timeout=30, what="listening")

    def send(self, body: bytes | str = TFS, headers: list[tuple[str, str]] | None = None) -> tuple[int, dict]:
        """POST /invocations with these header lines (in order, repeats kept), Content-Type JSON unless given."""
        answer = self.answer(body, headers)
        return answer.status, answer.json()

    def answer(self, body: bytes | str = TFS, headers: list[tuple[str, str]] | None = None) -> clients.Answer:
        headers = headers if headers is not None else [("Content-Type", JSON)]
        return clients.http_call(self.port, "POST", "/invocations", body, headers, timeout=60)

    def log(self) -> str:
        return self.nginx.log()

    def close(self) -> None:
        self.nginx.stop()
        for server in self.servers:
            server.shutdown()
            server.server_close()


@pytest.fixture(scope="module")
def route(tmp_path_factory):
    started = Route(tmp_path_factory.mktemp("route"))
    yield started
    started.close()


@pytest.fixture(autouse=True)
def no_alert(route):
    """No request makes nginx's regex engine fail (it would log an alert quoting the body)."""
    before = len(route.log())
    yield
    assert not re.search(r"\[(alert|crit|emerg)\]|failed", route.log()[before:]), route.log()[before:][:2000]


@pytest.mark.parametrize("body, expected", BODIES, ids=range(len(BODIES)))
def test_the_body_decides_the_route(route, body, expected):
    status, said = route.send(body)
    assert (status, said["route"]) == (200, expected)
    assert said["length"] == len(body.encode() if isinstance(body, str) else body)  # the body goes on whole


@pytest.mark.parametrize("attributes, expected", ATTRIBUTE_FORMS, ids=range(len(ATTRIBUTE_FORMS)))
def test_custom_attributes_name_the_model_server_path(route, attributes, expected):
    status, said = route.send(TFS, [("Content-Type", JSON), (ATTRIBUTES, attributes)])
    assert status == 200
    assert (said["path"] if said["route"] == MODEL_SERVER else APP) == expected


@pytest.mark.parametrize(
    "headers, expected",
    [
        ([("Content-Type", "application/json; charset=utf-8")], MODEL_SERVER),
        ([("Content-Type", "Application/JSON")], MODEL_SERVER),
        ([("Content-Type", "application/jsonlines")], APP),
        ([("Content-Type", "text/csv")], APP),
        ([], APP),  # no Content-Type: the app reads JSON too, and answers alike
        ([("Content-Type", JSON), ("Accept", "*/*")], MODEL_SERVER),
        ([("Content-Type", JSON), ("Accept", "application/json")], MODEL_SERVER),
        ([("Content-Type", JSON), ("Accept", "application/json;q=0")], APP),
        ([("Content-Type", JSON), ("Accept", "text/csv")], APP),
        ([("Content-Type", JSON), ("Accept", "text/csv, application/json")], APP),
        ([("Content-Type", JSON), ("Content-Encoding", "gzip")], APP),
        ([("Content-Type", JSON), ("Content-Encoding", "identity")], APP),
    ],
)
def test_the_headers_decide_the_route(route, headers, expected):
    status, said = route.send(TFS, headers)
    assert (status, said["route"]) == (200, expected)


REPEATED = [
    [("Content-Type", JSON), ("Content-Type", "text/csv")],
    [("Content-Type", "text/csv"), ("Content-Type", JSON)],
    [("Content-Type", JSON), ("Content-Type", JSON)],
    [("Content-Type", JSON), ("Accept", JSON), ("Accept", "text/csv")],
    [("Content-Type", JSON), ("Accept", "text/csv"), ("Accept", JSON)],
    [("Content-Type", JSON), ("Content-Encoding", ""), ("Content-Encoding", "gzip")],
    [("Content-Type", JSON), (ATTRIBUTES, "tfs-model-name=a"), (ATTRIBUTES, "tfs-model-name=b")],
    [("Content-Type", JSON), (ATTRIBUTES, "trace=1"), (ATTRIBUTES, "tfs-method=regress")],
]


@pytest.mark.parametrize("headers", REPEATED, ids=range(len(REPEATED)))
def test_a_repeated_header_is_read_alike_by_both_routes(route, headers):
    """nginx 1.23 and later join the lines (", "), which no rule takes: the app gets the request with every line.
    Older ones see the first line only: the route reads it, and the app is handed that line alone."""
    status, said = route.send(TFS, headers)
    assert status == 200
    first = {}
    for name, value in headers:
        first.setdefault(name, value)
    if NGINX_VERSION >= direct_route.JOINED_HEADER_LINES:
        assert said["route"] == APP
        assert {name: said["headers"][name] for name in first} == {
            name: [value for other, value in headers if other == name] for name in first
        }
        return
    if said["route"] == APP:
        assert {name: said["headers"][name] for name in first} == {
            name: [value] if value else None for name, value in first.items()
        }  # nginx sends no empty line
    alone = route.send(TFS, list(first.items()))[1]  # the request with each header's first line only
    assert (said["route"], said["path"]) == (alone["route"], alone["path"])


@pytest.mark.parametrize("status", direct_route.MODEL_SERVER_ERRORS)
def test_only_the_errors_the_app_may_answer_otherwise_go_to_it(route, status):
    """A model server's 400 (and nginx's 502 and 504) goes to the app, with the body and headers nginx kept; nginx
    then ends the client's connection after the app's answer, as it does after any 400 it intercepts. Every other
    error passes through untouched, on a connection kept alive."""
    attributes = f"tfs-model-name=status-{status}"
    answer = route.answer(TFS, [("Content-Type", JSON), (ATTRIBUTES, attributes)])
    said = answer.json()
    if status in direct_route.INVOCATIONS_TO_APP:
        assert (answer.status, said["route"], said["path"]) == (200, APP, "/invocations")
        assert said["headers"][ATTRIBUTES] == [attributes]
    else:
        assert (answer.status, said["route"], said["path"]) == (
            status,
            MODEL_SERVER,
            f"/v1/models/status-{status}:predict",
        )
    assert answer.headers.get("connection") == ("close" if status == 400 else "keep-alive")


def _filled(size: int, head: str, unit: str, tail: str) -> bytes:
    count = (size - len(head) - len(tail)) // len(unit)
    body = head + unit * count + tail
    return (body + " " * (size - len(body))).encode()


@pytest.mark.parametrize("unit", ["{1}", "{},", '"",', '{"a":' * 14 + "1" + "}" * 14 + ","])
def test_the_largest_body_looked_at_stays_within_pcres_match_limit(route, unit):
    """The bodies that cost PCRE's JIT the most steps per byte, at the largest size nginx looks at: matched (no
    alert, no error). A larger one goes to the app without a look (the exact bound moves by the few body bytes that
    arrive with the head)."""
    body = _filled(direct_route.LOOKED_AT - 1, '{"instances": [', unit, "1]}")
    assert route.send(body)[1]["route"] == MODEL_SERVER
    assert route.send(body + b" " * 65536)[1]["route"] == APP


def _pcre2test(pattern: str, subjects: list[str]) -> list[str | None]:
    """Whether each subject matches `pattern` in PCRE2 with its JIT, as nginx runs it: the group `ms`, or None."""
    script = f"/{pattern}/jit\n" + "".join(subject + "\\=copy=ms\n" for subject in subjects)
    out = subprocess.run(
        [shutil.which("pcre2test") or "pcre2test", "-q"], input=script, capture_output=True, text=True, check=True
    ).stdout
    results: list[str | None] = []
    for line in out.splitlines()[1:]:  # after the pattern: each subject, then its match or "No match"
        if line.endswith("\\=copy=ms"):
            results.append(None)
        elif found := re.match(r"\s+C (\S*) \(\d+\) ms", line):
            results[-1] = found.group(1)
        else:
            assert line == "No match" or re.match(r"\s*\d+: ", line), line
    assert len(results) == len(subjects)
    return results


def test_server_timing_total_is_the_later_of_the_two_clocks():
    """`total` is the request's milliseconds or the model server's, whichever is greater."""
    generator = random.Random(27)
    pairs = [(a, b) for a in range(0, 130) for b in (a - 1, a, a + 1, a + 10, a // 10, a * 10) if b >= 0]
    pairs += [
        (generator.randrange(10 ** generator.randint(1, 8)), generator.randrange(10 ** generator.randint(1, 8)))
        for _ in range(500)
    ]
    pairs += [(1000, 999), (999, 1000), (10, 9), (9, 10), (1234567, 1234566), (1234566, 1234567), (0, 0)]
    subjects = [f"{header}:{request}" for header, request in pairs]
    verdicts = [_pcre2test(pattern, subjects) for pattern in direct_route.LATER]
    for (header, request), *found in zip(pairs, *verdicts, strict=True):
        chosen = next((int(ms) for ms in found if ms is not None), request)  # the map's default: the request's
        assert chosen == max(header, request), (header, request, found)
