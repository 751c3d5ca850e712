"""The `Context` a handler gets with each request, and the rules that derive it from the request's headers."""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from ..errors import HandlerError
from ..model_client.model_servers import ModelServerSession, loopback_target
from ..shared.headers import ATTRIBUTE_KEYS, CUSTOM_ATTRIBUTES_HEADER, METHOD_KEY, NAME_KEY, VERSION_KEY, environ_key
from ..shared.media_types import JSON
from ..shared.model_names import MODEL_NAME
from ..shared.sockets import HOST
from ..shared.tfs_api import METHODS
from ..web.sessions import SessionAccess

DEFAULT_CONTENT_TYPE = DEFAULT_ACCEPT = JSON
CUSTOM_ATTRIBUTES_KEY = environ_key(CUSTOM_ATTRIBUTES_HEADER)


class ContextFields(NamedTuple):
    """What a handler knows about its request: the fields of the SageMaker TensorFlow Serving container's
    Context, in its order, with `timeout` last (as in its newest version)."""

    model_name: str | None  # the tfs-model-name custom attribute, else None (the default model is meant)
    model_version: str | None  # the tfs-model-version custom attribute (digits), else None
    method: str | None  # the tfs-method custom attribute (predict, classify or regress), else None
    rest_uri: str  # http://127.0.0.1:<rest port>/v1/models/<name>[/versions/<version>]:<method or predict>
    grpc_port: str  # the gRPC port of the same model server instance as rest_uri
    channel: Any  # a grpc.Channel to that port, reused across requests; None without code/inference.py
    custom_attributes: str | None  # the X-Amzn-SageMaker-Custom-Attributes header as sent, else None
    request_content_type: str  # the Content-Type header as sent (parameters kept), else application/json
    accept_header: str  # the Accept header as sent, else application/json
    content_length: int | None  # the request's Content-Length, else None
    timeout: float  # seconds a call to the model server may take (SAGEMAKER_GUNICORN_TIMEOUT_SECONDS)

    @property
    def session(self) -> ModelServerSession:
        """requests-like `post`, `get` and `request` to the model server over the worker's keep-alive connections:
        `context.session.post(context.rest_uri, data=...)` in place of `requests.post(...)` (not a tuple field, so
        that the Context keeps the original's fields)."""
        return ModelServerSession(self.timeout)

    def predict_arrays(
        self,
        inputs: Any,
        *,
        model_name: str | None = None,
        version: int | str | None = None,
        signature_name: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """A Predict with numpy arrays, in binary over `channel` (gRPC), never as JSON: `inputs` is one array for
        the signature's only input, or a dict of arrays by input name, converted to the inputs' types as REST
        converts JSON numbers (float64 to a float32 input, ...). Returns the outputs by name, as numpy arrays in the
        model's types. The model is this request's (the `rest_uri` one: the tfs-model-name attribute, else the
        default model) unless `model_name` names another; `version` likewise. A model server error raises a
        HandlerError with the status and message the REST call would answer (uncaught, the client gets them)."""
        from ..model_client import tensor_calls  # numpy: scripts that call this have it

        port, path = loopback_target(self.rest_uri)
        target = tensor_calls.rest_target(path.partition("?")[0])
        if model_name is None and target is not None:
            model_name, version = target[0], target[1] if version is None else version
        return tensor_calls.predict(
            self.channel,
            port,
            f"{HOST}:{port}",
            model_name or "",
            inputs,
            version=None if version is None else int(version),
            signature_name=signature_name,
            timeout=self.timeout if timeout is None else timeout,
        )


class Context(ContextFields, SessionAccess):
    """The Context a handler gets: the original's fields (a tuple of them, as scripts may unpack it), and the
    request's stateful session (web/sessions.py), its `session_state` set only on a request that names one."""


# As the original: every `tfs-<key>=<value>` pair anywhere in the header, up to the next comma. The value is
# everything after the first '='; unknown tfs-* keys and other attributes are ignored; nothing is trimmed.
_TFS_ATTRIBUTE = re.compile(r"(tfs-[a-z-]+)=([^,]+)")
_VERSION = re.compile(r"[0-9]+")
_VERSION_MAX = 2**63 - 1  # versions are int64 in the model server


def tfs_attributes(header: str) -> tuple[str | None, str | None, str | None]:
    """(model name, version, method) from a custom attributes header; HandlerError 400 for invalid values."""
    attributes = dict(_TFS_ATTRIBUTE.findall(header))
    name, version, method = (attributes.get(key) for key in ATTRIBUTE_KEYS)
    if name is not None and not MODEL_NAME.fullmatch(name):
        raise HandlerError(400, f"invalid {NAME_KEY}")
    if version is not None and not _VERSION.fullmatch(version):
        raise HandlerError(400, f"invalid {VERSION_KEY}: must be a positive integer")
    if version is not None and (len(version.lstrip("0")) > 19 or int(version.lstrip("0") or 0) > _VERSION_MAX):
        raise HandlerError(400, f"invalid {VERSION_KEY}: must be at most {_VERSION_MAX}")
    if method is not None and method not in METHODS:
        raise HandlerError(400, f"invalid {METHOD_KEY}: must be one of {'|'.join(METHODS)}")
    return name, version, method
