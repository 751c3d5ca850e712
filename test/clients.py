"""Clients of a running container: plain HTTP calls and their answers, /invocations, NPY bodies, boto3's
sagemaker-runtime client."""

from __future__ import annotations

import http.client
import threading
import urllib.error
import urllib.request
from typing import TYPE_CHECKING

from sagemaker_tfs.testing import Result

if TYPE_CHECKING:  # (serve_stack imports this module)
    from serve_stack import Stack


def http_status(url: str, timeout: float = 2.0) -> int | None:
    """The status of GET url, or None when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (OSError, urllib.error.URLError):
        return None


Answer = Result  # an HTTP answer: status, headers (lower-case names), body


def http_call(
    port: int,
    method: str,
    path: str,
    body: bytes | str | None = None,
    headers: dict[str, str] | list[tuple[str, str]] | None = None,
    timeout: float = 120,
) -> Answer:
    """One HTTP request to 127.0.0.1:port on a fresh connection; `headers` as a list of (name, value) sends each
    line as given, repeats and order kept (with a Content-Length of the body)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        if isinstance(headers, list):
            data = body.encode() if isinstance(body, str) else body or b""
            connection.putrequest(method, path, skip_accept_encoding=True)
            for name, value in [*headers, ("Content-Length", str(len(data)))]:
                connection.putheader(name, value)
            connection.endheaders(data)
        else:
            connection.request(method, path, body, headers or {})
        response = connection.getresponse()
        return Answer(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
    finally:
        connection.close()


CUSTOM_ATTRIBUTES = "X-Amzn-SageMaker-Custom-Attributes"


def invoke(
    stack: Stack,
    body: bytes | str,
    content_type: str | None = "application/json",
    attributes: str | None = None,
    **headers: str,
) -> Answer:
    """POST /invocations through a stack's nginx (`stack`: anything with the `port` it listens on), on a fresh
    connection; `content_type` None sends none, `attributes` is the custom attributes header, and other headers are
    keyword arguments with underscores for dashes (X_Amzn_RequestId='...', Accept='text/csv')."""
    sent = {name.replace("_", "-"): value for name, value in headers.items()}
    if content_type is not None:
        sent["Content-Type"] = content_type
    if attributes is not None:
        sent[CUSTOM_ATTRIBUTES] = attributes
    return http_call(stack.port, "POST", "/invocations", body, sent)


def post_burst(port: int, body: bytes, clients: int, path: str = "/invocations") -> list[int]:
    """`clients` concurrent POSTs of `body` (each on its own connection); their statuses."""
    statuses: list[int] = [0] * clients

    def send(index: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        try:
            connection.request("POST", path, body, {"Content-Type": "application/octet-stream"})
            answer = connection.getresponse()
            answer.read()
            statuses[index] = answer.status
        finally:
            connection.close()

    threads = [threading.Thread(target=send, args=(index,)) for index in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return statuses


def npy_body(array, allow_pickle: bool = False) -> bytes:
    """An NPY file of a numpy array, as the SageMaker SDK's NumpySerializer sends it (allow_pickle: an object array,
    which the container must refuse)."""
    import io

    import numpy as np

    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=allow_pickle)
    return buffer.getvalue()


def runtime_client(port: int):
    """boto3's `sagemaker-runtime` client pointed at a local container's runtime API (SAGEMAKER_LOCAL_RUNTIME_API),
    with dummy credentials and no retries (so that each call is one request)."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "sagemaker-runtime",
        endpoint_url=f"http://127.0.0.1:{port}",
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
        config=Config(retries={"max_attempts": 1, "mode": "standard"}, read_timeout=120),
    )


def client_error(call) -> dict:
    """The parsed response of the botocore ClientError that `call()` must raise (Error.Code, the members,
    ResponseMetadata)."""
    import pytest
    from botocore.exceptions import ClientError

    with pytest.raises(ClientError) as raised:
        call()
    return raised.value.response
