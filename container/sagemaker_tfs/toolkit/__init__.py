"""The SageMaker inference toolkit contract (`model_fn`, `input_fn`, `predict_fn`, `output_fn`, `transform_fn`,
`pre_model_fn`, `model_warmup_fn`) in this container.

    arrays.py        the default input_fn / output_fn (JSON, CSV, NPY, JSON lines), importable by scripts
    errors.py        the toolkit's exceptions, as HandlerErrors
    functions.py     a script's functions and their context argument, checked at start-up
    lifecycle.py     pre_model_fn -> model_fn (or the served model) -> model_warmup_fn in each worker
    context.py       the per-request context object
    served_model.py  ServedModel: the default model_fn's client of the model server
    invocations.py   POST /invocations: input_fn -> predict_fn -> output_fn, or transform_fn
    plain.py         numpy values as JSON, without numpy

`from sagemaker_tfs.toolkit import ServedModel` is all a script needs from here; the `sagemaker_inference`
package gives the toolkit's own import names.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ServedModel"]


def __getattr__(name: str) -> Any:  # lazy: `sagemaker_tfs.toolkit.errors` must not import the HTTP client
    if name == "ServedModel":
        from .served_model import ServedModel

        return ServedModel
    raise AttributeError(name)
