"""Which handler contract a script uses, decided from the names it defines: the one detector.

The app (app/script.py) asks it about an imported module's attributes; `serve` and `package-model`
(packaging.py) about the names found in the source without running it (script_names); each words its own error
around the same finding.
"""

from __future__ import annotations

import ast
from collections.abc import Collection
from enum import Enum
from pathlib import Path

from .model_tree import ModelTreeError


class Contract(Enum):
    """How /invocations reaches the script. The values are what `package-model check` prints."""

    HANDLER = "handler"  # handler(data, context) answers each request
    PAIR = "input_handler/output_handler"  # input_handler -> model server -> output_handler
    DEFAULT = "default"  # no script: the default handler (codecs.py)
    TOOLKIT = "inference toolkit"  # model_fn, input_fn, predict_fn, output_fn, transform_fn... (toolkit/)


HANDLER_NAMES = ("handler", "input_handler", "output_handler")
TOOLKIT_NAMES = ("pre_model_fn", "model_fn", "model_warmup_fn", "input_fn", "predict_fn", "output_fn", "transform_fn")
CHOICES = ("auto", "tfs", "toolkit")  # SAGEMAKER_INFERENCE_CONTRACT
HOW_TO_FIX = "define handler(data, context), or both input_handler(data, context) and output_handler(response, context)"


class IncompleteContract(ValueError):
    """The names fit no contract; `present` lists the handler names the script does define (in HANDLER_NAMES order)."""

    def __init__(self, present: tuple[str, ...]):
        super().__init__(f"defines {', '.join(present) or 'no handler'}: {HOW_TO_FIX}")
        self.present = present


class MixedContracts(ValueError):
    """The names belong to both contracts, and SAGEMAKER_INFERENCE_CONTRACT does not choose."""

    def __init__(self, tfs: tuple[str, ...], toolkit: tuple[str, ...]):
        super().__init__(
            f"defines both TensorFlow Serving handlers ({', '.join(tfs)}) and inference toolkit "
            f"functions ({', '.join(toolkit)}): keep one contract, or set SAGEMAKER_INFERENCE_CONTRACT "
            "to tfs or toolkit"
        )


def ignored(names: Collection[str], contract: Contract) -> tuple[str, ...]:
    """The names of the other contract, which a script using `contract` defines for nothing."""
    other = HANDLER_NAMES if contract is Contract.TOOLKIT else TOOLKIT_NAMES
    return tuple(name for name in other if name in names)


def detect(names: Collection[str], choice: str = "auto") -> Contract:
    """The contract of a script whose module-level names are `names`: the inference toolkit's when it defines only
    toolkit names (or `choice`, SAGEMAKER_INFERENCE_CONTRACT, is "toolkit"); else the TFS contracts as the
    original container chooses: `handler` wins, else both `input_handler` and `output_handler`; else
    IncompleteContract. Names of both sets with `choice` "auto" are MixedContracts."""
    tfs = tuple(name for name in HANDLER_NAMES if name in names)
    toolkit = tuple(name for name in TOOLKIT_NAMES if name in names)
    if choice == "toolkit" or (choice == "auto" and toolkit and not tfs):
        return Contract.TOOLKIT
    if choice == "auto" and toolkit:
        raise MixedContracts(tfs, toolkit)
    if "handler" in names:
        return Contract.HANDLER
    if "input_handler" in names and "output_handler" in names:
        return Contract.PAIR
    raise IncompleteContract(tuple(name for name in HANDLER_NAMES if name in names))


class UncompilableScript(ValueError):
    """The script does not compile; the message says where."""


def script_names(script: Path) -> set[str]:
    """The script's module-level names (functions, classes, imports, assignments), without running it;
    UncompilableScript when it does not compile."""
    try:
        tree = ast.parse(script.read_bytes(), filename=str(script))
    except SyntaxError as exc:
        raise UncompilableScript(f"{script} does not compile: {exc.msg} (line {exc.lineno})") from None
    except ValueError as exc:  # a null byte, on Python 3.10 (a SyntaxError from 3.11 on)
        raise UncompilableScript(f"{script} does not compile: {exc}") from None
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(alias.asname or alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def is_toolkit_script(script: Path, choice: str = "auto") -> bool:
    """Whether serve may start without a SavedModel for this script: it uses the inference toolkit contract.
    ModelTreeError (find_models' refusal) when it mixes both contracts; a script that does not compile is left to
    the app, which reports its import error."""
    try:
        names = script_names(script)
    except UncompilableScript:
        return False
    try:
        return detect(names, choice) is Contract.TOOLKIT
    except MixedContracts as exc:
        raise ModelTreeError(f"{script} {exc}") from None
    except IncompleteContract:
        return False


def script_loads_model(script: Path, choice: str = "auto") -> bool:
    """Whether the script's own model_fn loads the model (an inference toolkit script defining model_fn): then
    each worker holds a copy, and on a machine with GPUs the default is one worker per GPU
    (config.default_worker_count)."""
    return is_toolkit_script(script, choice) and "model_fn" in script_names(script)
