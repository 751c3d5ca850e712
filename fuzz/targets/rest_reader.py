"""The REST request body reader (model_server/json_request.py): its numeric fast path against its usual path.

The first byte picks the model's signature (one input of some dtype, two named inputs, or a classify request);
the rest is the body. A predict body goes through both paths as rest.py calls them: predict_request with the
signature's dtype, the fast path taken from any size (FAST_MIN_BYTES 0 for that call), and request_object, the
usual parse that alone decides errors; both must give the same tensors to the bit (NaN and -0.0 included) or the
same status and message. A classify body may only fail with the client's error.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from sagemaker_tfs.model_server import json_request
from sagemaker_tfs.model_server.servable import TensorInfo
from sagemaker_tfs.shared import dtypes
from sagemaker_tfs.shared.error_codes import Code, ServingError

# json_request imports it at the first classify request: TensorFlow's import takes seconds, here once rather than
# within an input's time limit
from tensorflow.core.example import example_pb2  # noqa: F401

MODULES = ("sagemaker_tfs.model_server.json_request",)
MAX_LEN = 2048


def _one(dtype: int) -> dict[str, TensorInfo]:
    return {"x": TensorInfo("x", "x:0", dtype, (-1,))}


# the fast path serves float and double inputs only: they come up more often
_SIGNATURES: list[dict[str, TensorInfo] | None] = [
    _one(dtypes.DT_FLOAT),
    _one(dtypes.DT_DOUBLE),
    _one(dtypes.DT_FLOAT),
    _one(dtypes.DT_DOUBLE),
    _one(dtypes.DT_INT32),
    _one(dtypes.DT_INT64),
    _one(dtypes.DT_UINT8),
    _one(dtypes.DT_BOOL),
    _one(dtypes.DT_STRING),
    _one(dtypes.DT_HALF),  # not convertible from JSON: UNIMPLEMENTED
    {"a": TensorInfo("a", "a:0", dtypes.DT_FLOAT, None), "b": TensorInfo("b", "b:0", dtypes.DT_INT32, None)},
    {},
    None,  # classify/regress: the body's tf.Examples
]
_CLIENT_CODES = (Code.INVALID_ARGUMENT, Code.UNIMPLEMENTED)

Outcome = tuple[str, Any]  # ("error", (code, message)) or ("tensors", (signature name, rows, tensors))


def _tensors(doc_of: Callable[[bytes], dict], body: bytes, inputs: dict[str, TensorInfo]) -> Outcome:
    """What rest.py's predict gets from the body: (signature name, tensors, row format), or the error."""
    try:
        doc = doc_of(body)
        name = json_request.signature_name(doc)
        with np.errstate(over="ignore"):  # the server mutes numpy's cast overflow (inf, as in TFS)
            tensors, rows = json_request.predict_inputs(doc, inputs, json_request.may_hold_bools(doc, body))
    except ServingError as exc:
        assert exc.code in _CLIENT_CODES, exc
        return "error", (exc.code, exc.message)
    return "tensors", (name, rows, tensors)


def _fast(body: bytes, inputs: dict[str, TensorInfo]) -> Outcome:
    dtype = next(iter(inputs.values())).dtype if len(inputs) == 1 else None
    kept = json_request.FAST_MIN_BYTES
    json_request.FAST_MIN_BYTES = 0
    try:
        return _tensors(lambda text: json_request.predict_request(text, lambda name: dtype), body, inputs)
    finally:
        json_request.FAST_MIN_BYTES = kept


def _same_array(actual: np.ndarray, expected: np.ndarray) -> None:
    assert (actual.dtype, actual.shape) == (expected.dtype, expected.shape), (actual.dtype, actual.shape, expected)
    if expected.dtype == object:
        assert actual.tolist() == expected.tolist()
    else:  # to the bit: NaN payloads and -0.0 too
        assert actual.tobytes() == expected.tobytes(), (actual, expected)


def one_input(data: bytes) -> None:
    if not data:
        return
    inputs, body = _SIGNATURES[data[0] % len(_SIGNATURES)], data[1:]
    if inputs is None:
        try:
            json_request.serialized_examples(json_request.request_object(body))
        except ServingError as exc:
            assert exc.code is Code.INVALID_ARGUMENT, exc
        return
    usual, fast = _tensors(json_request.request_object, body, inputs), _fast(body, inputs)
    assert usual[0] == fast[0], (usual, fast)
    if usual[0] == "error":
        assert usual == fast, (usual, fast)
        return
    (name, rows, tensors), (fast_name, fast_rows, fast_tensors) = usual[1], fast[1]
    assert (name, rows, list(tensors)) == (fast_name, fast_rows, list(fast_tensors)), (usual, fast)
    for alias, array in tensors.items():
        _same_array(fast_tensors[alias], array)


def _test_literals() -> list[bytes]:
    """The request bodies of the REST tests: bytes literals that open an object, and the arrays (str literals that
    open a list) of the numeric path's tests as `instances`."""
    test = Path(__file__).resolve().parents[2] / "test" / "model_server"
    found = []
    for name in ("test_model_server_rest.py", "test_model_server_units.py"):
        for node in ast.walk(ast.parse((test / name).read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, bytes) and node.value.startswith(b"{"):
                found.append(node.value)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("[["):
                found.append(b'{"instances": ' + node.value.encode() + b"}")
    return found


def seeds() -> list[bytes]:
    numbers = b'{"signature_name": "serving_default", "inputs": [[1e-5, -0.0, 16777217, 3.4028235e38, 1.5e-45]]}'
    bodies = [*_test_literals(), numbers, b'{"instances": [[1, 2], [3, 12345678901234567890]]}']
    modes = {0: bodies, 1: bodies[::3], 4: bodies[::4], 7: bodies[::5], 8: bodies[::5], 10: bodies[::5]}
    examples = b'{"context": {"c": "a"}, "examples": [{"x": [1.0, 2.5], "n": 3, "s": {"b64": "AAE="}}]}'
    return [bytes([mode]) + body for mode, chosen in modes.items() for body in chosen] + [bytes([12]) + examples]
