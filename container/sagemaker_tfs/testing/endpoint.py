"""Endpoint: a model folder served as `serve` serves it, for a user's tests of their code/inference.py.

In-process (the default), the app that gunicorn's workers run is built in the test's own process and called
without a socket, against the model servers `serve` would start (model_servers.py: shared by the endpoints of one
folder). With `stack=True`, or for a multi-model endpoint (whose models load through `serve`'s registry), `serve`
itself runs, on free loopback ports, and requests go through nginx.
"""

from __future__ import annotations

import dataclasses
import http.client
import io
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from ..app.routes import App, create_app
from ..config import Settings
from ..errors import StartupError
from ..serve import prepare
from ..shared.free_ports import free_port, free_port_range
from ..shared.headers import CUSTOM_ATTRIBUTES_HEADER, REQUEST_ID_HEADER, SESSION_ID_HEADER, TARGET_MODEL_HEADER
from ..shared.wsgi_call import CONSTANT_ENVIRON, answer, close, whole_answer
from . import model_servers

ENDPOINT_NAME = "test-endpoint"  # the name InvokeEndpoint is called with on a stack's runtime API


@dataclasses.dataclass(frozen=True)
class Result:
    """One answer: its status code, its headers (names in lower case), its body and the log lines of the request."""

    status: int
    headers: dict[str, str]
    body: bytes
    log_lines: list[str] = dataclasses.field(default_factory=list)

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode()

    @property
    def content_type(self) -> str | None:
        return self.headers.get("content-type")


class Stream:
    """An answer as it is made: its status code and headers (names in lower case) at once, then its body's parts as
    they come (iterate it). In-process, each part is what the script yielded; through the stack, what one read of the
    chunked answer brought. A stream the script breaks raises its exception (in-process) or http.client's
    IncompleteRead (stack) where it ends. Use as a context manager, or close() it: a generator left unfinished is
    closed then, as when a client goes away."""

    def __init__(self, status: int, headers: dict[str, str], parts: Iterator[bytes]):
        self.status, self.headers, self._parts = status, headers, parts

    def __iter__(self) -> Iterator[bytes]:
        return self._parts

    def close(self) -> None:
        close(self._parts)

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _non_empty(parts: Any) -> Iterator[bytes]:
    """An app's iterable body, its empty pieces left out; closed at its end or when the caller closes this."""
    try:
        for part in parts:
            if part:
                yield part
    finally:
        close(parts)


class _ThreadLines(logging.Handler):
    """The log records emitted on one thread while a request runs there: the app's lines and the script's."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("[%(levelname)s] %(name)s: %(message)s"))
        self._lines: dict[int, list[str]] = {}

    def watch(self) -> list[str]:
        lines = self._lines[threading.get_ident()] = []
        return lines

    def unwatch(self) -> None:
        self._lines.pop(threading.get_ident(), None)

    def emit(self, record: logging.LogRecord) -> None:
        lines = self._lines.get(record.thread or 0)
        if lines is not None:
            lines.append(self.format(record))


class Endpoint:
    """A model folder (as SageMaker unpacks model.tar.gz into /opt/ml/model, or a multi-model root) served with
    `env`'s SAGEMAKER_* settings, the same checks of the tree and the same handler contract as `serve`. Use as a
    context manager; `invoke()` and `ping()` send requests. Start-up problems raise StartupError (or ConfigError,
    ModelTreeError, the script's ScriptError), with serve's messages."""

    def __init__(self, model_dir: str | Path, env: Mapping[str, str] | None = None, stack: bool = False):
        self.model_dir = Path(model_dir)
        self.env = {"SAGEMAKER_MODEL_DIR": str(self.model_dir), **(env or {})}
        self.runtime_dir = Path(tempfile.mkdtemp(prefix="sagemaker-tfs-endpoint-"))
        base = Settings.from_env({**self.env, "SAGEMAKER_RUNTIME_DIR": str(self.runtime_dir)})
        self.stack = stack or base.multi_model
        self._app: App | None = None
        self._serve: _Serve | None = None
        self._lines = _ThreadLines()
        try:
            if self.stack:
                self._serve = _Serve(self.env, self.runtime_dir)
            else:
                self._app = self._in_process(base)
        except BaseException:
            self.close()
            raise

    def _in_process(self, base: Settings) -> App:
        settings, tree = prepare(base, front=False)
        assert tree is not None  # (a multi-model endpoint runs the stack)
        if tree.models:
            servers = model_servers.shared(settings, tree)
            ports = servers.ports()
            settings = dataclasses.replace(
                settings,
                safe_port_range=servers.port_range,
                model_server_grpc_ports=tuple(grpc for grpc, _ in ports),
                model_server_rest_ports=tuple(rest for _, rest in ports),
            )
        logging.getLogger().addHandler(self._lines)
        return create_app(settings.to_env(os.environ))

    @property
    def url(self) -> str | None:
        """nginx's base URL with `stack=True` (for requests of your own); None in-process."""
        return self._serve.url if self._serve is not None else None

    def invoke(
        self,
        body: bytes | str,
        content_type: str = "application/json",
        accept: str | None = None,
        custom_attributes: str | None = None,
        target_model: str | None = None,
        request_id: str | None = None,
        session_id: str | None = None,
    ) -> Result:
        """POST /invocations, as SageMaker's InvokeEndpoint sends it; `target_model` (multi-model endpoints) goes
        through the local runtime API's InvokeEndpoint, which loads the model on first use. `session_id`: the
        X-Amzn-SageMaker-Session-Id header, "NEW_SESSION" or a session's id (the answer's
        x-amzn-sagemaker-new-session-id header gives it)."""
        headers = _invocation_headers(content_type, accept, custom_attributes, request_id, session_id)
        path = "/invocations"
        if target_model is not None:
            if self._serve is None:
                raise ValueError("target_model is for a multi-model endpoint (SAGEMAKER_MULTI_MODEL=true)")
            headers[TARGET_MODEL_HEADER] = target_model
            path = f"/endpoints/{ENDPOINT_NAME}/invocations"
        return self.request("POST", path, body.encode() if isinstance(body, str) else body, headers)

    def invoke_stream(
        self,
        body: bytes | str,
        content_type: str = "application/json",
        accept: str | None = None,
        custom_attributes: str | None = None,
        request_id: str | None = None,
        session_id: str | None = None,
    ) -> Stream:
        """POST /invocations as invoke() does, the answer's parts given as they come (a streamed answer, README:
        "Answers that stream"); a whole answer is one part."""
        headers = _invocation_headers(content_type, accept, custom_attributes, request_id, session_id)
        data = body.encode() if isinstance(body, str) else body
        if self._serve is not None:
            return self._serve.stream("/invocations", data, headers)
        assert self._app is not None
        status, answer_headers, parts = answer(self._app, _environ("POST", "/invocations", data, headers))
        return Stream(
            int(status[:3]),
            {k.lower(): v for k, v in answer_headers},
            _non_empty([parts] if isinstance(parts, bytes) else parts),
        )

    def ping(self) -> Result:
        return self.request("GET", "/ping", b"", {})

    def request(self, method: str, path: str, body: bytes, headers: Mapping[str, str]) -> Result:
        """Any request, as nginx hands it to the app (in-process) or to nginx (stack)."""
        if self._serve is not None:
            return self._serve.request(method, path, body, headers)
        assert self._app is not None
        lines = self._lines.watch()
        try:
            status, answer_headers, whole = whole_answer(self._app, _environ(method, path, body, headers))
        finally:
            self._lines.unwatch()
        return Result(int(status.split()[0]), {k.lower(): v for k, v in answer_headers}, whole, lines)

    def close(self) -> None:
        """Release the app (its connections, its script's modules) or stop the stack; the model servers stay for
        the next Endpoint of the folder."""
        if self._app is not None:
            self._app.close()
            self._app = None
        logging.getLogger().removeHandler(self._lines)
        if self._serve is not None:
            self._serve.stop()
            self._serve = None
        shutil.rmtree(self.runtime_dir, ignore_errors=True)

    def __enter__(self) -> Endpoint:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()


def _invocation_headers(
    content_type: str,
    accept: str | None,
    custom_attributes: str | None,
    request_id: str | None,
    session_id: str | None,
) -> dict[str, str]:
    """The headers of an invocation as SageMaker sends them."""
    headers = {"Content-Type": content_type, REQUEST_ID_HEADER: request_id or str(uuid.uuid4())}
    for name, value in (
        ("Accept", accept),
        (CUSTOM_ATTRIBUTES_HEADER, custom_attributes),
        (SESSION_ID_HEADER, session_id),
    ):
        if value is not None:
            headers[name] = value
    return headers


def _environ(method: str, path: str, body: bytes, headers: Mapping[str, str]) -> dict[str, Any]:
    """A request's WSGI environ, as the app's workers make it of what nginx sends."""
    environ = {
        **CONSTANT_ENVIRON,
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8080",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
    }
    for name, value in headers.items():
        key = name.upper().replace("-", "_")
        environ[key if key == "CONTENT_TYPE" else "HTTP_" + key] = value
    return environ


class _Serve:
    """`serve` in a subprocess on free loopback ports, ready once it logs its `ready:` line."""

    def __init__(self, env: Mapping[str, str], runtime_dir: Path):
        self.port = free_port()
        low, high = free_port_range(2 * 8)  # room for up to 8 model server instances
        self.url = f"http://127.0.0.1:{self.port}"
        settings = Settings.env_of(bind_port=self.port, safe_port_range=(low, high), runtime_dir=str(runtime_dir))
        if Settings.from_env(env).multi_model:
            settings.update(Settings.env_of(local_runtime_api=True))  # TargetModel through InvokeEndpoint
        self.lines: list[str] = []
        self._ready = threading.Event()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sagemaker_tfs.serve"],
            env={**os.environ, **env, **settings},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        threading.Thread(target=self._read, name="serve-output", daemon=True).start()
        wait = Settings.from_env(env).tfs_wait_time_seconds + 60
        deadline = time.monotonic() + wait
        while not self._ready.wait(0.2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = "\n".join(f"    {line}" for line in self.lines[-20:])
                raise StartupError(f"serve did not become ready:\n{tail}")
        self._connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=wait)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            self.lines.append(line)
            if "serve: ready: " in line or ('"logger": "serve"' in line and '"message": "ready: ' in line):
                self._ready.set()

    def request(self, method: str, path: str, body: bytes, headers: Mapping[str, str]) -> Result:
        start = len(self.lines)
        self._connection.request(method, path, body, dict(headers))
        answer = self._connection.getresponse()
        data = answer.read()
        rid = answer.getheader(REQUEST_ID_HEADER) or headers.get(REQUEST_ID_HEADER)
        lines = [line for line in self.lines[start:] if rid and rid in line]
        return Result(answer.status, {k.lower(): v for k, v in answer.getheaders()}, data, lines)

    def stream(self, path: str, body: bytes, headers: Mapping[str, str]) -> Stream:
        """A POST on a connection of its own, its answer read as it comes."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self._connection.timeout)
        try:
            connection.request("POST", path, body, dict(headers))
            response = connection.getresponse()
        except BaseException:
            connection.close()
            raise

        def parts() -> Iterator[bytes]:
            try:
                while piece := response.read1(65536):
                    yield piece
            finally:
                connection.close()

        return Stream(response.status, {k.lower(): v for k, v in response.getheaders()}, parts())

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
