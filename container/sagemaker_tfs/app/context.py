"""The `Context` a handler gets with each request, and the rules that derive it from the request's headers."""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from ..errors import HandlerError
from ..model_client.model_servers import ModelServerSession
from ..shared.model_names import MODEL_NAME

CUSTOM_ATTRIBUTES_HEADER = "X-Amzn-SageMaker-Custom-Attributes"
DEFAULT_CONTENT_TYPE = "application/json"
DEFAULT_ACCEPT = "application/json"


class Context(NamedTuple):
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


# As the original: every `tfs-<key>=<value>` pair anywhere in the header, up to the next comma. The value is
# everything after the first '='; unknown tfs-* keys and other attributes are ignored; nothing is trimmed.
_TFS_ATTRIBUTE = re.compile(r"(tfs-[a-z-]+)=([^,]+)")
_VERSION = re.compile(r"[0-9]+")
_VERSION_MAX = 2**63 - 1  # versions are int64 in the model server
METHODS = ("predict", "classify", "regress")


def tfs_attributes(header: str) -> tuple[str | None, str | None, str | None]:
    """(model name, version, method) from a custom attributes header; HandlerError 400 for invalid values."""
    attributes = dict(_TFS_ATTRIBUTE.findall(header))
    name = attributes.get("tfs-model-name")
    version = attributes.get("tfs-model-version")
    method = attributes.get("tfs-method")
    if name is not None and not MODEL_NAME.fullmatch(name):
        raise HandlerError(400, "invalid tfs-model-name")
    if version is not None and not _VERSION.fullmatch(version):
        raise HandlerError(400, "invalid tfs-model-version: must be a positive integer")
    if version is not None and (len(version.lstrip("0")) > 19 or int(version.lstrip("0") or 0) > _VERSION_MAX):
        raise HandlerError(400, f"invalid tfs-model-version: must be at most {_VERSION_MAX}")
    if method is not None and method not in METHODS:
        raise HandlerError(400, "invalid tfs-method: must be one of predict|classify|regress")
    return name, version, method
