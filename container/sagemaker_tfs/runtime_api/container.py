"""Calling the container as SageMaker's front end does: over HTTP on nginx's own port, so that an operation gets
exactly what `/invocations` (or a multi-model `/models/{name}/invoke`) answers, the direct route included."""

from __future__ import annotations

import http.client
from dataclasses import dataclass

from ..config import PING_TIMEOUT_SECONDS
from ..shared.headers import (CUSTOM_ATTRIBUTES_HEADER, INFERENCE_ID_HEADER, REQUEST_ID_HEADER,
                              TARGET_MODEL_HEADER)
from ..shared.sockets import HOST

# The request headers SageMaker passes on to the container (it strips the others).
PASSED_ON = ("Content-Type", "Accept", CUSTOM_ATTRIBUTES_HEADER, TARGET_MODEL_HEADER, INFERENCE_ID_HEADER,
             REQUEST_ID_HEADER)


@dataclass(frozen=True)
class Answer:
    status: int
    content_type: str | None
    custom_attributes: str | None  # the handler's X-Amzn-SageMaker-Custom-Attributes, if it set one
    body: bytes


class Container:
    """The container behind nginx's port; each call on a connection of its own (the calls come from short-lived
    threads), closed after the answer."""

    def __init__(self, port: int):
        self.port = port

    def call(self, method: str, path: str, body: bytes | None, headers: dict[str, str],
             timeout: float) -> Answer:
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
        return Answer(response.status, response.getheader("Content-Type"),
                      response.getheader(CUSTOM_ATTRIBUTES_HEADER), content)

    def ready(self) -> bool:
        """Whether GET /ping answers 200 in SageMaker's 2 s."""
        try:
            return self.call("GET", "/ping", None, {}, PING_TIMEOUT_SECONDS).status == 200
        except OSError:
            return False


def passed_on(headers: dict[str, str]) -> dict[str, str]:
    """The request headers (from falcon's req.headers, upper-case names) that SageMaker passes on."""
    return {name: headers[name.upper()] for name in PASSED_ON if name.upper() in headers}
