"""Stateful sessions, as SageMaker's contract has a container keep them: a request's `X-Amzn-SageMaker-Session-Id` is
NEW_SESSION (the client asks for one), the id of a session this container opened, or absent. A script sees it as
`context.session_id`; on a NEW_SESSION request it may `context.open_session()`, and the answer carries
`X-Amzn-SageMaker-New-Session-Id: <id>; Expires=<UTC time>`; on a session's request it may
`context.close_session()`, and the answer carries `X-Amzn-SageMaker-Closed-Session-Id: <id>`.

A session's id begins with the pid of the worker that opened it: nginx sends every request naming it to that
worker's own socket (stack/nginx.py), so what the script keeps in memory for it is there. A session does not outlive
its worker."""

from __future__ import annotations

import math
import os
import secrets
import time

from ..shared.headers import (
    CLOSED_SESSION_ID_HEADER,
    NEW_SESSION,
    NEW_SESSION_ID_HEADER,
    SESSION_ID_HEADER,
    environ_key,
)
from .answers import Answer, Reply

SESSION_KEY = environ_key(SESSION_ID_HEADER)
# A session's id: <pid>-<128 random bits>, whose pid nginx's rule reads (stack/nginx.py)
PID_PATTERN, RANDOM_PATTERN = "[0-9]{1,10}", "[0-9a-f]{32}"


class RequestSession:
    """A request's session: the id it names, and what its script opened or closed (the answer's headers)."""

    __slots__ = ("id", "_expiry", "_opened", "_closed")

    def __init__(self, session_id: str | None, expiry: float):
        self.id, self._expiry = session_id, expiry
        self._opened: str | None = None  # the New-Session-Id header's value
        self._closed: str | None = None

    def open(self, expires_in: float | None = None) -> str:
        """A new session's id, which the answer gives the client, lasting `expires_in` seconds (else
        SAGEMAKER_SESSION_EXPIRY_SECONDS)."""
        if self.id != NEW_SESSION:
            raise ValueError(
                f"context.open_session(): the request must ask for a new session (SessionId NEW_SESSION, the "
                f"{SESSION_ID_HEADER} header), not {self.id!r}"
            )
        if self._opened is not None:
            raise ValueError("context.open_session(): this request has opened a session already")
        seconds = self._expiry if expires_in is None else expires_in
        if not 0 < seconds <= 86400 * 365:
            raise ValueError(f"context.open_session(): expires_in must be seconds from 1 to a year, not {seconds!r}")
        session_id = f"{os.getpid()}-{secrets.token_hex(16)}"
        expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(math.ceil(time.time() + seconds)))
        self._opened = f"{session_id}; Expires={expires}"
        return session_id

    def close(self) -> None:
        """The request's session ends: the answer says so to the client."""
        if self.id is None or self.id == NEW_SESSION:
            raise ValueError(
                f"context.close_session(): the request names no session to close ({SESSION_ID_HEADER}: {self.id!r})"
            )
        self._closed = self.id

    def headers(self) -> list[tuple[str, str]]:
        """The answer's session headers."""
        headers = []
        if self._opened is not None:
            headers.append((NEW_SESSION_ID_HEADER, self._opened))
        if self._closed is not None:
            headers.append((CLOSED_SESSION_ID_HEADER, self._closed))
        return headers


NO_SESSION = RequestSession(None, 1.0)  # a request without the header: it can neither open nor close one


class SessionAccess:
    """A script's context's view of its request's session (the handlers' Context and the toolkit's): `session_state`
    is the request's, NO_SESSION unless it names one."""

    session_state: RequestSession = NO_SESSION

    @property
    def session_id(self) -> str | None:
        """The request's X-Amzn-SageMaker-Session-Id: "NEW_SESSION" when the client asks for a session, the id of
        one this worker opened, else None."""
        return self.session_state.id

    def open_session(self, expires_in: float | None = None) -> str:
        """On a NEW_SESSION request: a new session's id, lasting `expires_in` seconds (default
        SAGEMAKER_SESSION_EXPIRY_SECONDS), which the answer gives the client; its requests reach this process."""
        return self.session_state.open(expires_in)

    def close_session(self) -> None:
        """The request's session ends; the answer tells the client."""
        self.session_state.close()


def request_session(environ: dict, expiry: float) -> RequestSession:
    """The session of a request (its WSGI environ); NO_SESSION, shared, for the many without the header."""
    session_id = environ.get(SESSION_KEY)
    return NO_SESSION if not session_id else RequestSession(session_id, expiry)


def with_session_headers(answer: Answer | Reply, session: RequestSession) -> Answer | Reply:
    """The answer, with the headers of the session its script opened or closed."""
    if session is NO_SESSION or not (headers := session.headers()):
        return answer
    if isinstance(answer, Reply):
        return answer._replace(headers=[*answer.headers, *headers])
    return Reply(*answer, headers)
