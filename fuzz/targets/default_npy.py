"""application/x-npy bodies through the default handler (shared/npy.load, the array the binary path sends, and
codecs.tfs_request, its JSON instances), against numpy.load(allow_pickle=False): the same array (dtype, shape,
values, NaN equal to NaN) and its first axis as the instances, or a 400 naming the problem; never an unpickle."""

from __future__ import annotations

import io
import math
import pickle
from typing import Any

import numpy as np
from sagemaker_tfs import codecs
from sagemaker_tfs.shared import npy

from fuzz.targets._default_handler import accepted, instances, outcome, refused, same

MODULES = ("sagemaker_tfs.shared.npy",)


def seeds() -> list[bytes]:
    """The arrays of test/app/test_app_binary_path.py and test/unit/test_toolkit_units.py, and a few headers."""
    arrays = [
        np.array([[1.0], [5.0]]),
        np.array([1.0, 2.0, 5.0]),
        np.array([[1], [2]], np.int64),
        np.array(["a", "bc"]),
        np.array([True]),
        np.array([[1.5, np.nan], [-np.inf, 0.0]], np.float32),
        np.zeros((2, 0, 3), np.uint8),
        np.array(3, np.int16),
        np.array([(1, 2.0)], dtype=[("a", "<i4"), ("b", ">f8")]),
        np.array([b"x"]),
        np.array([1 + 2j]),
        np.arange(6, dtype=np.uint64).reshape(2, 3).T,  # Fortran order
    ]
    bodies = []
    for array in arrays:
        buffer = io.BytesIO()
        np.save(buffer, array, allow_pickle=False)
        bodies.append(buffer.getvalue())
    header = b"{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }"
    version_2 = b"\x93NUMPY\x02\x00" + len(header).to_bytes(4, "little") + header
    return [*bodies, b"", b"\x93NUMPY\x01\x00", b"PK\x03\x04", pickle.dumps([1.0]), version_2 + bytes(16)]


def _no_unpickling(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the NPY reader unpickled the body")


def one_input(data: bytes) -> None:
    loads, load = pickle.loads, pickle.load
    pickle.loads = pickle.load = _no_unpickling
    try:
        array = outcome(lambda: npy.load(data))
        request = outcome(lambda: codecs.tfs_request(data, npy.NPY))
    finally:
        pickle.loads, pickle.load = loads, load
    try:
        reference = np.load(io.BytesIO(data), allow_pickle=False)
    except Exception:  # noqa: BLE001 - numpy's refusal, whatever its type, must be ours, a 400
        refused(array, 400, "NPY body", "empty request body")
        refused(request, 400, "NPY body", "empty request body")
        return
    if not data.startswith(npy.MAGIC):  # numpy reads .npz archives too, lazily; ours reads NPY only
        refused(array, 400, "NPY magic")
        return refused(request, 400, "NPY magic")
    if math.prod(max(length, 1) for length in reference.shape) > len(data):  # elements of no bytes: refused
        refused(array, 400, "elements (empty axes counted as one)")
        return refused(request, 400, "elements (empty axes counted as one)")
    assert isinstance(array, np.ndarray), array
    assert (array.dtype, array.shape) == (reference.dtype, reference.shape), (array.dtype, array.shape)
    assert same(array.tolist(), reference.tolist()), data[:300]
    try:
        values = reference.tolist()
        _json_types(values)
    except TypeError:  # bytes, complex, dates: no JSON for them
        return refused(request, 400, "cannot be sent to the model server as JSON")
    assert same(instances(accepted(request)), values), data[:300]


def _json_types(value: Any) -> None:
    """TypeError unless the value is what JSON writes: lists (or records) of numbers, booleans and strings."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, (list, tuple)):
            stack.extend(item)
        elif not isinstance(item, (bool, int, float, str)):
            raise TypeError(type(item).__name__)
