"""An endpoint's stateful sessions as SageMaker's front end keeps them: a request's SessionId must name a session the
container opened (`X-Amzn-SageMaker-New-Session-Id: <id>; Expires=<UTC time>` in an answer), not yet closed
(`X-Amzn-SageMaker-Closed-Session-Id`) nor expired; NEW_SESSION asks the container for one (InvokeEndpoint only).

The operations run in every app worker and in `serve`, so the sessions are files of the runtime folder, one per
session (named by a hash of its id: nothing a request names becomes a path), holding its expiry. AWS documents no
error for a session that is not open; this one is a ValidationError that says which of the three it is not."""

from __future__ import annotations

import calendar
import hashlib
import re
import time
from pathlib import Path

from ..shared import runtime_dir
from ..shared.headers import NEW_SESSION
from .container import Answer
from .errors import internal_failure, validation

# The answer's NewSessionId, as botocore's service model constrains it
_NEW_SESSION = re.compile(
    r"([a-zA-Z0-9](?:-*[a-zA-Z0-9])*);\sExpires=([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z)"
)
_EXPIRES = "%Y-%m-%dT%H:%M:%SZ"


class Sessions:
    def __init__(self, runtime: Path):
        self.folder = runtime / runtime_dir.SESSIONS_FOLDER

    def check(self, session_id: str, endpoint: str) -> None:
        """A request's SessionId (valid by the service model's pattern) names an open session, or is NEW_SESSION;
        else the ValidationError."""
        if session_id == NEW_SESSION:
            return
        path = self.folder / self._name(session_id)
        try:
            expires = float(path.read_text())
        except (FileNotFoundError, ValueError):
            raise validation(
                f"SessionId {session_id} is not an open session of endpoint {endpoint}: its container never opened "
                "it, or closed it"
            ) from None
        if expires <= time.time():
            path.unlink(missing_ok=True)
            raise validation(
                f"SessionId {session_id} is not an open session of endpoint {endpoint}: it expired at "
                f"{time.strftime(_EXPIRES, time.gmtime(expires))}"
            )

    def record(self, answer: Answer) -> None:
        """The sessions the container's answer opened or closed; a NewSessionId out of the service model's form is
        the operation's InternalFailure (SDKs could not read it)."""
        if answer.new_session is not None:
            found = _NEW_SESSION.fullmatch(answer.new_session)
            if found is None or len(answer.new_session) > 256:
                raise internal_failure(
                    f"The container answered X-Amzn-SageMaker-New-Session-Id {answer.new_session[:300]!r}, not "
                    "'<id>; Expires=<YYYY-MM-DDThh:mm:ssZ>' with an id of letters, digits and hyphens"
                )
            expires = calendar.timegm(time.strptime(found[2], _EXPIRES))
            runtime_dir.write_file(runtime_dir.folder(self.folder) / self._name(found[1]), str(expires))
        if answer.closed_session is not None:
            (self.folder / self._name(answer.closed_session)).unlink(missing_ok=True)

    @staticmethod
    def _name(session_id: str) -> str:
        return hashlib.sha256(session_id.encode()).hexdigest()
