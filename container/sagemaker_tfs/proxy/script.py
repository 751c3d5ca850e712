"""Finding `<model_dir>/code/<SAGEMAKER_PROGRAM>` (inference.py), importing it, and telling which contract it uses."""

from __future__ import annotations

import enum
import importlib.util
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from .. import codecs
from ..toolkit import functions
from ..toolkit.functions import NAMES as TOOLKIT_NAMES

log = logging.getLogger("sagemaker_tfs.proxy")

# The original container's message, kept so that searches for it find the explanation.
HANDLERS_NOT_IMPLEMENTED = "Handlers are not implemented correctly in user script."
TFS_NAMES = ("handler", "input_handler", "output_handler")


class ScriptError(RuntimeError):
    """The handler script cannot be used; the message says why."""


class Contract(enum.Enum):
    TFS = "tfs"  # handler, or input_handler + output_handler
    TOOLKIT = "toolkit"  # the SageMaker inference toolkit's model_fn, input_fn, predict_fn, output_fn, ...


def choose_contract(names: Iterable[str], path: Path | str, choice: str = "auto") -> Contract:
    """The contract of a script defining `names` (module-level, imported ones count): SAGEMAKER_INFERENCE_CONTRACT
    (`choice`) when it is tfs or toolkit, else the set the names belong to; ScriptError for both sets or neither."""
    names = set(names)
    tfs = [name for name in TFS_NAMES if name in names]
    toolkit = [name for name in TOOLKIT_NAMES if name in names]
    if choice != "auto":
        contract = Contract(choice)
        ignored = toolkit if contract is Contract.TFS else tfs
        if ignored:
            log.info("%s: SAGEMAKER_INFERENCE_CONTRACT=%s, so %s %s ignored", path, choice, ", ".join(ignored),
                     "is" if len(ignored) == 1 else "are")
        return contract
    if tfs and toolkit:
        raise ScriptError(f"{path} defines both TensorFlow Serving handlers ({', '.join(tfs)}) and inference "
                          f"toolkit functions ({', '.join(toolkit)}): keep one contract, or set "
                          "SAGEMAKER_INFERENCE_CONTRACT to tfs or toolkit")
    return Contract.TOOLKIT if toolkit else Contract.TFS


@dataclass(frozen=True)
class Handlers:
    """The entry points of the chosen contract: `handler` alone, `input_handler` + `output_handler`, or the
    toolkit's functions."""

    contract: str  # "handler", "input_handler + output_handler", "default" or "toolkit"
    script: Path | None
    handler: Callable | None = None
    input_handler: Callable | None = None
    output_handler: Callable | None = None
    toolkit: Any = None  # toolkit.functions.ToolkitFunctions for the toolkit contract


DEFAULT = Handlers("default", None, input_handler=codecs.default_input_handler,
                   output_handler=codecs.default_output_handler)


def load(model_dir: str | Path, program: str = "inference.py", choice: str = "auto") -> Handlers:
    """Import code/<program> (with code/ and code/lib on sys.path) and pick its contract (choose_contract; for
    TFS, `handler` wins, else the `input_handler` + `output_handler` pair); no script means the default
    handler (codecs)."""
    code = Path(model_dir) / "code"
    path = code / program
    if not path.is_file():
        log.info("no handler script at %s: the default handler serves /invocations (JSON, JSON lines and CSV, "
                 "see sagemaker_tfs.codecs)", path)
        return DEFAULT
    for folder in (code / "lib", code):  # code/ first, then code/lib, like PYTHONPATH=code:code/lib
        if folder.is_dir() and str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    module = _import(path)
    if choose_contract((name for name in TFS_NAMES + TOOLKIT_NAMES if hasattr(module, name)), path,
                       choice) is Contract.TOOLKIT:
        return _toolkit(module, path)
    handlers = contract(module, path)
    log.info("handler script %s: %s", path, _signature(handlers))
    return handlers


def _import(path: Path):
    spec = importlib.util.spec_from_file_location("inference", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["inference"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        sys.modules.pop("inference", None)
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        raise ScriptError(f"{path} failed to import: {type(exc).__name__}: {exc}") from exc
    return module


def contract(module, path: Path) -> Handlers:
    """The contract a script module implements (presence of names, as the original), or ScriptError."""
    names = [name for name in ("handler", "input_handler", "output_handler") if hasattr(module, name)]
    for name in names:
        if not callable(getattr(module, name)):
            raise ScriptError(f"{HANDLERS_NOT_IMPLEMENTED} {path}: {name} is not a function")
    if "handler" in names:
        return Handlers("handler", path, handler=module.handler)
    if names == ["input_handler", "output_handler"]:
        return Handlers("input_handler + output_handler", path, input_handler=module.input_handler,
                        output_handler=module.output_handler)
    found = f"defines only {names[0]}" if names else "defines none of them"
    raise ScriptError(f"{HANDLERS_NOT_IMPLEMENTED} {path} {found}: define handler(data, context), or both "
                      "input_handler(data, context) and output_handler(response, context)")


def _toolkit(module, path: Path) -> Handlers:
    try:
        bound = functions.from_module(module, path)
    except functions.FunctionError as exc:
        raise ScriptError(f"{path}: {exc}") from None
    log.info("handler script %s: inference toolkit functions %s", path, ", ".join(bound.defined))
    return Handlers("toolkit", path, toolkit=bound)


def _signature(handlers: Handlers) -> str:
    if handlers.contract == "handler":
        return "handler(data, context) answers each request"
    return "input_handler(data, context) -> model server -> output_handler(response, context)"
