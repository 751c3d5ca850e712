"""The SageMaker inference toolkit's exceptions (`sagemaker_inference.errors`), as HandlerErrors.

Being HandlerErrors, they reach the client through the one error mapping of the app: their status and
`{"error": message}`. The constructors take the toolkit's arguments, so scripts written for it run unchanged.
"""

from __future__ import annotations

from ..errors import HandlerError


def _status(status_code: object) -> int:
    """The toolkit accepts any status; an answer that is an error needs 400-599, else it is a 500."""
    if isinstance(status_code, int) and not isinstance(status_code, bool) and 400 <= status_code <= 599:
        return status_code
    return 500


class BaseInferenceToolkitError(HandlerError):
    """An error answer chosen by a script: `status_code` with `{"error": message}` (`phrase` is kept for
    scripts that read it; the reason phrase of the answer is the standard one)."""

    def __init__(self, status_code: object, message: str, phrase: str) -> None:
        Exception.__init__(self, status_code, message, phrase)  # args as the toolkit's
        self.status_code = status_code
        self.message = message
        self.phrase = phrase
        self.status = _status(status_code)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.status_code!r}, {self.message!r})"


class GenericInferenceToolkitError(BaseInferenceToolkitError):
    def __init__(self, status_code: object, message: str | None = None, phrase: str | None = None) -> None:
        message = message or "Invalid Request"
        super().__init__(status_code, message, phrase or message)


class UnsupportedFormatError(HandlerError):
    """A content type (415) or Accept value (406) the default decoder or encoder cannot handle, with the
    toolkit's text."""

    def __init__(self, content_type: str | None, status: int = 415) -> None:
        super().__init__(
            status,
            f"Content type {content_type} is not supported by this framework. Please implement "
            "input_fn to deserialize the request data or an output_fn to serialize the "
            "response.",
        )
        self.content_type = content_type
