"""SageMaker's JSONPath subset for InputFilter and OutputFilter.

Supported (the Developer Guide's table): `$`, `.name`, `*` (`.*` or `[*]`), `['a','b']`, `[i]`, `[i,j,k]`
(negative indexes count from the end), `[start:end]` with either bound optional, and one range mixed with
indexes (`$[0,5:]`). Refused when the job is created, with SageMaker's message where one is known: more than one
range in a bracket, a nested path inside brackets (`['c1','c2.g']`), recursive descent (`..`), filter
expressions, paths not starting with `$`, paths over 63 characters.

Evaluation follows Jayway JsonPath, which SageMaker's documentation cites: a *definite* path (names and single
indexes only) gives one value; a wildcard, several indexes or a slice give a list of the matches; several names
as the last step give an object with those members (`$['id','SageMakerOutput']`). A missing name or an index out
of range on a definite path is an error for that record; in an indefinite path the element is skipped.

[INF] Slice ends are exclusive (`$[1:4]` takes indexes 1, 2 and 3), as in Jayway and JavaScript's `slice()`; the
Developer Guide's prose reads them as inclusive. `compile_path(..., inclusive_slice_end=True)` switches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

MAX_LENGTH = 63


class JsonPathSyntaxError(ValueError):
    """The path is not in SageMaker's subset; raised when the job is validated."""


class JsonPathError(ValueError):
    """The path does not apply to a record (missing member, index out of range, wrong type)."""


@dataclass(frozen=True)
class _Step:
    kind: str  # "name", "names", "wildcard", "index", "indexes"
    names: tuple[str, ...] = ()
    items: tuple[int | slice, ...] = ()

    @property
    def definite(self) -> bool:
        return self.kind in ("name", "index")


_NAME = re.compile(r"[^.\[\]'\"*\s]+")
_QUOTED = re.compile(r"\s*'([^']*)'\s*|\s*\"([^\"]*)\"\s*")
_INDEX = re.compile(r"\s*(-?\d+)\s*")
_RANGE = re.compile(r"\s*(-?\d+)?\s*:\s*(-?\d+)?\s*")


@dataclass(frozen=True)
class JsonPath:
    text: str
    steps: tuple[_Step, ...]
    inclusive_slice_end: bool = False

    @property
    def is_root(self) -> bool:
        return not self.steps

    def apply(self, document: Any) -> Any:
        """The selected part of a parsed JSON document (or CSV row, as a list of strings)."""
        nodes = [document]
        definite = True
        last = len(self.steps) - 1
        for position, step in enumerate(self.steps):
            selected: list[Any] = []
            for node in nodes:
                selected.extend(self._select(step, node, position == last, definite))
            nodes = selected
            # several names as the last step make one object per node, not a list of matches
            definite = definite and (step.definite or step.kind == "names" and position == last)
        return nodes[0] if definite else nodes

    def _select(self, step: _Step, node: Any, leaf: bool, definite: bool) -> list[Any]:
        if step.kind == "wildcard":
            if isinstance(node, dict):
                return list(node.values())
            return list(node) if isinstance(node, list) else []
        if step.kind in ("name", "names"):
            if not isinstance(node, dict):
                if definite:
                    raise JsonPathError(f"{self.text}: expected an object, found {_kind(node)}")
                return []
            if len(step.names) > 1 and leaf:
                return [{name: node[name] for name in step.names if name in node}]
            missing = [name for name in step.names if name not in node]
            if missing and definite and step.kind == "name":
                raise JsonPathError(f"{self.text}: no member {missing[0]!r} in the record")
            return [node[name] for name in step.names if name in node]
        if not isinstance(node, list):
            if definite:
                raise JsonPathError(f"{self.text}: expected an array, found {_kind(node)}")
            return []
        selected = []
        for item in step.items:
            if isinstance(item, slice):
                selected.extend(node[self._slice(item)])
            elif -len(node) <= item < len(node):
                selected.append(node[item])
            elif definite and step.kind == "index":  # several indexes make the path indefinite: skipped
                raise JsonPathError(f"{self.text}: index {item} is out of range for {len(node)} elements")
        return selected

    def _slice(self, item: slice) -> slice:
        if self.inclusive_slice_end and item.stop is not None:
            return slice(item.start, None if item.stop == -1 else item.stop + 1)
        return item


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return "a string" if isinstance(value, str) else "a scalar"


def compile_path(text: str, inclusive_slice_end: bool = False) -> JsonPath:
    """Parse a filter; JsonPathSyntaxError says what is not supported."""
    if len(text) > MAX_LENGTH:
        raise JsonPathSyntaxError(f"Invalid JsonPath: {text}: longer than {MAX_LENGTH} characters")
    if not text.startswith("$"):
        raise JsonPathSyntaxError(f"Invalid JsonPath: {text}: a path must start with $")
    if ".." in text:
        raise JsonPathSyntaxError(f"Invalid JsonPath: {text}: recursive descent (..) is not supported")
    steps = []
    pos = 1
    while pos < len(text):
        char = text[pos]
        if char == "." and text.startswith(".[", pos):  # $.f.['c1','c2'] is allowed
            pos += 1
            continue
        if char == ".":
            if text.startswith(".*", pos):
                steps.append(_Step("wildcard"))
                pos += 2
                continue
            match = _NAME.match(text, pos + 1)
            if not match:
                raise JsonPathSyntaxError(f"Invalid JsonPath: {text}: expected a name at position {pos + 1}")
            steps.append(_Step("name", names=(match.group(),)))
            pos = match.end()
            continue
        if char == "[":
            end = text.find("]", pos)
            if end < 0:
                raise JsonPathSyntaxError(f"Invalid JsonPath: {text}: unclosed [ at position {pos}")
            steps.append(_bracket(text, text[pos + 1 : end]))
            pos = end + 1
            continue
        raise JsonPathSyntaxError(f"Invalid JsonPath: {text}: unexpected {char!r} at position {pos}")
    return JsonPath(text, tuple(steps), inclusive_slice_end)


def _bracket(text: str, inner: str) -> _Step:
    if inner.strip() == "*":
        return _Step("wildcard")
    parts = inner.split(",")
    if inner.lstrip().startswith(("'", '"')):
        names = []
        for part in parts:
            match = _QUOTED.fullmatch(part)
            if not match:
                raise JsonPathSyntaxError(f"Invalid JsonPath: {text}: [{inner}] mixes names and other selectors")
            name = match.group(1) if match.group(1) is not None else match.group(2)
            if "." in name or "[" in name:
                raise JsonPathSyntaxError(
                    f"Invalid JsonPath: {text}: nested paths are not supported inside brackets ([{inner}])"
                )
            names.append(name)
        return _Step("name" if len(names) == 1 else "names", names=tuple(names))
    items: list[int | slice] = []
    for part in parts:
        index, range_ = _INDEX.fullmatch(part), _RANGE.fullmatch(part)
        if index:
            items.append(int(index.group(1)))
        elif range_:
            start, stop = (None if g is None else int(g) for g in range_.groups())
            items.append(slice(start, stop))
        else:
            raise JsonPathSyntaxError(f"Invalid JsonPath: {text}: [{inner}] is not a supported selector")
    if sum(isinstance(item, slice) for item in items) > 1:
        raise JsonPathSyntaxError(
            f"Invalid JsonPath: {text}: only single range filters of format (eg: [1:5]) are supported. "
            f"Format [{inner}] is not supported"
        )
    if len(items) == 1 and isinstance(items[0], int):
        return _Step("index", items=tuple(items))
    return _Step("indexes", items=tuple(items))
