"""NPY bodies (`application/x-npy`, the SageMaker SDK's NumpySerializer), read and written without pickle.

Both contracts use it: the default handler (the array becomes the instances) and the toolkit's default decoder
and encoder. A pickled (object) array is refused: unpickling a request body runs the client's code. numpy is
imported on the first NPY body only: the serving image has no numpy unless a script's requirements bring it.
"""

from __future__ import annotations

import io
import json
import math
from typing import Any

from ..errors import HandlerError
from .media_types import NPY

MAGIC = b"\x93NUMPY"


def numpy(status: int) -> Any:
    """The numpy module; HandlerError(status) saying how to get it when it is not installed."""
    try:
        import numpy
    except ImportError:
        raise HandlerError(
            status, f"{NPY} needs numpy, which is not installed: add numpy to code/requirements.txt"
        ) from None
    return numpy


def load(body: bytes | bytearray | memoryview) -> Any:
    """The array of an NPY body; HandlerError 400 for an empty, corrupt or pickled one, or one of more elements than
    bytes (what only elements of no bytes allow)."""
    if not body:
        raise HandlerError(400, "empty request body")
    if bytes(body[:6]) != MAGIC:  # np.load would try pickle.load on anything else
        raise HandlerError(400, "cannot read the NPY body: it does not start with the NPY magic \\x93NUMPY")
    np = numpy(415)
    try:
        array = np.load(io.BytesIO(body), allow_pickle=False)
    except ValueError as exc:
        if "allow_pickle" in str(exc):  # numpy's text for an object array
            raise HandlerError(
                400,
                "cannot read the NPY body: it holds Python objects (a pickled payload), which "
                "are refused (allow_pickle=False); send an array of numbers or strings",
            ) from None
        raise HandlerError(400, f"cannot read the NPY body: {exc}") from None
    except (OSError, EOFError) as exc:
        raise HandlerError(400, f"cannot read the NPY body: {exc or type(exc).__name__}") from None
    except Exception as exc:  # noqa: BLE001 - numpy lets its parsers' errors out (tokenize's TokenError, ...)
        raise HandlerError(400, f"cannot read the NPY body: {type(exc).__name__}: {exc}") from None
    # Elements of no bytes (a zero-width dtype, or the axes before an empty one) take no room in the body, yet each
    # becomes an object in the instances: a header of a few bytes would make billions of them.
    elements = math.prod(max(length, 1) for length in array.shape)
    if elements > len(body):
        raise HandlerError(
            400,
            f"cannot read the NPY body: its shape {array.shape} of {array.dtype} has {elements} elements (empty "
            f"axes counted as one) but the body has {len(body)} bytes",
        )
    return array


def dump(array: Any) -> bytes:
    """The NPY file of an array; ValueError for an object array (it would need pickle)."""
    buffer = io.BytesIO()
    numpy(406).save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def tfs_request(body: bytes) -> bytes:
    """The TFS REST request of an NPY body: the array (its first axis) as the instances."""
    return instances_request(load(body))


def instances_request(array: Any) -> bytes:
    """The TFS REST request of an array: its first axis as the instances."""
    try:
        instances = json.dumps(array.tolist())
    except TypeError:
        raise HandlerError(
            400,
            f"the NPY array's dtype {array.dtype} cannot be sent to the model server as JSON: "
            "send numbers, booleans or unicode strings",
        ) from None
    return b'{"instances": ' + instances.encode() + b"}"


def predictions_body(predictions: list) -> bytes:
    """The predictions as one NPY array; HandlerError 406 naming why when they are not rectangular numbers."""
    try:
        array = numpy(406).asarray(predictions)
    except ValueError as exc:
        raise HandlerError(
            406, f"the predictions cannot be an NPY array: they are not rectangular ({exc}); accept application/json"
        ) from None
    if array.dtype == object:
        raise HandlerError(
            406,
            "the predictions cannot be an NPY array: they hold objects (a model with several "
            "outputs answers one object per instance); accept application/json",
        )
    if array.dtype.kind == "U" and array.tolist() != predictions:  # numpy made strings of the numbers
        raise HandlerError(
            406, "the predictions cannot be an NPY array: they mix strings and numbers; accept application/json"
        )
    return dump(array)
