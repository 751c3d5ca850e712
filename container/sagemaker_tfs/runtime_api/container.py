"""Calling the container as SageMaker's front end does, so that an operation gets exactly what `/invocations` (or a
multi-model `/models/{name}/invoke`) answers: over HTTP on nginx's own port (the direct route included), from
`serve`; or, in an app worker, the worker's own app called in-process (`InProcess`), without the hops."""

from __future__ import annotations

import concurrent.futures
import http.client
import io
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ..config import PING_TIMEOUT_SECONDS
from ..shared import cooperative
from ..shared.headers import (
    CLOSED_SESSION_ID_HEADER,
    CUSTOM_ATTRIBUTES_HEADER,
    INFERENCE_ID_HEADER,
    NEW_SESSION_ID_HEADER,
    REQUEST_ID_HEADER,
    SESSION_ID_HEADER,
    TARGET_MODEL_HEADER,
    environ_key,
)
from ..shared.sockets import HOST
from ..shared.wsgi_call import CONSTANT_ENVIRON, WsgiApp, whole_answer

# The request headers SageMaker passes on to the container (it strips the others).
PASSED_ON = (
    "Content-Type",
    "Accept",
    CUSTOM_ATTRIBUTES_HEADER,
    TARGET_MODEL_HEADER,
    INFERENCE_ID_HEADER,
    REQUEST_ID_HEADER,
    SESSION_ID_HEADER,
)


READ_SIZE = 65536  # the most bytes of a streamed answer read at once


@dataclass(frozen=True)
class Answer:
    status: int
    content_type: str | None
    custom_attributes: str | None  # the handler's X-Amzn-SageMaker-Custom-Attributes, if it set one
    body: bytes
    new_session: str | None = None  # the session the script opened: "<id>; Expires=<UTC time>"
    closed_session: str | None = None  # the session it closed


def _answer(status: int, headers: Mapping[str, str], body: bytes) -> Answer:
    """An Answer of the container's status, headers (by lower-case name) and body."""
    return Answer(
        status,
        headers.get("content-type"),
        headers.get(_CUSTOM_ATTRIBUTES),
        body,
        headers.get(_NEW_SESSION),
        headers.get(_CLOSED_SESSION),
    )


_CUSTOM_ATTRIBUTES, _NEW_SESSION, _CLOSED_SESSION = (
    name.lower() for name in (CUSTOM_ATTRIBUTES_HEADER, NEW_SESSION_ID_HEADER, CLOSED_SESSION_ID_HEADER)
)


class StreamTimedOut(TimeoutError):
    """A streamed answer's next part did not come in time, or the whole answer ran over its limit."""


class StreamBroken(ConnectionError):
    """The container's connection was reset or closed before its streamed answer's end."""


class Container:
    """The container behind nginx's port; each call on a connection of its own (the calls come from short-lived
    threads), closed after the answer."""

    def __init__(self, port: int):
        self.port = port

    def call(self, method: str, path: str, body: bytes | None, headers: dict[str, str], timeout: float) -> Answer:
        """The container's answer; TimeoutError when it does not come in `timeout` seconds, another OSError when
        the container cannot be reached."""
        connection = http.client.HTTPConnection(HOST, self.port, timeout=timeout)
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            content = response.read()
        except http.client.HTTPException as exc:  # a cut or malformed answer
            raise ConnectionError(f"the container's answer was cut: {exc!r}") from None
        finally:
            connection.close()
        return _answer(response.status, _names(response), content)

    def stream(
        self, path: str, body: bytes, headers: dict[str, str], timeout: float, limit: float
    ) -> tuple[Answer, Iterator[bytes] | None]:
        """POST `path`: a 2xx answer's head (an empty body) and its body's pieces as they arrive, else the answer
        whole and None. `timeout`: seconds for the answer's head, then between two pieces (TimeoutError before the
        head, StreamTimedOut after it); `limit`: seconds for the whole answer; a connection cut before the answer's
        end is StreamBroken. Closing the pieces closes the connection: the container then stops the answer."""
        deadline = time.monotonic() + limit
        connection = http.client.HTTPConnection(HOST, self.port, timeout=min(timeout, limit))
        handed_over = False  # to the pieces, which close it
        try:
            connection.request("POST", path, body=body, headers=headers)
            response = connection.getresponse()
            if not 200 <= response.status < 300:
                return _answer(response.status, _names(response), response.read()), None
            handed_over = True
            return _answer(response.status, _names(response), b""), _pieces(connection, response, timeout, deadline)
        except http.client.HTTPException as exc:
            raise ConnectionError(f"the container's answer was cut: {exc!r}") from None
        finally:
            if not handed_over:
                connection.close()

    def ready(self) -> bool:
        """Whether GET /ping answers 200 in SageMaker's 2 s."""
        try:
            return self.call("GET", "/ping", None, {}, PING_TIMEOUT_SECONDS).status == 200
        except OSError:
            return False


class InProcess(Container):
    """The container as an app worker's own WSGI app, called in its process: the answer nginx would pass back, less
    the two hops. The call runs beside the caller (a request greenlet of the loop worker, else a thread), so that
    the caller's wait ends at `timeout` while a late answer is still computed and dropped, as SageMaker drops it."""

    def __init__(self, app: WsgiApp):
        self.app = app

    def call(self, method: str, path: str, body: bytes | None, headers: dict[str, str], timeout: float) -> Answer:
        body = body or b""
        environ = {
            **_ENVIRON,
            "REQUEST_METHOD": method,
            "PATH_INFO": path,
            "wsgi.input": io.BytesIO(body),
            "CONTENT_LENGTH": str(len(body)),
            **{environ_key(name): value for name, value in headers.items()},
        }
        answer: concurrent.futures.Future[Answer] = concurrent.futures.Future()

        def run() -> None:
            try:
                answer.set_result(self._answer(environ))
            except BaseException as exc:  # noqa: BLE001 - a bug of the app: the caller's to raise
                answer.set_exception(exc)

        hub = cooperative.hub()
        if hub is not None:
            hub.spawn(run)
            return hub.wait_future(answer, timeout)
        threading.Thread(target=run, name="invoke-endpoint", daemon=True).start()
        try:
            return answer.result(timeout)
        except concurrent.futures.TimeoutError:  # TimeoutError itself from Python 3.11 on
            raise TimeoutError(f"no answer in {timeout} s") from None

    def _answer(self, environ: dict[str, Any]) -> Answer:
        status, headers, body = whole_answer(self.app, environ)
        return _answer(int(status[:3]), {name.lower(): value for name, value in headers}, body)


def _names(response: http.client.HTTPResponse) -> dict[str, str]:
    return {name.lower(): value for name, value in response.getheaders()}


def _pieces(
    connection: http.client.HTTPConnection, response: http.client.HTTPResponse, timeout: float, deadline: float
) -> Iterator[bytes]:
    """A streamed answer's body as it arrives: each read gives what one chunk brought (read1), without waiting for
    more; the socket's timeout is the time left to the next piece."""
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise StreamTimedOut("the answer ran over its time")
            assert connection.sock is not None  # (open while the answer is read)
            connection.sock.settimeout(min(timeout, left))
            try:
                piece = response.read1(READ_SIZE)
            except TimeoutError:
                raise StreamTimedOut("no part came in time") from None
            except (http.client.HTTPException, OSError) as exc:
                raise StreamBroken(f"the container's answer was cut: {exc!r}") from None
            if not piece:
                return
            yield piece
    finally:
        connection.close()


# What every in-process request's environ holds (PEP 3333)
_ENVIRON = {
    **CONSTANT_ENVIRON,
    "QUERY_STRING": "",
    "SERVER_NAME": "localhost",
    "SERVER_PORT": "80",
    "SERVER_PROTOCOL": "HTTP/1.1",
    "REMOTE_ADDR": "127.0.0.1",
}


def passed_on(environ: dict[str, Any]) -> dict[str, str]:
    """The request headers (from its WSGI environ) that SageMaker passes on; one sent empty, as not sent."""
    return {name: environ[key] for name, key in _PASSED_ON_KEYS if environ.get(key)}


_PASSED_ON_KEYS = tuple((name, environ_key(name)) for name in PASSED_ON)
