"""The exception a handler script raises to choose the HTTP status of its error answer (and `serve`'s own).

    from sagemaker_tfs import HandlerError

    def input_handler(data, context):
        if context.request_content_type != "application/json":
            raise HandlerError(415, f"expected application/json, got {context.request_content_type}")

The client gets that status with the body `{"error": "<message>"}`; any other exception is a 500 with
`{"error": "<str(exception)>"}`. This module imports nothing, so scripts can import it cheaply.
"""


class HandlerError(Exception):
    """An error answer chosen by a handler: HTTP `status` (400-599) with `{"error": message}`."""

    def __init__(self, status: int, message: str):
        if isinstance(status, bool) or not isinstance(status, int) or not 400 <= status <= 599:
            raise ValueError(f"HandlerError status must be an integer from 400 to 599, not {status!r}")
        super().__init__(message)
        self.status = int(status)
        self.message = message

    def __str__(self) -> str:
        return str(self.message)

    def __repr__(self) -> str:
        return f"HandlerError({self.status}, {self.message!r})"


class StartupError(RuntimeError):
    """`serve` cannot start the stack; the message says why."""
