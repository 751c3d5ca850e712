"""TensorFlow DataType enum values, their names (TF's DataTypeString) and numpy types, without importing TF."""

from __future__ import annotations

import numpy as np

# number: (DataTypeString name, numpy dtype or None when numpy has no exact equivalent)
_TABLE: dict[int, tuple[str, np.dtype | None]] = {
    1: ("float", np.dtype(np.float32)),
    2: ("double", np.dtype(np.float64)),
    3: ("int32", np.dtype(np.int32)),
    4: ("uint8", np.dtype(np.uint8)),
    5: ("int16", np.dtype(np.int16)),
    6: ("int8", np.dtype(np.int8)),
    7: ("string", np.dtype(object)),
    8: ("complex64", np.dtype(np.complex64)),
    9: ("int64", np.dtype(np.int64)),
    10: ("bool", np.dtype(np.bool_)),
    11: ("qint8", None),
    12: ("quint8", None),
    13: ("qint32", None),
    14: ("bfloat16", None),
    15: ("qint16", None),
    16: ("quint16", None),
    17: ("uint16", np.dtype(np.uint16)),
    18: ("complex128", np.dtype(np.complex128)),
    19: ("half", np.dtype(np.float16)),
    20: ("resource", None),
    21: ("variant", None),
    22: ("uint32", np.dtype(np.uint32)),
    23: ("uint64", np.dtype(np.uint64)),
}

_BY_NUMPY = {
    np_dtype: number for number, (_, np_dtype) in _TABLE.items() if np_dtype is not None and np_dtype.kind != "O"
}

DT_FLOAT, DT_DOUBLE, DT_INT32, DT_UINT8, DT_INT16, DT_INT8, DT_STRING = 1, 2, 3, 4, 5, 6, 7
DT_INT64, DT_BOOL, DT_UINT16, DT_HALF, DT_UINT32, DT_UINT64 = 9, 10, 17, 19, 22, 23
DT_COMPLEX64, DT_COMPLEX128 = 8, 18

# The integer types TFS's REST API reads JSON integers into, and the range of each (one outside it is refused).
INT_RANGES = {
    DT_INT8: (-(2**7), 2**7 - 1),
    DT_UINT8: (0, 2**8 - 1),
    DT_INT16: (-(2**15), 2**15 - 1),
    DT_INT32: (-(2**31), 2**31 - 1),
    DT_INT64: (-(2**63), 2**63 - 1),
    DT_UINT32: (0, 2**32 - 1),
    DT_UINT64: (0, 2**64 - 1),
}


def name(dtype: int) -> str:
    """TF's DataTypeString: `float`, `int64`, `string`, ... (`DT_INVALID` for an unknown number)."""
    entry = _TABLE.get(dtype)
    return entry[0] if entry else "DT_INVALID"


def enum_name(dtype: int) -> str:
    """The DataType enum name: `DT_FLOAT`."""
    entry = _TABLE.get(dtype)
    return f"DT_{entry[0].upper()}" if entry else "DT_INVALID"


def to_numpy(dtype: int) -> np.dtype | None:
    entry = _TABLE.get(dtype)
    return entry[1] if entry else None


def from_numpy(dtype: np.dtype) -> int:
    """The DataType of a numpy array's dtype (object and bytes/str arrays are DT_STRING)."""
    dtype = np.dtype(dtype)
    if dtype.kind in "OSU":
        return DT_STRING
    number = _BY_NUMPY.get(dtype)
    if number is None:
        raise ValueError(f"no TensorFlow type for numpy dtype {dtype}")
    return number
