"""The optional `context` argument of the toolkit functions: the parts of the TorchServe/MMS context that scripts
use. One object per request (the start-up functions get one without a request), so threads never share one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..shared.headers import UNPREFIXED_KEYS
from ..web.sessions import NO_SESSION, RequestSession, SessionAccess


def header_name(environ_key: str) -> str:
    """`HTTP_X_AMZN_REQUESTID` -> `X-Amzn-Requestid`, `CONTENT_TYPE` -> `Content-Type`."""
    name = environ_key[5:] if environ_key.startswith("HTTP_") else environ_key
    return "-".join(part.capitalize() for part in name.split("_"))


def request_headers(environ: Mapping[str, Any]) -> dict[str, str]:
    """The request's headers from a WSGI environment, named as `Content-Type`, values as sent."""
    headers = {header_name(key): value for key, value in environ.items() if key.startswith("HTTP_")}
    for key in UNPREFIXED_KEYS:
        if environ.get(key):
            headers[header_name(key)] = environ[key]
    return headers


class RequestProcessor:
    """`context.request_processor[0]`: the request's headers."""

    def __init__(self, environ: Mapping[str, Any] | None):
        self._environ = environ or {}
        self._headers: dict[str, str] | None = None

    def get_request_properties(self) -> dict[str, str]:
        if self._headers is None:  # built when a script asks: most never do
            self._headers = request_headers(self._environ)
        return self._headers

    def get_request_header(self, name: str) -> str | None:
        wanted = name.lower()
        return next((value for key, value in self.get_request_properties().items() if key.lower() == wanted), None)


class Context(SessionAccess):
    """What a toolkit function knows about the model and its request, and how it sets the answer's status and
    content type (overriding those of its return value)."""

    def __init__(
        self,
        system_properties: dict[str, Any],
        model_name: str,
        environ: Mapping[str, Any] | None = None,
        session_state: RequestSession = NO_SESSION,
    ):
        self.system_properties = system_properties
        self.model_name = model_name
        self.request_processor = [RequestProcessor(environ)]
        self.response_status: tuple[int, str] | None = None
        self.response_content_type: str | None = None
        self.session_state = session_state  # the request's stateful session (web/sessions.py), as the handlers' has

    def get_request_header(self, idx: int, key: str) -> str | None:
        return self.request_processor[idx].get_request_header(key)

    def get_all_request_header(self, idx: int) -> dict[str, str]:
        return self.request_processor[idx].get_request_properties()

    def set_response_status(self, code: int = 200, phrase: str = "") -> None:
        if isinstance(code, bool) or not isinstance(code, int) or not 200 <= code <= 599:  # 1xx are interim answers
            raise ValueError(f"set_response_status: the status must be an integer from 200 to 599, not {code!r}")
        self.response_status = (code, phrase)

    def set_response_content_type(self, idx: int, value: str) -> None:
        if not isinstance(value, str) or not value or any(c in value for c in "\r\n"):
            raise ValueError(f"set_response_content_type: not a content type: {value!r}")
        self.response_content_type = value

    def __repr__(self) -> str:
        return f"<sagemaker_tfs.toolkit.Context model_name={self.model_name!r}>"
