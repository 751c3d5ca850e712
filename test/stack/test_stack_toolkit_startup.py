"""Which contract a script uses, and the toolkit start-ups that stop `serve` with one line naming the cause
(docs/toolkit-contract.md §1-§4, §9, §12), through the whole stack."""

from __future__ import annotations

import os

import model_dirs
import paths
import processes
import pytest
import serve_stack
from stack_support import invoke
from test_stack_lifecycle import cannot_start, serve_fails

MIXED = """
    def handler(data, context):
        return "tfs"

    def model_fn(model_dir):
        return None

    def predict_fn(data, model):
        return "toolkit"
"""


def code_only(tmp_path, script: str, name: str = "inference.py"):
    """A model folder with only code/<name>: no SavedModel."""
    return model_dirs.write_code(tmp_path / "model", files={name: script})


def with_saved_model(tmp_path, script: str):
    folder = model_dirs.copy_model(paths.HALF_PLUS_THREE, tmp_path, "model")
    return model_dirs.write_code(folder, script)


def test_a_script_with_both_contracts_stops_start_up(tmp_path):
    folder = code_only(tmp_path, MIXED)
    assert cannot_start(serve_fails(folder)) == (
        f"{folder}/code/inference.py defines both TensorFlow Serving handlers (handler) and inference toolkit "
        "functions (model_fn, predict_fn): keep one contract, or set SAGEMAKER_INFERENCE_CONTRACT to tfs or toolkit"
    )


def test_sagemaker_inference_contract_toolkit_ignores_the_tfs_names(tmp_path):
    folder = code_only(tmp_path, MIXED)
    with serve_stack.Stack(folder, env={"SAGEMAKER_INFERENCE_CONTRACT": "toolkit"}) as stack:
        answer = invoke(stack, "[1]")
        assert (answer.status, answer.content_type, answer.text) == (200, "application/json", '"toolkit"')
        processes.wait_for_log(
            stack, f"{folder}/code/inference.py: SAGEMAKER_INFERENCE_CONTRACT=toolkit, so handler is ignored"
        )


def test_sagemaker_inference_contract_tfs_ignores_the_toolkit_names(tmp_path):
    """With the TFS contract a SavedModel is required again: the toolkit's model_fn does not count."""
    output = serve_fails(code_only(tmp_path, MIXED), SAGEMAKER_INFERENCE_CONTRACT="tfs")
    assert cannot_start(output).startswith(f"no SavedModel found in {tmp_path}/model: ")


def test_a_script_with_neither_contract_gets_the_tfs_message(tmp_path):
    folder = with_saved_model(tmp_path, "def predict(data):\n    return data\n")
    assert cannot_start(serve_fails(folder)) == (
        f"Handlers are not implemented correctly in user script. {folder}/code/inference.py defines none of them: "
        "define handler(data, context), or both input_handler(data, context) and output_handler(response, context)"
    )


@pytest.mark.parametrize(
    "variable, value, message",
    [
        (
            "SAGEMAKER_INFERENCE_CONTRACT",
            "both",
            "SAGEMAKER_INFERENCE_CONTRACT='both' is not valid: must be one of auto, tfs, toolkit",
        ),
        (
            "SAGEMAKER_PROGRAM",
            "lib/serve.py",
            "SAGEMAKER_PROGRAM='lib/serve.py' is not valid: must be a file name in "
            "code/ ending in .py, without '/', such as inference.py",
        ),
        (
            "SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT",
            "image/png",
            "SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT='image/png' is not "
            "valid: must be one of application/json, application/jsonlines, application/jsons, "
            "application/x-jsonlines, "
            "application/jsonl, text/csv, application/x-npy",
        ),
    ],
)
def test_an_invalid_variable_stops_serve_naming_it(tmp_path, variable, value, message):
    folder = code_only(tmp_path, "def model_fn(model_dir):\n    return None\n")
    assert cannot_start(serve_fails(folder, **{variable: value})) == message


@pytest.mark.parametrize(
    "script, message",
    [
        (
            "def input_fn(data, content_type, context, extra):\n    return data\n",
            "input_fn takes 4 arguments but 2 were given.",
        ),
        (
            "def model_fn(*args, **kwargs):\n    return None\n\ndef output_fn(prediction):\n    return prediction\n",
            "output_fn takes 1 arguments but 2 were given.",
        ),
        (
            "def model_fn(model_dir):\n    return 1\n\ndef transform_fn(model, data, content_type, accept):\n    "
            "return data\n"
            "\ndef input_fn(data, content_type):\n    return data\n",
            "Cannot use transform_fn implementation in conjunction with input_fn, predict_fn, and/or output_fn "
            "implementation",
        ),
        ("model_fn = 3\n", "model_fn is not a function"),
    ],
)
def test_a_script_that_cannot_be_called_stops_serve(tmp_path, script, message):
    folder = code_only(tmp_path, script)
    assert cannot_start(serve_fails(folder)) == f"{folder}/code/inference.py: {message}"


@pytest.mark.parametrize(
    "script, message",
    [
        (
            "def pre_model_fn(model_dir):\n    raise OSError('no GPU\\nat all')\n\ndef model_fn(model_dir):\n    "
            "return 1\n",
            "pre_model_fn raised OSError: no GPU at all",
        ),
        (
            "def model_fn(model_dir):\n    raise FileNotFoundError(model_dir + '/model.pth')\n",
            "model_fn raised FileNotFoundError: {model_dir}/model.pth",
        ),
        (
            "def model_fn(model_dir):\n    return 1\n\ndef model_warmup_fn(model_dir, model, context):\n"
            "    raise ValueError(f'cannot warm up {model}')\n",
            "model_warmup_fn raised ValueError: cannot warm up 1",
        ),
        (
            "from sagemaker_inference import errors\n\ndef model_fn(model_dir):\n"
            "    raise errors.GenericInferenceToolkitError(503, 'weights not downloaded')\n",
            "model_fn raised GenericInferenceToolkitError: weights not downloaded",
        ),
    ],
)
def test_a_failing_start_up_function_stops_serve_naming_it(tmp_path, script, message):
    folder = code_only(tmp_path, script)
    assert cannot_start(serve_fails(folder)) == f"{folder}/code/inference.py: " + message.format(model_dir=folder)


def test_no_model_fn_without_a_saved_model_stops_serve(tmp_path):
    folder = code_only(tmp_path, "def input_fn(data, content_type):\n    return data\n")
    assert cannot_start(serve_fails(folder)) == (
        f"{folder}/code/inference.py has no model_fn and {folder} holds no SavedModel for the model server: Please "
        "provide a model_fn implementation."
    )


def test_no_predict_fn_for_a_model_without_predict_stops_serve(tmp_path):
    folder = code_only(tmp_path, "def model_fn(model_dir):\n    return {'weights': [1, 2]}\n")
    assert cannot_start(serve_fails(folder)) == (
        f"{folder}/code/inference.py has no predict_fn and the model from model_fn (dict) has no predict method: "
        "Please provide a predict_fn implementation."
    )


@pytest.fixture
def without_numpy(tmp_path) -> dict[str, str]:
    """The environment of a stack that cannot import numpy, as in the serving image."""
    (tmp_path / "no-numpy" / "numpy").mkdir(parents=True)
    (tmp_path / "no-numpy" / "numpy" / "__init__.py").write_text("raise ImportError('No module named numpy')\n")
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path / "no-numpy"), os.environ.get("PYTHONPATH")]))}


def test_without_numpy_a_script_with_its_own_functions_serves(tmp_path, without_numpy):
    folder = code_only(
        tmp_path,
        "import json\n\ndef model_fn(model_dir):\n    return len\n\n"
        "def input_fn(data, content_type):\n    return json.loads(data)\n\n"
        "def predict_fn(data, model):\n    return model(data)\n\n"
        "def output_fn(prediction, accept):\n    return json.dumps(prediction)\n",
    )
    with serve_stack.Stack(folder, env=without_numpy) as stack:
        assert invoke(stack, "[1, 2, 3]").text == "3"


def test_without_numpy_the_default_input_fn_stops_start_up_saying_so(tmp_path, without_numpy):
    folder = code_only(
        tmp_path, "def model_fn(model_dir):\n    return len\n\ndef predict_fn(data, model):\n    return model(data)\n"
    )
    assert cannot_start(serve_fails(folder, **without_numpy)) == (
        f"{folder}/code/inference.py: the default input_fn and output_fn need numpy, which is not installed (No "
        "module named numpy): add numpy to code/requirements.txt, or define both"
    )
