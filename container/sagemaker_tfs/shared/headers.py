"""SageMaker's request headers that the stack reads or writes, the answers' Server-Timing, and a header's key in a
WSGI environ. (nginx's variable of a header is stack/direct_route.py's http_variable.)"""

from __future__ import annotations

REQUEST_ID_HEADER = "X-Amzn-RequestId"  # the client's request id, echoed in every answer
CUSTOM_ATTRIBUTES_HEADER = "X-Amzn-SageMaker-Custom-Attributes"  # tfs-model-name=..., passed to handlers
# The custom attributes that name a request's target model, version and method (the app's Context reads them,
# the direct route's nginx rules route on them)
NAME_KEY, VERSION_KEY, METHOD_KEY = ATTRIBUTE_KEYS = ("tfs-model-name", "tfs-model-version", "tfs-method")
TARGET_MODEL_HEADER = "X-Amzn-SageMaker-Target-Model"  # the multi-model archive a request is for (logged)
INFERENCE_ID_HEADER = "X-Amzn-SageMaker-Inference-Id"  # the runtime API caller's id of an invocation (logged)
# Stateful sessions (web/sessions.py): the client's session, NEW_SESSION to ask for one; in the answer, the one a
# script opened ("<id>; Expires=<UTC time>") or closed
SESSION_ID_HEADER = "X-Amzn-SageMaker-Session-Id"
NEW_SESSION_ID_HEADER = "X-Amzn-SageMaker-New-Session-Id"
CLOSED_SESSION_ID_HEADER = "X-Amzn-SageMaker-Closed-Session-Id"
NEW_SESSION = "NEW_SESSION"
SERVER_TIMING_HEADER = "Server-Timing"  # the stages' durations (SAGEMAKER_SERVER_TIMING): the app's, the direct route's

UNPREFIXED_KEYS = ("CONTENT_TYPE", "CONTENT_LENGTH")  # the environ keys of headers without HTTP_


def environ_key(header: str) -> str:
    """A request header's key in a WSGI environ (PEP 3333, CGI's rule): CONTENT_TYPE, CONTENT_LENGTH, else
    HTTP_<the name in upper case, '-' as '_'>."""
    key = header.upper().replace("-", "_")
    return key if key in UNPREFIXED_KEYS else "HTTP_" + key
