"""Numpy arrays to the model server and back in binary: a gRPC Predict whose tensors are raw bytes, never JSON text.

Two users. The app sends an array (an NPY request of the default handler, or what an `input_handler` returns) with
`answer()`: over gRPC when that gives exactly what the REST call would (the same feeds, and an answer REST can
write), else, and after any error answer, the same request over REST as JSON, so that errors keep their statuses
and texts. Scripts call `predict()` (`context.predict_arrays`, `ServedModel.predict_arrays`) and get the output
arrays, or the model server's error as a HandlerError.

REST converts JSON numbers to the signature's input types; so does this path, by the same rule (`conform`): any
number to a float input, integers in range to an integer input, booleans to a boolean input. The signatures come
from the model server's metadata (REST), read once per model, version and signature and forgotten after an error
answer (a multi-model endpoint may load another model under the same name). numpy and the wire format are imported
with this module: the app imports it on the first array only (the image has no numpy unless a script brings it).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import requests

from ..errors import HandlerError
from ..shared import cooperative, dtypes, npy, tfs_api, tfs_json_response
from ..shared.error_codes import HTTP_STATUS, Code
from ..shared.media_types import JSON
from ..shared.tensor_proto import WireError, predict_outputs, predict_request
from .http_client import ModelServerResponse
from .model_servers import ModelServerTimeout, answer_json, call, no_answer, unreachable

PREDICT = "/tensorflow.serving.PredictionService/Predict"
DEFAULT_SIGNATURE = "serving_default"  # what TFS runs when a request names none
Arrays = Mapping[str, np.ndarray]

# The model server's REST path of a call: the binary call goes where the REST call would have gone.
_REST_PATH = re.compile(rf"{tfs_api.MODELS}/([^/:]+)(?:/versions/([0-9]+))?:({tfs_api.METHOD_PATTERN})")


def rest_target(path: str) -> tuple[str, int | None, str] | None:
    """(model, version or None, method) of a REST call's path, None for any other path."""
    match = _REST_PATH.fullmatch(path)
    if match is None:
        return None
    name, version, method = match.groups()
    return name, None if version is None else int(version), method


# ---- signatures ----

_INT_RANGES = dtypes.INT_RANGES  # REST's, in the model server's json_request.py too
_FLOATS = (dtypes.DT_FLOAT, dtypes.DT_DOUBLE)
_ENUMS = {dtypes.enum_name(number): number for number in (*_FLOATS, *_INT_RANGES, dtypes.DT_BOOL)}

_signatures: dict[tuple[str, int | None, str], dict[str, int | None]] = {}  # no lock: a race fetches twice


def _inputs(rest_port: int, name: str, version: int | None, signature: str, timeout: float) -> dict[str, int | None]:
    """The signature's inputs: alias -> DataType number, None for a type REST does not convert to. HandlerError
    with the model server's status and message when it has no such model, version or signature."""
    key = (name, version, signature)
    inputs = _signatures.get(key)
    if inputs is None:
        path = tfs_api.metadata_path(name, None if version is None else str(version))
        document = answer_json(call(rest_port, "GET", path, timeout=timeout))
        try:
            signatures = document["metadata"]["signature_def"]["signature_def"]
        except (KeyError, TypeError):
            raise HandlerError(502, f"the model server's metadata of {name} has no signatures") from None
        if signature not in signatures:
            raise TensorCallError(
                Code.INVALID_ARGUMENT,  # the model server's own answer to the call
                f'Serving signature name: "{signature}" not found in signature def',
            )
        inputs = {alias: _ENUMS.get(info.get("dtype")) for alias, info in signatures[signature]["inputs"].items()}
        if len(_signatures) > 1024:  # models come and go on a multi-model endpoint
            _signatures.clear()
        _signatures[key] = inputs
    return inputs


def forget(name: str, version: int | None, signature: str) -> None:
    _signatures.pop((name, version, signature), None)


def _conformed(array: np.ndarray, dtype: int | None) -> np.ndarray | None:
    """The array as REST would convert its JSON text to the input's type, None where REST refuses it (or might
    read it otherwise: empty arrays, strings)."""
    kind = array.dtype.kind
    if dtype is None or array.size == 0 or kind not in "biuf":
        return None
    if dtype == dtypes.DT_BOOL:
        return array if kind == "b" else None
    if kind == "b":
        return None  # `true` is not a number for TFS
    target = dtypes.to_numpy(dtype)
    if dtype in _FLOATS:
        with np.errstate(over="ignore"):  # beyond float32's range is +-inf, as in TFS
            return array.astype(target, copy=False)
    low, high = _INT_RANGES[dtype]
    if kind == "f" or int(array.min()) < low or int(array.max()) > high:
        return None  # `1.0` is not an integer for TFS
    return array.astype(target, copy=False)


def conform(inputs: Arrays, signature: Mapping[str, int | None]) -> dict[str, np.ndarray] | None:
    """The feeds of a signature with exactly these inputs, converted as REST converts JSON; None when the names
    differ or a conversion does not apply."""
    if inputs.keys() != signature.keys():
        return None
    feeds = {}
    for alias, array in inputs.items():
        feed = _conformed(np.asarray(array), signature[alias])
        if feed is None:
            return None
        feeds[alias] = feed
    return feeds


# ---- the call ----


class TensorCallError(HandlerError):
    """The model server's error answer to a binary call: TFS's HTTP status for its code, and its message (what the
    REST call's `{"error": ...}` would say)."""

    def __init__(self, code: Code, message: str):
        super().__init__(HTTP_STATUS.get(code, 500), message)
        self.code = code


def _call(
    channel: Any,
    address: str,
    name: str,
    feeds: Arrays,
    version: int | None,
    signature_name: str | None,
    timeout: float,
) -> dict[str, np.ndarray]:
    """The outputs of one Predict over gRPC; TensorCallError with the model server's error, ModelServerError
    without an answer."""
    import grpc

    request = predict_request(name, feeds, version, signature_name)
    try:
        call = channel.unary_unary(PREDICT)
        hub = cooperative.hub()
        if hub is None:
            answer = call(request, timeout=timeout)
        else:  # the loop worker's thread serves other requests meanwhile
            answer = hub.wait_future(call.future(request, timeout=timeout))
        return predict_outputs(answer)
    except grpc.RpcError as exc:
        code, details = exc.code(), exc.details() or ""
        if code is grpc.StatusCode.DEADLINE_EXCEEDED:
            raise no_answer(address, timeout) from None
        if code is grpc.StatusCode.UNAVAILABLE and not details.startswith("Servable"):
            raise unreachable(address, details) from None
        raise TensorCallError(Code(code.value[0]), details) from None


def predict(
    channel: Any,
    rest_port: int,
    address: str,
    name: str,
    inputs: Any,
    *,
    version: int | None = None,
    signature_name: str | None = None,
    timeout: float = 60.0,
) -> dict[str, np.ndarray]:
    """A Predict on model `name` with arrays: one array for the signature's only input, or a dict by input alias;
    converted to the inputs' types as REST converts JSON where that applies, else sent as they are. The outputs by
    alias; TensorCallError with the model server's error, ModelServerError without an answer."""
    arrays = inputs if isinstance(inputs, Mapping) else None
    signature = signature_name or DEFAULT_SIGNATURE
    known = _inputs(rest_port, name, version, signature, timeout)
    if arrays is None:
        if len(known) != 1:
            raise HandlerError(
                400,
                f"signature {signature} of model {name} has {len(known) or 'no'} inputs "
                f"({', '.join(sorted(known))}): give a dict of arrays by input name",
            )
        arrays = {next(iter(known)): inputs}
    feeds = conform(arrays, known) or {alias: np.asarray(array) for alias, array in arrays.items()}
    try:
        return _call(channel, address, name, feeds, version, signature_name, timeout)
    except TensorCallError:
        forget(name, version, signature)
        raise
    except (WireError, ValueError) as exc:
        raise HandlerError(400, f"cannot send the arrays to model {name}: {exc}") from None


class TensorResponse(ModelServerResponse):
    """A binary call's answer as the REST call's answer: a requests.Response whose JSON `content` (TFS's text,
    byte for byte) is written only when first read, its headers the Content-Type only (the length is not known
    before); `outputs` holds the arrays."""

    outputs: dict[str, np.ndarray]
    row_format: bool

    def __init__(self, outputs: dict[str, np.ndarray], row_format: bool, url: str) -> None:
        # the content written by a partial, not a method of self: no reference cycle through `raw`
        body = functools.partial(tfs_json_response.predict_body, outputs, row_format)
        super().__init__(200, "OK", _JSON_HEAD, JSON, body, url, 0.0)
        self.outputs, self.row_format = outputs, row_format


_JSON_HEAD = b"\r\nContent-Type: " + JSON.encode()  # TensorResponse's header lines


def _writable(outputs: Arrays, row_format: bool) -> bool:
    """Whether REST would answer these outputs (else it answers an error, which the REST call then gives): types
    it writes, and in the row format one batch size for all."""
    if not outputs or not all(
        a.dtype.kind in "biuOSU" or a.dtype in (np.float32, np.float64) for a in outputs.values()
    ):
        return False
    return (
        not row_format
        or len({a.shape[0] if a.ndim else None for a in outputs.values()} - {None}) == 1
        and all(a.ndim for a in outputs.values())
    )


def rest_body(inputs: Any) -> bytes:
    """The REST request of the same arrays: one array is the instances (row format), a dict the named inputs
    (columnar); HandlerError 400 for arrays JSON cannot hold."""
    if not isinstance(inputs, Mapping):
        return npy.instances_request(inputs)
    try:
        columns = {alias: np.asarray(array).tolist() for alias, array in inputs.items()}
        return json.dumps({"inputs": columns}).encode()
    except TypeError:
        raise HandlerError(
            400, "the arrays cannot be sent to the model server as JSON: send numbers, booleans or unicode strings"
        ) from None


def answer(server: Any, client: Any, path: str, inputs: Any, timeout: float) -> requests.Response:
    """The model server's answer to arrays sent to the REST `path` (one array: the instances; a dict: named inputs):
    a TensorResponse, or the REST call's answer where the binary call does not give the same (see the module)."""
    target = rest_target(path)
    if target is not None and target[2] == "predict":
        name, version, _ = target
        arrays = inputs if isinstance(inputs, Mapping) else None
        try:
            known = _inputs(server.rest_port, name, version, DEFAULT_SIGNATURE, timeout)
            if arrays is None and len(known) == 1 and np.ndim(inputs) > 0:
                arrays = {next(iter(known)): inputs}
            feeds = conform(arrays, known) if arrays is not None else None
            if feeds is not None:
                outputs = _call(server.channel, server.address, name, feeds, version, None, timeout)
                row_format = not isinstance(inputs, Mapping)
                if _writable(outputs, row_format):
                    return TensorResponse(outputs, row_format, server.base_uri + path)
        except ModelServerTimeout:
            raise  # asking again would wait as long
        except (HandlerError, WireError):  # TensorCallError, ModelServerUnreachable, a missing model or signature
            forget(name, version, DEFAULT_SIGNATURE)  # the REST call says what went wrong
    return client.request(server, "POST", path, rest_body(inputs))
