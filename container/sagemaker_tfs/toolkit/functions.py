"""A toolkit script's functions, checked at start-up: which are defined, and whether each takes `context`.

As the toolkit: `n = len(inspect.signature(fn).parameters)` (every parameter counts, defaults, *args and
**kwargs included); with k contract arguments, n == k means no context, n == k + 1 the context last,
anything else is refused with the toolkit's text (it only failed at the first request).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from ..shared.cooperative import call_script
from ..shared.handler_contract import TOOLKIT_NAMES

# name -> the contract arguments it is called with (the context comes after them)
ARGUMENTS = {
    "pre_model_fn": ("model_dir",),
    "model_fn": ("model_dir",),
    "model_warmup_fn": ("model_dir", "model"),
    "input_fn": ("input_data", "content_type"),
    "predict_fn": ("data", "model"),
    "output_fn": ("prediction", "accept"),
    "transform_fn": ("model", "input_data", "content_type", "accept"),
}
NAMES = TOOLKIT_NAMES
TRANSFORM_CONFLICT = (
    "Cannot use transform_fn implementation in conjunction with input_fn, predict_fn, and/or output_fn implementation"
)


class FunctionError(ValueError):
    """A toolkit function cannot be called as the contract calls it; the message says why."""


@dataclass(frozen=True)
class Function:
    """A script function and whether it takes the context."""

    name: str
    fn: Callable
    takes_context: bool

    def __call__(self, context: Any, *args: Any) -> Any:
        return call_script(self.fn, *args, context) if self.takes_context else call_script(self.fn, *args)


def bind(name: str, fn: Callable) -> Function:
    expected = len(ARGUMENTS[name])
    try:
        count = len(inspect.signature(fn).parameters)
    except (TypeError, ValueError) as exc:  # a builtin without a signature
        raise FunctionError(f"{name}: cannot read its signature ({exc})") from None
    if count not in (expected, expected + 1):
        raise FunctionError(f"{name} takes {count} arguments but {expected} were given.")
    return Function(name, fn, count == expected + 1)


@dataclass(frozen=True)
class ToolkitFunctions:
    """The functions a script defines; None where the default applies."""

    script: Path
    pre_model_fn: Function | None = None
    model_fn: Function | None = None
    model_warmup_fn: Function | None = None
    input_fn: Function | None = None
    predict_fn: Function | None = None
    output_fn: Function | None = None
    transform_fn: Function | None = None

    @property
    def defined(self) -> list[str]:
        return [name for name in NAMES if getattr(self, name) is not None]


def from_module(module: ModuleType, path: Path) -> ToolkitFunctions:
    """The toolkit functions of an imported script; FunctionError when one is not callable, takes the wrong
    number of arguments, or transform_fn comes with input_fn, predict_fn or output_fn."""
    found = {name: getattr(module, name) for name in NAMES if getattr(module, name, None) is not None}
    for name, fn in found.items():
        if not callable(fn):
            raise FunctionError(f"{name} is not a function")
    if "transform_fn" in found and found.keys() & {"input_fn", "predict_fn", "output_fn"}:
        raise FunctionError(TRANSFORM_CONFLICT)
    return ToolkitFunctions(path, **{name: bind(name, fn) for name, fn in found.items()})
