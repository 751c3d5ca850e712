"""The binary path (model_client/tensor_calls.py), in-process against a real model server: an NPY request of the
default handler gives exactly the answer its JSON instances give over REST, for generated arrays of every kind
(dtypes, shapes, NaN and infinities, empty, 0-d, big-endian, Fortran order) and models of every input type; and
scripts' arrays (an input_handler's, context.predict_arrays, ServedModel.predict_arrays) go the same way."""

from __future__ import annotations

import io

import clients
import model_dirs
import numpy as np
import paths
import ports
import processes
import pytest
from app_harness import InProcessApp
from app_support import DEFAULT_MODEL, write_model_dir
from sagemaker_tfs.errors import HandlerError
from sagemaker_tfs.model_client import tensor_calls
from sagemaker_tfs.shared import npy

NPY = "application/x-npy"
ACCEPTS = ("application/json", NPY, "text/csv")

# name: (input dtype, output dtypes by name) of the models built below; every input takes any shape
MODELS = {
    "float32": (np.float32, {"y": np.float32}),
    "float64": (np.float64, {"y": np.float64}),
    "int32": (np.int32, {"y": np.int32}),
    "int64": (np.int64, {"y": np.int64}),
    "uint8": (np.uint8, {"y": np.uint8}),
    "bool": (np.bool_, {"y": np.bool_}),
    "two_outputs": (np.float32, {"doubled": np.float32, "total": np.float32}),
    "scalar_output": (np.float32, {"total": np.float32}),
}


def _build(folder):
    """One SavedModel per entry of MODELS, version 1, in folder/<name>/1."""
    import tensorflow as tf

    def export(name, function, dtype):
        module = tf.Module()
        module.serve = tf.function(function, input_signature=[tf.TensorSpec(None, dtype, name="x")])
        tf.saved_model.save(module, str(folder / name / "1"), signatures={"serving_default": module.serve})

    for name in ("float32", "float64"):
        export(name, lambda x: {"y": x * 2 + 1}, getattr(tf, name))
    export("int32", lambda x: {"y": x * 3}, tf.int32)
    export("int64", lambda x: {"y": x - 1}, tf.int64)
    export("uint8", lambda x: {"y": tf.identity(x)}, tf.uint8)
    export("bool", lambda x: {"y": tf.logical_not(x)}, tf.bool)
    export(
        "two_outputs",
        lambda x: {"doubled": x * 2, "total": tf.reshape(tf.reduce_sum(tf.reshape(x, [tf.shape(x)[0], -1]), 1), [-1])},
        tf.float32,
    )
    export("scalar_output", lambda x: {"total": tf.reduce_sum(x)}, tf.float32)


@pytest.fixture(scope="module")
def typed_models(tmp_path_factory):
    """A model server serving MODELS."""
    folder = tmp_path_factory.mktemp("typed_models")
    _build(folder)
    config = folder / "models.config"
    config.write_text(
        "model_config_list {\n"
        + "".join(
            f'  config {{ name: "{name}" base_path: "{folder / name}" model_platform: "tensorflow" }}\n'
            for name in MODELS
        )
        + "}\n"
    )
    grpc_port, rest_port = ports.free_port(), ports.free_port()
    server = processes.Background(
        [
            paths.VENV_BIN / "tfs-model-server",
            f"--port={grpc_port}",
            f"--rest_api_port={rest_port}",
            f"--model_config_file={config}",
            "--file_system_poll_wait_seconds=0",
        ],
        env={"TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    server.grpc_port, server.rest_port = grpc_port, rest_port  # what the app's environment names
    with server:
        for name in MODELS:
            url = f"http://127.0.0.1:{server.rest_port}/v1/models/{name}"
            server.wait_until(lambda url=url: clients.http_status(url) == 200, timeout=180, what=f"serving {name}")
        yield server


@pytest.fixture(scope="module")
def app(typed_models, tmp_path_factory):
    with InProcessApp(write_model_dir(tmp_path_factory.mktemp("binary")), typed_models) as app:
        yield app


@pytest.fixture
def binary_answers(monkeypatch):
    """The number of answers the binary path gave (TensorResponse objects made)."""
    made = []

    class Counted(tensor_calls.TensorResponse):
        def __init__(self, *args):
            made.append(1)
            super().__init__(*args)

    monkeypatch.setattr(tensor_calls, "TensorResponse", Counted)
    return made


_KINDS = (
    "float16",
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "bool",
    "complex64",
    "str",
)


def _values(rng, kind: str, shape: tuple) -> np.ndarray:
    if kind == "bool":
        return rng.random(shape) < 0.5
    if kind == "str":
        return np.array(rng.choice(["a", "é", "7"], shape))
    if kind == "complex64":
        return (rng.standard_normal(shape) + 1j).astype(np.complex64)
    dtype = np.dtype(kind)
    if dtype.kind == "f":
        values = rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4)
        special = rng.random(shape) < 0.2
        values = np.where(special, rng.choice([np.nan, np.inf, -np.inf, -0.0, 1e300], shape), values)
        with np.errstate(over="ignore"):
            return values.astype(dtype)
    info = np.iinfo(dtype)
    small = rng.integers(max(info.min, -300), min(info.max, 300), shape, endpoint=True).astype(dtype)
    extreme = np.array([info.min, info.max], dtype)[rng.integers(0, 2, shape)]  # sometimes out of the model's range
    return np.where(rng.random(shape) < 0.1, extreme, small)


def _arrays(seed: int) -> list[np.ndarray]:
    """Generated requests: every kind, random shapes (0-d and empty ones too), byte orders and memory orders."""
    rng = np.random.default_rng(seed)
    arrays = []
    for index in range(2 * len(_KINDS)):
        kind = _KINDS[index % len(_KINDS)]
        ndim = int(rng.integers(0, 5))
        shape = tuple(int(n) for n in rng.integers(1, 4, ndim))
        if ndim and rng.random() < 0.1:
            shape = (0, *shape[1:])
        array = _values(rng, kind, shape)
        if array.dtype.kind in "iufc" and rng.random() < 0.3:
            array = array.astype(array.dtype.newbyteorder(">"))
        if array.ndim > 1 and rng.random() < 0.3:
            array = np.asfortranarray(array)
        arrays.append(array)
    return arrays


def _rest_answer(app, array: np.ndarray, accept: str, model: str):
    """What the same array gave before the binary path: its JSON instances over REST (npy.instances_request)."""
    try:
        body = npy.instances_request(array)
    except HandlerError as exc:
        return clients.Answer(
            exc.status, {"content-type": "application/json"}, ('{"error": "' + exc.message + '"}').encode()
        )
    return app.invoke(body, "application/json", accept, X_Amzn_SageMaker_Custom_Attributes=f"tfs-model-name={model}")


@pytest.mark.parametrize("model", MODELS)
def test_an_npy_request_gets_the_answer_of_its_json_instances(app, model, binary_answers):
    outputs = MODELS[model][1]
    for index, array in enumerate(_arrays(seed=list(MODELS).index(model))):
        for accept in ACCEPTS:
            before = len(binary_answers)
            binary = app.invoke(
                npy.dump(array), NPY, accept, X_Amzn_SageMaker_Custom_Attributes=f"tfs-model-name={model}"
            )
            rest = _rest_answer(app, array, accept, model)
            case = f"array {index} {array.dtype}{array.shape} to {model}, Accept {accept}"
            assert binary.status == rest.status, case
            if accept == "application/json":  # the first: did the model server answer, or refuse?
                answered = rest.status == 200
            # every answer of the model server came the binary way; every error from the REST call
            assert len(binary_answers) - before == answered, case
            if binary.status == 200 and accept == NPY:
                # the model's own types; JSON numbers gave float64 and int64, with the same values
                got, had = np.load(io.BytesIO(binary.body)), np.load(io.BytesIO(rest.body))
                assert got.dtype == outputs["y"], case
                assert np.array_equal(got, had.astype(got.dtype), equal_nan=True), case
            else:
                assert (binary.content_type, binary.body) == (rest.content_type, rest.body), case


def test_the_binary_path_is_taken_for_large_images(app, binary_answers):
    images = np.random.default_rng(0).random((2, 224, 224, 3), dtype=np.float32)
    answer = app.invoke(npy.dump(images), NPY, NPY, X_Amzn_SageMaker_Custom_Attributes="tfs-model-name=float32")
    assert (answer.status, answer.content_type, len(binary_answers)) == (200, NPY, 1)
    got = np.load(io.BytesIO(answer.body))
    assert got.dtype == np.float32 and got.tobytes() == (images * 2 + 1).tobytes()


@pytest.mark.parametrize(
    "attributes, status",
    [
        ("tfs-model-name=half_plus_two,tfs-model-version=124", 200),
        ("tfs-model-name=half_plus_two,tfs-model-version=7", 404),
        ("tfs-model-name=nope", 404),
    ],
)
def test_named_models_and_versions_are_the_rest_calls(model_server, tmp_path, binary_answers, attributes, status):
    with InProcessApp(write_model_dir(tmp_path), model_server) as app:
        binary = app.invoke(npy.dump(np.array([[1.0], [5.0]])), NPY, X_Amzn_SageMaker_Custom_Attributes=attributes)
        rest = app.invoke('{"instances": [[1.0], [5.0]]}', X_Amzn_SageMaker_Custom_Attributes=attributes)
        assert (binary.status, binary.body) == (rest.status, rest.body)
        assert binary.status == status and len(binary_answers) == (status == 200)


ARRAYS_SCRIPT = '''
import io
import json

import numpy as np

from sagemaker_tfs import HandlerError


def _case(context):
    return dict(part.split("=", 1) for part in (context.custom_attributes or "x=y").split(","))


def handler(data, context):
    """context.predict_arrays: the outputs as arrays, errors as the REST call's."""
    case = _case(context)
    array = np.load(io.BytesIO(data.read()), allow_pickle=False)
    if "model" in case:
        outputs = context.predict_arrays({"x": array}, model_name=case["model"], version=case.get("version"))
    else:
        outputs = context.predict_arrays(array)
    return json.dumps({name: [str(value.dtype), value.tolist()] for name, value in sorted(outputs.items())})
'''

PAIR_ARRAYS_SCRIPT = """
import io
import json

import numpy as np


def input_handler(data, context):
    array = np.load(io.BytesIO(data.read()), allow_pickle=False)
    return {"x": array} if context.custom_attributes == "named" else array


def output_handler(response, context):
    if response.status_code != 200:
        return response.content, "application/json", response.status_code
    return json.dumps({"class": type(response).__name__, "json": response.json(),
                       "outputs": {k: [str(v.dtype), v.tolist()] for k, v in response.outputs.items()}})
"""

TOOLKIT_SCRIPT = """
import json

import numpy as np


def input_fn(data, content_type):
    return np.load(__import__("io").BytesIO(bytes(data)), allow_pickle=False)


def predict_fn(data, model):
    return model.predict_arrays(data)


def output_fn(prediction, accept):
    return json.dumps({name: [str(v.dtype), v.tolist()] for name, v in prediction.items()})
"""


def test_a_handler_gets_arrays_from_context_predict_arrays(model_server, tmp_path):
    with InProcessApp(write_model_dir(tmp_path, ARRAYS_SCRIPT), model_server) as app:
        answer = app.invoke(npy.dump(np.array([1.0, 2.0, 5.0])), NPY)
        assert (answer.status, answer.json()) == (200, {"y": ["float32", [3.5, 4.0, 5.5]]})
        named = app.invoke(
            npy.dump(np.array([[1], [2]], np.int64)),
            NPY,
            X_Amzn_SageMaker_Custom_Attributes="model=half_plus_two,version=124",
        )
        assert (named.status, named.json()) == (200, {"y": ["float32", [[2.5], [3.0]]]})
        missing = app.invoke(npy.dump(np.array([1.0])), NPY, X_Amzn_SageMaker_Custom_Attributes="model=nope")
        assert (missing.status, missing.json()) == (404, {"error": "Servable not found for request: Latest(nope)"})
        strings = app.invoke(npy.dump(np.array(["a"])), NPY)
        assert (strings.status, strings.json()) == (400, {"error": "Expects arg[0] to be float but string is provided"})


@pytest.mark.parametrize(
    "attributes, outputs",
    [
        (None, {"predictions": [3.5, 4.0]}),
        ("named", {"outputs": [3.5, 4.0]}),
    ],
)
def test_an_input_handler_may_return_arrays(model_server, tmp_path, binary_answers, attributes, outputs):
    with InProcessApp(write_model_dir(tmp_path, PAIR_ARRAYS_SCRIPT), model_server) as app:
        headers = {"X_Amzn_SageMaker_Custom_Attributes": attributes} if attributes else {}
        answer = app.invoke(npy.dump(np.array([1.0, 2.0])), NPY, **headers)
        assert (answer.status, answer.json()) == (
            200,
            {"class": "Counted", "json": outputs, "outputs": {"y": ["float32", [3.5, 4.0]]}},
        )
        assert len(binary_answers) == 1
        error = app.invoke(npy.dump(np.array([True])), NPY)  # REST refuses booleans for a float: its answer
        assert error.status == 400 and error.json()["error"].startswith("Failed to process element: 0")


def test_a_toolkit_predict_fn_gets_arrays_from_the_served_model(model_server, tmp_path):
    model_dir = write_model_dir(tmp_path, TOOLKIT_SCRIPT)
    model_dirs.copy_model(paths.HALF_PLUS_THREE, model_dir, DEFAULT_MODEL)
    with InProcessApp(model_dir, model_server) as app:
        answer = app.invoke(npy.dump(np.array([[1.0], [3.0]])), NPY)
        assert (answer.status, answer.json()) == (200, {"y": ["float32", [[3.5], [4.5]]]})


def test_the_rest_path_of_a_method_other_than_predict(app, binary_answers):
    answer = app.invoke(
        npy.dump(np.array([1.0])), NPY, X_Amzn_SageMaker_Custom_Attributes="tfs-model-name=float32,tfs-method=regress"
    )
    assert answer.status == 400 and len(binary_answers) == 0
    assert answer.json()["error"].startswith("No regression inputs found in SignatureDef")
