"""TFS's rules for choosing and using a signature, shared by the REST and gRPC front ends.

Predict runs any signature with the inputs given. Classify and regress feed the serialized tf.Examples as a
1-D string tensor to the signature's `inputs` input and read `classes`/`scores` or `outputs` back, with the
checks and messages of TFS's classifier.cc and regressor.cc.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from google.protobuf import text_format

from ..shared import dtypes
from ..shared.error_codes import Code, ServingError, invalid_argument
from .servable import Servable, Signature

DEFAULT_SIGNATURE = "serving_default"


def signature_key(name: str) -> str:
    return name or DEFAULT_SIGNATURE


def _debug(signature: Signature) -> str:
    return text_format.MessageToString(signature.proto)


def predict_signature(servable: Servable, name: str, rest: bool) -> Signature:
    key = signature_key(name)
    signature = servable.signatures.get(key)
    if signature is None:
        if rest:
            raise invalid_argument(f'Serving signature name: "{key}" not found in signature def')
        raise ServingError(Code.FAILED_PRECONDITION, f'Serving signature key "{key}" not found.')
    return signature


def _example_signature(servable: Servable, name: str) -> Signature:
    key = signature_key(name)
    signature = servable.signatures.get(key)
    if signature is None:
        raise invalid_argument(f"No signature was found with the name: {key}")
    if len(signature.inputs) != 1:
        raise invalid_argument("Expected one input Tensor.")
    return signature


@dataclass(frozen=True)
class ExampleRun:
    """How to run a classify or regress signature: the input tensor and the aliases of the outputs."""

    signature: Signature
    input_name: str
    output_aliases: tuple[str, ...]

    @property
    def fetches(self) -> list[str]:
        return [self.signature.outputs[alias].name for alias in self.output_aliases]


def classify_run(servable: Servable, name: str) -> ExampleRun:
    signature = _example_signature(servable, name)
    if len(signature.outputs) not in (1, 2):
        raise invalid_argument(f"Expected one or two output Tensors, found {len(signature.outputs)}")
    if "inputs" not in signature.inputs:
        raise invalid_argument(f"No classification inputs found in SignatureDef: {_debug(signature)}")
    aliases = tuple(a for a in ("classes", "scores") if a in signature.outputs)
    if not aliases:
        raise invalid_argument(
            'Expected classification signature outputs to contain at least one of "classes" or '
            f'"scores". Signature was: {_debug(signature)}'
        )
    return ExampleRun(signature, signature.inputs["inputs"].name, aliases)


def regress_run(servable: Servable, name: str) -> ExampleRun:
    signature = _example_signature(servable, name)
    if len(signature.outputs) != 1:
        raise invalid_argument("Expected one output Tensor.")
    if "inputs" not in signature.inputs:
        raise invalid_argument(f"No regression inputs found in SignatureDef: {_debug(signature)}")
    if "outputs" not in signature.outputs:
        raise invalid_argument(f"No regression outputs found in SignatureDef: {_debug(signature)}")
    return ExampleRun(signature, signature.inputs["inputs"].name, ("outputs",))


def examples_tensor(serialized: list[bytes]) -> np.ndarray:
    if not serialized:
        raise invalid_argument("Input is empty.")
    tensor = np.empty(len(serialized), dtype=object)
    tensor[:] = serialized
    return tensor


def _shape_debug(array: np.ndarray) -> str:
    return "[" + ",".join(map(str, array.shape)) + "]"


def classification(
    outputs: list[np.ndarray], run: ExampleRun, count: int
) -> tuple[list[list[bytes]] | None, np.ndarray | None]:
    """(labels per example, scores [examples, classes]) after TFS's checks of the outputs."""
    found = dict(zip(run.output_aliases, outputs, strict=True))
    classes, scores = found.get("classes"), found.get("scores")
    for alias, array, dtype, dtype_name in (
        ("classes", classes, "OSU", "DT_STRING"),
        ("scores", scores, "f", "DT_FLOAT"),
    ):
        if array is None:
            continue
        if array.ndim != 2:
            raise invalid_argument(f"Expected Tensor shape: [batch_size num_classes] but got {_shape_debug(array)}")
        if array.dtype.kind not in dtype or (alias == "scores" and array.dtype != np.float32):
            raise invalid_argument(
                f"Expected {alias} Tensor of {dtype_name}. Got: {dtypes.enum_name(dtypes.from_numpy(array.dtype))}"
            )
        if array.shape[0] != count:
            raise invalid_argument(f"Expected {alias} output batch size of {count}. Got: {array.shape[0]}")
    if classes is not None and scores is not None and classes.shape[1] != scores.shape[1]:
        raise invalid_argument(
            f"Tensors class and score should match in dim_size(1). Got {classes.shape[1]} vs. {scores.shape[1]}"
        )
    labels = None if classes is None else [[bytes(v) for v in row] for row in classes.tolist()]
    return labels, scores


def regression(outputs: list[np.ndarray], count: int) -> np.ndarray:
    """The regression values (one float per example) after TFS's checks of the output."""
    (array,) = outputs
    if not (array.ndim == 1 or (array.ndim == 2 and array.shape[1] == 1)):
        raise invalid_argument(
            f"Expected output Tensor shape to be either [batch_size] or [batch_size, 1] but got {_shape_debug(array)}"
        )
    if array.shape[0] != count:
        raise invalid_argument(f"Input batch size did not match output batch size: {count} vs. {array.shape[0]}")
    if array.dtype != np.float32:
        raise invalid_argument(
            f"Expected output Tensor of DT_FLOAT.  Got: {dtypes.enum_name(dtypes.from_numpy(array.dtype))}"
        )
    return array.reshape(-1)
