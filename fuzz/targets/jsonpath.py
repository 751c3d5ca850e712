"""InputFilter/OutputFilter's JSONPath (transform/jsonpath.py): JsonPathSyntaxError when compiled, JsonPathError
when applied, or the value a reference evaluator written here from the module's documented semantics selects.

The first byte's low bit picks inclusive slice ends; the rest is `<path>\\n<JSON document>` (a document that does not
parse is replaced by DOCUMENT). A path in the reference's strict grammar (names of word characters, quoted names
without dots, indexes, one slice per bracket, wildcards) must compile and select what the reference selects; any
path the module compiles selects parts of the document only.
"""

import json
import re
from typing import Any

from sagemaker_tfs.transform.jsonpath import JsonPathError, JsonPathSyntaxError, compile_path

MODULES = ("sagemaker_tfs.transform.jsonpath",)
MAX_LEN = 512
DOCUMENT = {"id": 1, "features": [1, [2, 3], {"x": 4}], "f": {"c1": "a", "c2": None}, "": [], "-1": {"0": [5]}}

_STEP = re.compile(
    r"\.(?P<name>[\w-]+)|\.?\[(?P<names>\s*'[\w -]*'\s*(?:,\s*'[\w -]*'\s*)*)\]|\.\*|\[\s*\*\s*\]"
    r"|\[(?P<items>\s*-?\d*\s*(?::\s*-?\d*\s*)?(?:,\s*-?\d*\s*(?::\s*-?\d*\s*)?)*)\]",
    re.ASCII,  # the module may take more (other digits, blanks and names); the reference is the common ground
)
_ITEM = re.compile(r"\s*(-?\d+)\s*|\s*(-?\d+)?\s*:\s*(-?\d+)?\s*", re.ASCII)


class Undefined(Exception):
    """The reference's verdict that the path does not apply to the document."""


def _steps(text: str) -> list[tuple[str, Any]] | None:
    """The path's steps in the reference grammar, or None for a path outside it."""
    if len(text) > 63 or not text.startswith("$"):
        return None
    steps: list[tuple[str, Any]] = []
    pos = 1
    while pos < len(text):
        match = _STEP.match(text, pos)
        if not match:
            return None
        pos = match.end()
        if match["name"] is not None:
            steps.append(("name", [match["name"]]))
        elif match["names"] is not None:
            steps.append(("name", [part.strip()[1:-1] for part in match["names"].split(",")]))
        elif match["items"] is not None:
            items: list[int | slice] = []
            for part in match["items"].split(","):
                item = _ITEM.fullmatch(part)
                if not item:
                    return None
                if item[1] is not None:
                    items.append(int(item[1]))
                else:
                    items.append(slice(*(None if bound is None else int(bound) for bound in item.groups()[1:])))
            if sum(isinstance(item, slice) for item in items) > 1:
                return None
            steps.append(("index", items))
        else:
            steps.append(("wildcard", None))
    return steps


def _reference(steps: list[tuple[str, Any]], document: Any, inclusive: bool) -> Any:
    """Jayway's reading, as the module documents it: a definite path (single names and indexes) gives its value or
    Undefined; otherwise the list of matches, missing ones skipped, a wrong type Undefined while every step so far
    was definite; several names as the last step make one object per node."""
    nodes, definite = [document], True
    for position, (kind, args) in enumerate(steps):
        leaf = position == len(steps) - 1
        found: list[Any] = []
        for node in nodes:
            if kind == "wildcard":
                found += node.values() if isinstance(node, dict) else node if isinstance(node, list) else []
            elif kind == "name":
                if not isinstance(node, dict):
                    if definite:
                        raise Undefined
                elif len(args) > 1 and leaf:
                    found.append({name: node[name] for name in args if name in node})
                elif len(args) == 1 and definite and args[0] not in node:
                    raise Undefined
                else:
                    found += [node[name] for name in args if name in node]
            elif not isinstance(node, list):
                if definite:
                    raise Undefined
            else:
                for item in args:
                    if isinstance(item, slice):
                        stop = item.stop
                        if inclusive and stop is not None:
                            stop = None if stop == -1 else stop + 1
                        found += node[item.start : stop]
                    elif -len(node) <= item < len(node):
                        found.append(node[item])
                    elif definite and len(args) == 1:
                        raise Undefined
        nodes = found
        single = len(args) == 1 and not isinstance(args[0], slice) if kind != "wildcard" else False
        definite = definite and (single or kind == "name" and leaf)
    return nodes[0] if definite else nodes


def _same(a: Any, b: Any) -> bool:
    """The same selection: the document's own nodes (identity), in lists or objects made for the result."""
    if a is b:
        return True
    if type(a) is not type(b) or not isinstance(a, list | dict) or len(a) != len(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[key], b[key]) for key in a)
    return all(_same(x, y) for x, y in zip(a, b, strict=True))


def _nodes(document: Any) -> set[int]:
    found, stack = set(), [document]
    while stack:
        node = stack.pop()
        found.add(id(node))
        stack.extend(node.values() if isinstance(node, dict) else node if isinstance(node, list) else ())
    return found


def seeds() -> list[bytes]:
    # test/transform/test_jsonpath.py's and test_dataprocessing.py's paths and records
    paths = [
        "$", "$.", "$..id", "$.f.*", "$.f.['c1','c2']", "$.f.['c1','c2.g']", "$.f['c1','c2']", "$.features[*]",
        "$.features[-1]", "$.features[0]", "$.id", "$.missing", "$['id','SageMakerOutput']", "$['id']", "$[*].x",
        "$[0", "$[0,-1]", "$[0,2:]", "$[0:2,246:]", "$[0]", "$[1:-1]", "$[1:3]", "$[1:]", "$[3,0]", "$[5]", "$[:2]",
        "$[?(@.id)]", "$.predictions[0]", "$[9]",
    ]  # fmt: skip
    documents = [b"", b'{"id": 7, "features": [1, 2, 3], "SageMakerOutput": {"p": 0.5}}', b'[{"x": 1}, {"y": 2}, 3]']
    return [bytes([flag]) + path.encode() + b"\n" + doc for flag in (0, 1) for path in paths for doc in documents]


def one_input(data: bytes) -> None:
    if not data:
        return
    inclusive = bool(data[0] & 1)
    path_bytes, _, doc_bytes = data[1:].partition(b"\n")
    text = path_bytes.decode("utf-8", "replace")
    try:
        document = json.loads(doc_bytes)
    except (ValueError, RecursionError):
        document = DOCUMENT
    steps = _steps(text)
    try:
        path = compile_path(text, inclusive)
    except JsonPathSyntaxError as exc:
        assert str(exc).startswith(f"Invalid JsonPath: {text}"), exc
        assert steps is None or ".." in text, (text, steps, exc)  # a path of the grammar is SageMaker's
        return
    try:
        got = path.apply(document)
    except JsonPathError as exc:
        got = exc
    if text == "$":
        assert got is document
    if steps is not None:
        try:
            expected = _reference(steps, document, inclusive)
        except Undefined:
            assert isinstance(got, JsonPathError), (text, document, got)
            return
        assert not isinstance(got, JsonPathError), (text, document, got, expected)
        assert _same(got, expected), (text, document, got, expected)
    if isinstance(got, JsonPathError):
        assert str(got).startswith(f"{text}: "), got
        return
    inside = _nodes(document)
    for part in got if isinstance(got, list) and not path.is_root else [got]:
        values = part.values() if isinstance(part, dict) and id(part) not in inside else [part]
        assert all(id(value) in inside for value in values), (text, document, got)
