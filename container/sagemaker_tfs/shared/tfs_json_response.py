"""TFS REST response bodies, byte for byte: predictions / outputs / results, and errors.

Row format (`instances` requests) writes `predictions` with each row on one line; columnar (`inputs`)
writes `outputs` with every array over several lines; see docs/tfs-compatibility.md §3. Leaves are
formatted for a whole tensor at once (json_text.float_texts), then grouped into nested arrays bottom-up. The rows
of a batched task (batching.BatchRows) are cut from its batch's rows, written once for the whole batch. A big float32
tensor is written in one pass instead (_float32_items: its texts, brackets and separators made by numpy), and in
the row format of one output straight into the body.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from . import dtypes
from .error_codes import invalid_argument
from .tfs_json_text import VECTOR_MIN, float32_json, float_texts, string

Layout = Callable[[int], tuple[str, str, str]]  # level -> (open, separator, close)
_FLOAT32 = np.dtype(np.float32)


def _indent(depth: int) -> str:
    return "\n" + "    " * depth


def _single_line(level: int) -> tuple[str, str, str]:
    return "[", ", ", "]"


def _multi_line(base_depth: int) -> Layout:
    def layout(level: int) -> tuple[str, str, str]:
        depth = base_depth + level
        return "[" + _indent(depth + 1), "," + _indent(depth + 1), _indent(depth) + "]"

    return layout


def error_body(message: str) -> bytes:
    return ('{\n    "error": ' + string(message) + "\n}").encode("utf-8")


def _leaf_texts(alias: str, array: np.ndarray, depth: int) -> list[str]:
    """The JSON text of every element; depth = containers around a leaf (b64 objects indent by it)."""
    kind = array.dtype.kind
    if kind == "f" and array.dtype in (np.float32, np.float64):
        return float_texts(array)
    flat = array.reshape(-1).tolist()
    if kind == "b":
        return ["true" if v else "false" for v in flat]
    if kind in "iu":
        return list(map(str, flat))
    if kind in "OSU":
        flat = [v if isinstance(v, bytes) else str(v).encode("utf-8") for v in flat]
        if alias.endswith("_bytes"):
            head, tail = "{" + _indent(depth + 1) + '"b64": "', '"' + _indent(depth) + "}"
            return [head + base64.b64encode(v).decode("ascii") + tail for v in flat]
        return [string(v.decode("utf-8", "replace")) for v in flat]
    try:
        name = dtypes.name(dtypes.from_numpy(array.dtype))
    except ValueError:
        name = str(array.dtype)
    raise invalid_argument(f"Failed to write JSON value for tensor type: {name}")


def _group(texts: list[str], shape: Sequence[int], first_level: int, layout: Layout) -> list[str]:
    """Nest leaf texts into arrays for the levels >= first_level; returns the items of level first_level."""
    items = texts
    for level in range(len(shape) - 1, first_level - 1, -1):
        size = shape[level]
        if size == 0:
            items = ["[]"] * int(np.prod(shape[:level], dtype=np.int64))
            continue
        open_, sep, close = layout(level)
        items = [open_ + sep.join(items[i : i + size]) + close for i in range(0, len(items), size)]
    return items


def _joined_rows(level: int) -> tuple[str, str, str]:
    """The row format's rows joined by ", " (the list around them is the body's)."""
    return ("", ", ", "") if level == 0 else ("[", ", ", "]")


def _float32_items(
    array: np.ndarray,
    first_level: int,
    layout: Layout,
    before: bytes = b"",
    after_all: bytes = b"",
    boundary: str = "\x01",
) -> bytes | None:
    """before + the texts _group gives for a big float32 tensor, each item followed by `boundary`, + after_all;
    written in one pass (float32_json) with the brackets and separators between the elements: what follows
    element i depends only on how many dimensions end at it. (One join: a big text's copies cost more than its
    digits.)"""
    if array.size < VECTOR_MIN or array.dtype != _FLOAT32 or array.ndim <= first_level:  # (the size first: cheapest)
        return None
    shape, rank = array.shape, array.ndim
    levels = range(first_level, rank)
    opens = "".join(layout(level)[0] for level in levels)
    closes = "".join(layout(level)[2] for level in reversed(levels))
    after = []  # [k]: the text after an element at which k dimensions end
    for ended in range(rank - first_level):
        inner = range(rank - ended, rank)
        after.append(
            "".join(layout(level)[2] for level in reversed(inner))
            + layout(rank - 1 - ended)[1]
            + "".join(layout(level)[0] for level in inner)
        )
    after.append(closes + boundary + opens)  # an item ends, the next one opens
    ends = np.zeros(shape, np.uint8)  # [item]: how many dimensions end after it
    for depth in range(1, rank - first_level + 1):
        ends[(Ellipsis,) + (-1,) * depth] += 1
    pieces = float32_json(array, [s.encode("ascii") for s in after], ends.reshape(-1))
    pieces[-1] = pieces[-1][: len(pieces[-1]) - len(opens)]  # without the opening after the last item
    return b"".join([before, opens.encode("ascii"), *pieces, after_all])


def _float32_group(array: np.ndarray, first_level: int, layout: Layout) -> list[str] | None:
    """_group's items for a big float32 tensor (_float32_items)."""
    items = _float32_items(array, first_level, layout)  # \x01: in no text
    return None if items is None else items.decode("ascii").split("\x01")[:-1]


def _nested(alias: str, array: np.ndarray, base_depth: int) -> str:
    """A whole tensor, multi-line, written at base_depth (columnar format)."""
    fast = _float32_group(array, 0, _multi_line(base_depth)) if array.size >= VECTOR_MIN else None
    if fast is not None:
        return fast[0]
    texts = _leaf_texts(alias, array, base_depth + array.ndim)
    if array.ndim == 0:
        return texts[0]
    return _group(texts, array.shape, 0, _multi_line(base_depth))[0]


def _rows(alias: str, array: np.ndarray, row_depth: int) -> list[str]:
    """The one-line text of each row (dim 0) of a tensor whose rows are written at row_depth."""
    whole = getattr(array, "whole", None)
    if whole is not None:  # a task's rows of a batched tensor (batching.BatchRows): cut from the whole's rows
        batch: Any = array  # (that class is the model server's)
        key = ("rows", alias, row_depth)
        rows = batch.memo.get(key)
        if rows is None:
            rows = batch.memo[key] = _rows(alias, whole, row_depth)
        return rows[batch.start : batch.stop]
    fast = _float32_group(array, 1, _single_line) if array.size >= VECTOR_MIN else None
    if fast is not None:
        return fast
    texts = _leaf_texts(alias, array, row_depth + array.ndim - 1)
    return _group(texts, array.shape, 1, _single_line)


def _check_rows(outputs: Mapping[str, np.ndarray]) -> None:
    batch = None
    for alias, array in outputs.items():
        if array.ndim == 0:
            raise invalid_argument(f"Tensor name: {alias} has no shape information ")
        if batch is None:
            batch = array.shape[0]
        elif array.shape[0] != batch:
            raise invalid_argument(
                f"Tensor name: {alias} has inconsistent batch size: {array.shape[0]} expecting: {batch}"
            )


def predict_body(outputs: Mapping[str, np.ndarray], row_format: bool) -> bytes:
    """The response to a predict request: `predictions` for `instances`, `outputs` for `inputs`."""
    aliases = sorted(outputs)
    if row_format:
        _check_rows(outputs)
        if len(aliases) == 1:
            array = outputs[aliases[0]]
            if array.size >= VECTOR_MIN and getattr(array, "whole", None) is None:
                # a big float32 tensor (not a batch's rows: those are cut from the batch's): the body at once
                body = _float32_items(array, 0, _joined_rows, b'{\n    "predictions": [', b"\n    ]\n}", "")
                if body is not None:
                    return body
            rows = _rows(aliases[0], array, 2)
            text = '{\n    "predictions": [' + ", ".join(rows) + ("\n    ]\n}" if rows else "]\n}")
        else:
            columns = [_rows(alias, outputs[alias], 3) for alias in aliases]
            keys = ["            " + string(alias) + ": " for alias in aliases]
            objects = [
                "        {\n"
                + ",\n".join(key + column[i] for key, column in zip(keys, columns, strict=True))
                + "\n        }"
                for i in range(len(columns[0]))
            ]
            text = (
                '{\n    "predictions": [\n' + ",\n".join(objects) + "\n    ]\n}"
                if objects
                else '{\n    "predictions": []\n}'
            )
    elif len(aliases) == 1:
        text = '{\n    "outputs": ' + _nested(aliases[0], outputs[aliases[0]], 1) + "\n}"
    else:
        members = [f"        {string(alias)}: " + _nested(alias, outputs[alias], 2) for alias in aliases]
        text = '{\n    "outputs": {\n' + ",\n".join(members) + "\n    }\n}"
    return text.encode("utf-8")


def regress_body(values: np.ndarray) -> bytes:
    return ('{\n    "results": [' + ", ".join(float_texts(values.astype(np.float32))) + "]\n}").encode("utf-8")


def classify_body(labels: Sequence[Sequence[bytes]] | None, scores: np.ndarray | None, count: int) -> bytes:
    """`results`: per example, a [label, score] pair per class ("" without labels, 0.0 without scores)."""
    rows = []
    for i in range(count):
        if labels is not None:
            classes = len(labels[i])
        else:
            assert scores is not None  # (one of the two is given)
            classes = scores.shape[1]
        label_texts = (
            [string(v.decode("utf-8", "replace")) for v in labels[i]] if labels is not None else ['""'] * classes
        )
        score_texts = float_texts(scores[i]) if scores is not None else ["0.0"] * classes
        pairs = zip(label_texts, score_texts, strict=True)
        rows.append("[" + ", ".join(f"[{label}, {score}]" for label, score in pairs) + "]")
    return ('{\n    "results": [' + ", ".join(rows) + "\n    ]\n}").encode("utf-8")
