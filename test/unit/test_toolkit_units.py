"""Units of the inference toolkit contract that need no stack: requirements the container provides, package-model's
view of a toolkit script, the settings' fallbacks to the toolkit's names, and the NPY rules."""

from __future__ import annotations

import io
import logging
import sys

import numpy as np
import pytest
from sagemaker_tfs.config import Settings
from sagemaker_tfs.errors import HandlerError
from sagemaker_tfs.packaging import PackagingError, check_model_dir, handler_contract
from sagemaker_tfs.shared import npy
from sagemaker_tfs.stack.requirements import requirements_for_pip


def test_requirements_naming_the_toolkit_are_filtered_into_a_copy(tmp_path, caplog):
    code = tmp_path / "code"
    code.mkdir()
    requirements = code / "requirements.txt"
    requirements.write_text(
        "scikit-learn>=1.4\nSageMaker_Inference==1.10.1  # the toolkit\n-r more.txt\n--find-links ./wheels\n"
    )
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    with caplog.at_level(logging.INFO, "serve"):
        copy = requirements_for_pip(requirements, runtime)
    assert copy == runtime / "requirements.txt"
    assert copy.read_text() == f"scikit-learn>=1.4\n-r {code}/more.txt\n--find-links ./wheels\n"
    assert (
        f"{requirements}: 'SageMaker_Inference==1.10.1  # the toolkit' is satisfied by the container's "
        "sagemaker_inference package, not installed" in caplog.text
    )


def test_requirements_without_them_are_used_as_they_are(tmp_path):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("sagemaker-inference-extras\nnumpy\n")
    assert requirements_for_pip(requirements, tmp_path) == requirements


def test_package_model_checks_a_toolkit_folder_without_a_saved_model(tmp_path):
    (tmp_path / "code").mkdir()
    (tmp_path / "model.joblib").write_bytes(b"weights")
    (tmp_path / "code" / "inference.py").write_text(
        "from x import model_fn\n\ndef predict_fn(data, model):\n    return data\n"
    )
    assert check_model_dir(tmp_path) == [
        "no SavedModel: the script's model_fn loads the model, no model server is started",
        "code/inference.py: inference toolkit: model_fn, predict_fn",
    ]


@pytest.mark.parametrize(
    "script, message",
    [
        (
            "def handler(d, c):\n    pass\n\ndef output_fn(p, a):\n    pass\n",
            "{path} defines both TensorFlow Serving handlers (handler) and inference toolkit functions (output_fn): "
            "keep one "
            "contract, or set SAGEMAKER_INFERENCE_CONTRACT to tfs or toolkit",
        ),
        (
            "def transform_fn(m, d, c, a):\n    pass\n\ndef input_fn(d, c):\n    pass\n",
            "{path}: Cannot use transform_fn implementation in conjunction with input_fn, predict_fn, and/or output_fn "
            "implementation",
        ),
    ],
)
def test_package_model_refuses_what_serve_refuses(tmp_path, script, message):
    path = tmp_path / "inference.py"
    path.write_text(script)
    with pytest.raises(PackagingError) as error:
        handler_contract(path)
    assert str(error.value) == message.format(path=path)


def test_the_toolkit_s_variable_names_are_fallbacks():
    env = {"SAGEMAKER_MODEL_SERVER_WORKERS": "3", "SAGEMAKER_MODEL_SERVER_TIMEOUT": "45"}
    settings = Settings.from_env(env)
    assert (settings.gunicorn_workers, settings.gunicorn_timeout_seconds) == (3, 45)
    settings = Settings.from_env({**env, "SAGEMAKER_GUNICORN_WORKERS": "1", "SAGEMAKER_GUNICORN_TIMEOUT_SECONDS": "9"})
    assert (settings.gunicorn_workers, settings.gunicorn_timeout_seconds) == (1, 9)
    defaults = Settings.from_env({})
    assert (defaults.program, defaults.inference_contract, defaults.default_invocations_accept) == (
        "inference.py",
        "auto",
        "application/json",
    )


def test_npy_predictions_must_be_rectangular_numbers():
    assert np.load(io.BytesIO(npy.predictions_body([[1.5], [2.0]]))).tolist() == [[1.5], [2.0]]
    with pytest.raises(HandlerError) as error:
        npy.predictions_body([[1], [2, 3]])
    assert error.value.status == 406 and "they are not rectangular" in error.value.message
    with pytest.raises(HandlerError) as error:
        npy.predictions_body([{"a": 1}])
    assert error.value.status == 406 and "they hold objects" in error.value.message


def test_npy_without_numpy_is_415_saying_how_to_get_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "numpy", None)  # what the serving image has
    with pytest.raises(HandlerError) as error:
        npy.load(b"\x93NUMPY\x01\x00")
    assert (error.value.status, error.value.message) == (
        415,
        "application/x-npy needs numpy, which is not installed: add numpy to code/requirements.txt",
    )


@pytest.mark.parametrize("content_type", ["application/json", "application/jsonlines"])
def test_json_nested_too_deeply_is_the_clients_400_not_a_500(content_type):
    """The default decoder's answer to a body deeper than Python's json can read (issue 49's random traffic found a
    500 naming RecursionError): the default handler's 400 (codecs.TOO_DEEP)."""
    from sagemaker_tfs import codecs
    from sagemaker_tfs.toolkit import arrays

    with pytest.raises(HandlerError) as error:
        arrays.decode("[" * 20_000 + "1" + "]" * 20_000, content_type)
    assert (error.value.status, error.value.message) == (400, codecs.TOO_DEEP)


def test_a_prediction_of_more_than_2_dimensions_as_csv_is_a_406_not_a_500():
    """The default encoder's answer when a client's input makes the served model's predictions 3-D or more and its
    Accept asks for CSV (issue 49's random traffic found a 500): a 406, as NPY's for predictions it cannot write."""
    from sagemaker_tfs.toolkit import arrays

    with pytest.raises(HandlerError) as error:
        arrays.encode(np.ones((1, 1, 1)), "text/csv")
    assert (error.value.status, error.value.message) == (
        406,
        "a 3-D prediction cannot be written as CSV: return a 1-D or 2-D array, or write an output_fn",
    )
