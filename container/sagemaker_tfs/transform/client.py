"""POST /invocations to one container: one keep-alive connection per worker thread, retries, SageMaker's messages.

A response other than 200 fails the request: 4xx with "ClientError: <status>", anything else with "Bad HTTP
status received from algorithm: <status>", each followed by an empty line, "Message:" and the response body, as
SageMaker logs them. No response (refused or dropped connection, InvocationsTimeoutInSeconds passed) fails with
"Unable to get response from algorithm".
[INF] Retries (up to InvocationsMaxRetries): after a connection error, a timeout or a 5xx status, with a short
backoff (0.1 s, doubling, at most 2 s); never after a 4xx. A keep-alive connection the container closed while idle
is reopened once without counting as a retry. The timeout applies to connecting and to each read.
Content-Type and Accept are sent only when the job sets ContentType and Accept [INF]. With MaxPayloadInMB=0 the
body is sent with chunked transfer encoding, as SageMaker does.
"""

from __future__ import annotations

import http.client
import time
import urllib.parse
from dataclasses import dataclass

from .outcomes import FailureKind

USER_AGENT = "sagemaker-tfs-transform"
NO_RESPONSE = "Unable to get response from algorithm"


class InvocationError(Exception):
    """A request failed for good (retries spent, or not retryable)."""

    def __init__(self, message: str, kind: FailureKind, retries: int):
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.retries = retries


@dataclass(frozen=True)
class InvocationSettings:
    content_type: str | None
    accept: str | None
    timeout: float
    max_retries: int
    chunked: bool = False


def failure_message(status: int, body: bytes) -> tuple[str, FailureKind, bool]:
    """(message, kind, retryable) for a status other than 200."""
    text = body.decode("utf-8", errors="replace")
    if 400 <= status < 500:
        return f"ClientError: {status}\n\nMessage:\n{text}", FailureKind.CLIENT, False
    return (
        f"Bad HTTP status received from algorithm: {status}\n\nMessage:\n{text}",
        FailureKind.ALGORITHM,
        status >= 500,
    )


class InvocationsClient:
    """Sends bodies to <endpoint>/invocations over one persistent connection. Not shared between threads."""

    def __init__(self, endpoint: str, settings: InvocationSettings):
        url = urllib.parse.urlsplit(endpoint)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"endpoint {endpoint!r} is not an http:// or https:// URL")
        self.path = url.path.rstrip("/") + "/invocations"
        self.settings = settings
        connection = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
        self.connection = connection(url.hostname, url.port, timeout=settings.timeout)
        self.headers = {"User-Agent": USER_AGENT}
        if settings.content_type:
            self.headers["Content-Type"] = settings.content_type
        if settings.accept:
            self.headers["Accept"] = settings.accept

    def invoke(self, body: bytes) -> tuple[bytes, int]:
        """The response body of a 200 and the number of retries it took; InvocationError otherwise."""
        retries = 0
        while True:
            try:
                status, data = self._post(body)
            except (OSError, http.client.HTTPException):
                self.close()
                message, kind, retryable = NO_RESPONSE, FailureKind.ALGORITHM, True
            else:
                if status == 200:
                    return data, retries
                message, kind, retryable = failure_message(status, data)
            if not retryable or retries >= self.settings.max_retries:
                raise InvocationError(message, kind, retries)
            time.sleep(min(2.0, 0.1 * 2**retries))
            retries += 1

    def _post(self, body: bytes) -> tuple[int, bytes]:
        reused = self.connection.sock is not None
        try:
            return self._exchange(body)
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
            if not reused:
                raise
            self.close()  # the container closed the idle keep-alive connection: reopen it once
            return self._exchange(body)

    def _exchange(self, body: bytes) -> tuple[int, bytes]:
        payload = iter((body,)) if self.settings.chunked else body
        self.connection.request("POST", self.path, body=payload, headers=self.headers)
        response = self.connection.getresponse()
        return response.status, response.read()

    def close(self) -> None:
        self.connection.close()
