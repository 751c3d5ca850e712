"""Start-up of a toolkit script in one worker: `pre_model_fn` -> `model_fn` (or the served model) ->
`model_warmup_fn`, then the check that requests can be predicted. Runs in the app factory, while the gunicorn
settings (gunicorn_settings.py) keep the worker's heartbeat alive however long it takes."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .context import Context
from .functions import Function, ToolkitFunctions

log = logging.getLogger("sagemaker_tfs.toolkit")

NO_MODEL_FN = "Please provide a model_fn implementation."
NO_PREDICT_FN = "Please provide a predict_fn implementation."


class StartupFailure(RuntimeError):
    """A start-up function failed, or the script cannot serve; one line that names the function."""


@dataclass(frozen=True)
class Loaded:
    """What every request of this worker shares: the functions, the model, the context's fixed parts."""

    functions: ToolkitFunctions
    model: Any
    system_properties: dict[str, Any]
    model_name: str


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _run(functions: ToolkitFunctions, function: Function, context: Context, *args: Any) -> Any:
    started = time.monotonic()
    try:
        result = function(context, *args)
    except Exception as exc:
        raise StartupFailure(
            f"{functions.script}: {function.name} raised {type(exc).__name__}: {_one_line(str(exc))}"
        ) from exc
    log.info("%s done in %.2f s", function.name, time.monotonic() - started)
    return result


def start(
    functions: ToolkitFunctions,
    model_dir: str,
    model_name: str,
    gpu_id: int | None,
    served_model: Callable[[], Any] | None,
) -> Loaded:
    """The worker's model, after the script's start-up functions; `served_model` makes the default model
    (None when the directory holds no SavedModel). StartupFailure names what failed."""
    system_properties = {"model_dir": model_dir, "gpu_id": gpu_id, "batch_size": 1}
    context = Context(system_properties, model_name)
    if functions.pre_model_fn:
        _run(functions, functions.pre_model_fn, context, model_dir)
    if functions.model_fn:
        model = _run(functions, functions.model_fn, context, model_dir)
    elif served_model is not None:
        model = served_model()
    else:
        raise StartupFailure(
            f"{functions.script} has no model_fn and {model_dir} holds no SavedModel for the model "
            f"server: {NO_MODEL_FN}"
        )
    if functions.model_warmup_fn:
        _run(functions, functions.model_warmup_fn, context, model_dir, model)
    if not (functions.transform_fn or functions.predict_fn or callable(getattr(model, "predict", None))):
        raise StartupFailure(
            f"{functions.script} has no predict_fn and the model from model_fn "
            f"({type(model).__name__}) has no predict method: {NO_PREDICT_FN}"
        )
    return Loaded(functions, model, system_properties, model_name)
