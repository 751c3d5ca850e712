"""Unit tests of the model server's pure parts: flags, model config, batching parameters, JSON rules."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from sagemaker_tfs.model_server import flags, http_server, json_request
from sagemaker_tfs.shared import tfs_json_response as json_response, tfs_json_text as json_text
from sagemaker_tfs.model_server.batch_scheduler import (BatchingConfigError, BatchingParameters, _merge, _Task,
                                                 parse_batching_parameters)
from sagemaker_tfs.model_server.model_config import (ModelConfigError, VersionPolicy, list_versions,
                                                     parse_config_text, parse_version)
from sagemaker_tfs.model_server.rest import RestApi, Route, Verb
from sagemaker_tfs.model_server.servable import TensorInfo
from sagemaker_tfs.shared.error_codes import ServingError

CONTAINER_COMMAND = ["--port=9000", "--rest_api_port=9001", "--model_config_file=/x/models.config",
                     "--max_num_load_retries=0", "--file_system_poll_wait_seconds=0", "--enable_batching=true",
                     "--batching_parameters_file=/x/b.txt", "--tensorflow_intra_op_parallelism=2",
                     "--tensorflow_inter_op_parallelism=3", "--per_process_gpu_memory_fraction=0.4",
                     "--rest_api_timeout_in_ms=60000"]


def test_the_container_command_line_parses_with_tfs_meanings():
    parsed = flags.parse(CONTAINER_COMMAND)
    assert (parsed.port, parsed.rest_api_port, parsed.model_config_file) == (9000, 9001, "/x/models.config")
    assert (parsed.max_num_load_retries, parsed.file_system_poll_wait_seconds) == (0, 0)
    assert parsed.enable_batching and parsed.batching_parameters_file == "/x/b.txt"
    assert (parsed.tensorflow_intra_op_parallelism, parsed.tensorflow_inter_op_parallelism) == (2, 3)
    assert (parsed.per_process_gpu_memory_fraction, parsed.rest_api_timeout_in_ms) == (0.4, 60000)


def test_flag_defaults_are_tfs_defaults():
    parsed = flags.parse(["--model_base_path=/m"])
    assert (parsed.port, parsed.rest_api_port, parsed.model_name) == (8500, 0, "default")
    assert (parsed.file_system_poll_wait_seconds, parsed.max_num_load_retries) == (1, 5)
    assert parsed.rest_api_timeout_in_ms == 30000 and not parsed.enable_batching


@pytest.mark.parametrize("argv, message", [
    (["--model_base_path=/m", "--nope=1"], "unknown flag: --nope"),
    (["--model_base_path=/m", "stray"], "unexpected argument: 'stray'"),
    (["--model_base_path=/m", "--enable_batching=maybe"], "invalid value for boolean flag --enable_batching"),
    (["--model_base_path=/m", "--port=1", "--rest_api_port=1"], "--rest_api_port cannot be the same as --port"),
    (["--model_base_path=/m", "--tensorflow_session_parallelism=2", "--tensorflow_intra_op_parallelism=2"],
     "configure either --tensorflow_session_parallelism"),
])
def test_flag_errors(argv, message):
    with pytest.raises(flags.FlagError, match=message.replace("(", r"\(")):
        flags.parse(argv)


def test_model_config_parses_policies_and_labels():
    configs = parse_config_text("""model_config_list {
      config { name: "a" base_path: "/a" model_platform: "tensorflow"
               model_version_policy { specific { versions: 1 versions: 3 } } version_labels { key: "s" value: 1 } }
      config { name: "b" base_path: "/b" model_platform: "tensorflow" model_version_policy { all {} } }
      config { name: "c" base_path: "/c" model_platform: "tensorflow" model_version_policy { latest { num_versions: 2 } } }
      config { name: "d" base_path: "/d" model_platform: "tensorflow" }
    }""")
    assert [c.policy.select([1, 2, 3]) for c in configs] == [[3, 1], [3, 2, 1], [3, 2], [3]]
    assert configs[0].labels == {"s": 1}


@pytest.mark.parametrize("text, message", [
    ('model_config_list { config { name: "a" base_path: "/a" } }', "neither ModelServerConfig::model_type"),
    ('model_config_list { config { name: "a" base_path: "/a" model_platform: "pytorch" } }',
     "PlatformConfigMap has no entry for platform pytorch"),
    ('model_config_list { config { name: "a" ', "Error parsing text-format tensorflow.serving.ModelServerConfig"),
    ('model_config_list { config { name: "a" base_path: "/a" model_platform: "tensorflow" } '
     'config { name: "a" base_path: "/b" model_platform: "tensorflow" } }', "configured more than once: a"),
])
def test_model_config_errors(text, message):
    with pytest.raises(ModelConfigError, match=message):
        parse_config_text(text)


def test_version_folders(tmp_path):
    for name in ("00000123", "7", ".hidden", "code", "1.5", "-2", "v3", "0001", "1"):
        (tmp_path / name).mkdir()
    (tmp_path / "9").write_text("a file is not a version")
    found = list_versions(tmp_path)
    assert sorted(found) == [1, 7, 123]
    assert found[1].name == "1"  # "0001" and "1" are both 1: the lexicographically later name wins, as in TFS
    assert parse_version("00000123") == 123 and parse_version("2" * 30) is None
    assert VersionPolicy().select(list(found)) == [123]


def test_batching_parameters_file():
    params = parse_batching_parameters("max_batch_size { value: 8 }\nbatch_timeout_micros { value: 500 }\n"
                                       "num_batch_threads { value: 3 }\nmax_enqueued_batches { value: 7 }\n"
                                       "allowed_batch_sizes: 4\nallowed_batch_sizes: 8\npad_variable_length_inputs: true")
    assert params == BatchingParameters(8, 500, 7, 3, (4, 8), True)
    assert parse_batching_parameters("") == BatchingParameters(1000, 0, 10, 0, (), False)
    with pytest.raises(BatchingConfigError, match="Last entry in allowed_batch_sizes must match max_batch_size; last "
                                                  "entry was 4; expected 8"):
        parse_batching_parameters("max_batch_size { value: 8 }\nallowed_batch_sizes: 4")
    with pytest.raises(BatchingConfigError, match="Error parsing text-format tensorflow.serving.BatchingParameters"):
        parse_batching_parameters("max_batch_size: 8")


def test_variable_length_inputs_are_padded_with_the_first_element():
    tasks = [_Task({"x": np.array([[1, 2, 3]])}, 1, None, 0.0), _Task({"x": np.array([[5], [6]])}, 2, None, 0.0)]
    assert _merge("x", tasks, True).tolist() == [[1, 2, 3], [5, 5, 5], [6, 5, 5]]
    with pytest.raises(ServingError, match="have different shapes and padding is turned off"):
        _merge("x", tasks, False)


FLOAT32_TEXTS = [
    (3.0, "3.0"), (0.1, "0.1"), (42.0, "42.0"), (-0.0, "-0.0"), (1e-05, "1e-05"), (9e6, "9e+06"),
    (100000.0, "100000.0"), (1234567.0, "1234567.0"), (123456.7, "123456.703"), (3.14159265, "3.14159274"),
    (1.43577434e9, "1.43577434e+09"), (1e20, "1e+20"), (float("nan"), "NaN"), (float("-inf"), "-Infinity"),
]


@pytest.mark.parametrize("value, text", FLOAT32_TEXTS)
def test_float32_text_is_tfs_text(value, text):
    assert json_text.float_text(value) == text


def test_float32_texts_of_a_large_array_take_the_vectorised_path_to_the_same_texts():
    values = np.array([value for value, _ in FLOAT32_TEXTS] * 2, np.float32)
    assert values.size > json_text.SMALL
    assert json_text.float_texts(values) == [text for _, text in FLOAT32_TEXTS] * 2


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_small_and_vectorised_float_paths_agree(dtype):
    rng = np.random.default_rng(7)
    info = np.finfo(dtype)
    with np.errstate(over="ignore"):
        values = np.concatenate([
            np.array([info.max, -info.max, info.tiny, info.smallest_subnormal, np.inf, np.nan, -0.0, 1 / 3]),
            rng.standard_normal(3000) * 10.0 ** rng.integers(-40, 40, 3000),
            rng.integers(-10**7, 10**7, 3000), rng.integers(-1000, 1000, 3000) / 8]).astype(dtype)
    vectorised = json_text.float_texts(values)
    small = [text for i in range(0, values.size, 4) for text in json_text.float_texts(values[i:i + 4])]
    assert small == vectorised


def test_double_text_uses_17_digits_when_needed():
    assert json_text.float_texts(np.array([0.1, 1 / 3], np.float64)) == ["0.1", "0.33333333333333331"]


def test_debug_text_of_request_values_is_rapidjson_pretty_with_one_line_arrays():
    assert json_text.debug({"instances": [1.0, 1e3], "s": "a\x01"}) == (
        '{\n    "instances": [1.0, 1000.0],\n    "s": "a\\u0001"\n}')
    assert json_text.debug(list(range(1000))).startswith("[0, 1, 2") and len(json_text.debug(list(range(1000)))) == 256


FLOAT = TensorInfo("x", "x:0", 1, (-1,))
INT32 = TensorInfo("i", "i:0", 3, (-1,))
STRING = TensorInfo("s", "s:0", 7, (-1,))


@pytest.mark.parametrize("value, info, expected", [
    ([[1, 2], [3, 4]], FLOAT, np.array([[1, 2], [3, 4]], np.float32)),
    ([1, 2147483647], INT32, np.array([1, 2147483647], np.int32)),
    (["a", {"b64": "AAE="}], STRING, np.array([b"a", b"\x00\x01"], object)),
    (1e300, FLOAT, np.array(np.inf, np.float32)),  # numpy warns; the server mutes that warning
])
@pytest.mark.filterwarnings("ignore:overflow encountered in cast")
def test_json_values_convert_to_the_signature_dtype(value, info, expected):
    for may_hold_bools in (True, False):  # the checked path and the vectorised one agree
        array = json_request.to_array(value, info, may_hold_bools)
        assert array.dtype == expected.dtype and array.tolist() == expected.tolist()


@pytest.mark.parametrize("value, info, message", [
    ([1.0], INT32, "JSON Value: 1.0 Type: Number is not of expected type: int32"),
    ([2147483648], INT32, "JSON Value: 2147483648 Type: Number is not of expected type: int32"),
    ([[1], [2, 3]], FLOAT, "Encountered list at unexpected size: 2 at level: 1 expected size: 1"),
    ([[1], 2], FLOAT, "JSON Value: 2 found at incorrect level: 2 in the JSON DOM. Expected at level: 2"),
    ([1, [2]], FLOAT, "Encountered list at unexpected level: 1 expected < 1"),
    ([None], FLOAT, "JSON Value: null Type: Null is not of expected type: float"),
])
def test_json_value_errors(value, info, message):
    with pytest.raises(ServingError, match=message.replace("[", r"\[").replace("(", r"\(")):
        json_request.to_array(value, info, may_hold_bools=False)


def test_columnar_response_nests_every_dimension_over_lines():
    body = json_response.predict_body({"y": np.array([[1, 2]], np.int64), "z": np.zeros((0, 2), np.float32)},
                                      row_format=False)
    assert body == (b'{\n    "outputs": {\n        "y": [\n            [\n                1,\n                2\n'
                    b'            ]\n        ],\n        "z": []\n    }\n}')


def test_row_response_checks_the_batch_dimension():
    with pytest.raises(ServingError, match="Tensor name: b has inconsistent batch size: 1 expecting: 2"):
        json_response.predict_body({"a": np.zeros(2), "b": np.zeros(1)}, row_format=True)
    with pytest.raises(ServingError, match="Tensor name: a has no shape information "):
        json_response.predict_body({"a": np.float32(1.0).reshape(())}, row_format=True)
    assert json_response.predict_body({"a": np.zeros((0, 2), np.float32)}, True) == b'{\n    "predictions": []\n}'


@pytest.mark.parametrize("method, path, route", [
    ("POST", "/v1/models/m%20x/versions/007:classify", Route(Verb.CLASSIFY, "m x", 7)),
    ("POST", "/V1/MODELS/m/labels/stable:predict", Route(Verb.PREDICT, "m", label="stable")),
    ("POST", "/v1/models/m:regress", Route(Verb.REGRESS, "m")),
    ("GET", "/v1/models/m/versions/2", Route(Verb.STATUS, "m", 2)),
    ("GET", "/v1/models/m/metadata", Route(Verb.METADATA, "m")),
])
def test_rest_routes(method, path, route):
    assert RestApi.route(method, path) == route


@pytest.mark.parametrize("method, path, status, body", [
    ("POST", "/v1/models/m:Predict", 400, b'{\n    "error": "Malformed request: POST /v1/models/m:Predict"\n}'),
    ("GET", "/v1/models", 400, b'{\n    "error": "Missing model name in request."\n}'),
    ("PUT", "/v1/models/m", 400, b'{\n    "error": "Malformed request: PUT /v1/models/m"\n}'),
    ("TRACE", "/v1/models/m", 501, None),
    ("GET", "/v2/models/m", 404, None),
])
def test_rest_routes_answered_by_the_path_alone(method, path, status, body):
    route = RestApi.route(method, path)
    assert (route.verb, route.fixed.status) == (None, status)
    assert route.fixed.body == (body or http_server.html_error(status).body)


def test_the_model_server_imports_tensorflow_without_keras():
    """Keras (and scikit-learn, which Keras imports when installed) would double a restarted server's start."""
    code = ("import sys\nfrom sagemaker_tfs.model_server.__main__ import skip_keras\nskip_keras()\nimport tensorflow\n"
            "print('keras' in sys.modules, 'sklearn' in sys.modules, tensorflow.constant(2.0).numpy())")
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    result = subprocess.run([sys.executable, "-c", code], env={**env, "TF_CPP_MIN_LOG_LEVEL": "3"},
                            capture_output=True, text=True, timeout=300)
    assert result.stdout.split() == ["False", "False", "2.0"], result.stderr
