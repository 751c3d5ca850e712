"""Finding `<model_dir>/code/<SAGEMAKER_PROGRAM>` (inference.py), importing it, and telling which contract it uses."""

from __future__ import annotations

import importlib.util
import logging
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from .. import codecs
from ..shared.handler_contract import (
    HANDLER_NAMES,
    HOW_TO_FIX,
    TOOLKIT_NAMES,
    Contract,
    IncompleteContract,
    MixedContracts,
    detect,
    ignored,
)
from ..toolkit import functions

log = logging.getLogger("sagemaker_tfs.app")

# The original container's message, kept so that searches for it find the explanation.
HANDLERS_NOT_IMPLEMENTED = "Handlers are not implemented correctly in user script."


class ScriptError(RuntimeError):
    """The handler script cannot be used; the message says why."""


@dataclass(frozen=True)
class Handlers:
    """The entry points of the chosen contract: `handler` alone, `input_handler` + `output_handler`, or the
    inference toolkit's functions."""

    contract: Contract
    script: Path | None
    handler: Callable | None = None
    input_handler: Callable | None = None
    output_handler: Callable | None = None
    toolkit: functions.ToolkitFunctions | None = None  # for Contract.TOOLKIT


DEFAULT = Handlers(
    Contract.DEFAULT, None, input_handler=codecs.default_request, output_handler=codecs.default_output_handler
)


def load(model_dir: str | Path, program: str = "inference.py", choice: str = "auto") -> Handlers:
    """Import code/<program> (with code/ and code/lib on sys.path) and pick its contract (handler_contract.detect,
    with SAGEMAKER_INFERENCE_CONTRACT as `choice`); no script means the default handler (codecs)."""
    return load_code(Path(model_dir) / "code", program, choice)


def load_code(code: Path, program: str = "inference.py", choice: str = "auto") -> Handlers:
    """load() for a code folder: its script, with the folder and its lib/ on sys.path for good."""
    path = code / program
    if not path.is_file():
        log.info(
            "no handler script at %s: the default handler serves /invocations (JSON, JSON lines and CSV, "
            "see sagemaker_tfs.codecs)",
            path,
        )
        return DEFAULT
    for folder in (code / "lib", code):  # code/ first, then code/lib, like PYTHONPATH=code:code/lib
        if folder.is_dir() and str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    module = _import(path)
    handlers = contract(module, path, choice)
    log.info("handler script %s: %s", path, _signature(handlers))
    return handlers


def load_private(path: Path, module_name: str) -> tuple[Handlers, list[str]]:
    """Import one model's script (multi-model endpoints) as module `module_name`, with its code/ and code/lib first
    on the path, and pick its contract. The modules it imports from those folders are private to it: modules of
    the same names imported before are hidden during the import, and its own are taken out of sys.modules after
    it (the script keeps them), so that two models' `helpers` are each their own. Returns the handlers and the
    module names to forget when the model is unloaded. Imports at module level only: an import a handler does
    later finds the shared modules."""
    folders = [str(folder) for folder in (path.parent, path.parent / "lib") if folder.is_dir()]
    own = _top_names(folders)
    shadowed = {name: sys.modules.pop(name) for name in list(sys.modules) if name.partition(".")[0] in own}
    before = set(sys.modules)
    sys.path[:0] = folders
    try:
        module = _import(path, module_name)
        return contract(module, path), [module_name]
    finally:
        for folder in folders:
            sys.path.remove(folder)
        for name in set(sys.modules) - before - {module_name}:
            if _is_in(sys.modules.get(name), folders):
                del sys.modules[name]
        sys.modules.update(shadowed)


def _top_names(folders: list[str]) -> set[str]:
    """The top-level module and package names the folders provide."""
    names = set()
    for folder in folders:
        for entry in Path(folder).iterdir():
            if entry.suffix == ".py" or (entry.is_dir() and entry.name.isidentifier()):
                names.add(entry.stem if entry.suffix == ".py" else entry.name)
    return names


def _is_in(module: object, folders: list[str]) -> bool:
    origin = getattr(module, "__file__", None) or ""
    return any(origin.startswith(folder + "/") for folder in folders)


def forget(module_names: list[str]) -> None:
    """Drop an unloaded model's modules (load_private's list)."""
    for name in module_names:
        sys.modules.pop(name, None)


def _import(path: Path, module_name: str = "inference") -> ModuleType:
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:  # a path without a .py suffix
        raise ScriptError(f"{path} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        sys.modules.pop(module_name, None)
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        raise ScriptError(f"{path} failed to import: {type(exc).__name__}: {exc}") from exc
    return module


def with_line(exc: ScriptError, path: Path) -> str:
    """The error's message with the line of `path` where the import failed, when the message lacks it (a
    SyntaxError's names it already: "(inference.py, line 3)")."""
    cause = exc.__cause__
    if cause is None or isinstance(cause, SyntaxError):
        return str(exc)
    lines = [frame.lineno for frame in traceback.extract_tb(cause.__traceback__) if Path(frame.filename) == path]
    return f"{exc} (at {path.name}, line {lines[-1]})" if lines else str(exc)


def contract(module: ModuleType, path: Path, choice: str = "auto") -> Handlers:
    """The contract a script module implements (presence of names, as the original), or ScriptError."""
    present = [name for name in HANDLER_NAMES + TOOLKIT_NAMES if hasattr(module, name)]
    try:
        chosen = detect(present, choice)
    except MixedContracts as exc:
        raise ScriptError(f"{path} {exc}") from None
    except IncompleteContract:
        chosen = Contract.HANDLER  # not complete: worded below, after the names' callability
    skipped = ignored(present, chosen)
    if skipped:
        log.info(
            "%s: SAGEMAKER_INFERENCE_CONTRACT=%s, so %s %s ignored",
            path,
            choice,
            ", ".join(skipped),
            "is" if len(skipped) == 1 else "are",
        )
    if chosen is Contract.TOOLKIT:
        try:
            bound = functions.from_module(module, path)
        except functions.FunctionError as exc:
            raise ScriptError(f"{path}: {exc}") from None
        return Handlers(chosen, path, toolkit=bound)
    names = [name for name in HANDLER_NAMES if hasattr(module, name)]
    for name in names:
        if not callable(getattr(module, name)):
            raise ScriptError(f"{HANDLERS_NOT_IMPLEMENTED} {path}: {name} is not a function")
    try:
        chosen = detect(names)
    except IncompleteContract as exc:
        found = f"defines only {exc.present[0]}" if exc.present else "defines none of them"
        raise ScriptError(f"{HANDLERS_NOT_IMPLEMENTED} {path} {found}: {HOW_TO_FIX}") from None
    if chosen is Contract.HANDLER:
        return Handlers(chosen, path, handler=module.handler)
    return Handlers(chosen, path, input_handler=module.input_handler, output_handler=module.output_handler)


def _signature(handlers: Handlers) -> str:
    if handlers.toolkit is not None:  # Contract.TOOLKIT
        return "inference toolkit functions " + ", ".join(handlers.toolkit.defined)
    if handlers.contract is Contract.HANDLER:
        return "handler(data, context) answers each request"
    return "input_handler(data, context) -> model server -> output_handler(response, context)"


def unload(code: Path) -> None:
    """Undo load_code() in a process that loads another script next (in-process tests): drop the code folder and
    its lib/ from sys.path, and the modules imported from them (inference and its helpers) from sys.modules."""
    folders = (str(code), str(code / "lib"))
    sys.path[:] = [entry for entry in sys.path if entry not in folders]
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if isinstance(file, str) and Path(file).is_relative_to(code):
            del sys.modules[name]
