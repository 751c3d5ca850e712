"""Unit tests of the model server's pure parts: flags, model config, batching parameters, JSON rules."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from sagemaker_tfs.model_server import flags, http_server, json_request
from sagemaker_tfs.model_server.batch_scheduler import (
    BatchingConfigError,
    BatchingParameters,
    _merge,
    _Task,
    parse_batching_parameters,
)
from sagemaker_tfs.model_server.model_config import (
    ModelConfigError,
    VersionPolicy,
    list_versions,
    parse_config_text,
    parse_version,
)
from sagemaker_tfs.model_server.rest import RestApi, Route, Verb
from sagemaker_tfs.model_server.servable import TensorInfo
from sagemaker_tfs.shared import tfs_json_response as json_response
from sagemaker_tfs.shared import tfs_json_text as json_text
from sagemaker_tfs.shared.error_codes import Code, ServingError

CONTAINER_COMMAND = [
    "--port=9000",
    "--rest_api_port=9001",
    "--model_config_file=/x/models.config",
    "--max_num_load_retries=0",
    "--file_system_poll_wait_seconds=0",
    "--enable_batching=true",
    "--batching_parameters_file=/x/b.txt",
    "--tensorflow_intra_op_parallelism=2",
    "--tensorflow_inter_op_parallelism=3",
    "--per_process_gpu_memory_fraction=0.4",
    "--rest_api_timeout_in_ms=60000",
]


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


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--model_base_path=/m", "--nope=1"], "unknown flag: --nope"),
        (["--model_base_path=/m", "stray"], "unexpected argument: 'stray'"),
        (["--model_base_path=/m", "--enable_batching=maybe"], "invalid value for boolean flag --enable_batching"),
        (["--model_base_path=/m", "--port=1", "--rest_api_port=1"], "--rest_api_port cannot be the same as --port"),
        (
            ["--model_base_path=/m", "--tensorflow_session_parallelism=2", "--tensorflow_intra_op_parallelism=2"],
            "configure either --tensorflow_session_parallelism",
        ),
    ],
)
def test_flag_errors(argv, message):
    with pytest.raises(flags.FlagError, match=message.replace("(", r"\(")):
        flags.parse(argv)


def test_model_config_parses_policies_and_labels():
    configs = parse_config_text("""model_config_list {
      config { name: "a" base_path: "/a" model_platform: "tensorflow"
               model_version_policy { specific { versions: 1 versions: 3 } } version_labels { key: "s" value: 1 } }
      config { name: "b" base_path: "/b" model_platform: "tensorflow" model_version_policy { all {} } }
      config { name: "c" base_path: "/c" model_platform: "tensorflow"
               model_version_policy { latest { num_versions: 2 } } }
      config { name: "d" base_path: "/d" model_platform: "tensorflow" }
    }""")
    assert [c.policy.select([1, 2, 3]) for c in configs] == [[3, 1], [3, 2, 1], [3, 2], [3]]
    assert configs[0].labels == {"s": 1}


@pytest.mark.parametrize(
    "text, message",
    [
        ('model_config_list { config { name: "a" base_path: "/a" } }', "neither ModelServerConfig::model_type"),
        (
            'model_config_list { config { name: "a" base_path: "/a" model_platform: "pytorch" } }',
            "PlatformConfigMap has no entry for platform pytorch",
        ),
        ('model_config_list { config { name: "a" ', "Error parsing text-format tensorflow.serving.ModelServerConfig"),
        (
            'model_config_list { config { name: "a" base_path: "/a" model_platform: "tensorflow" } '
            'config { name: "a" base_path: "/b" model_platform: "tensorflow" } }',
            "configured more than once: a",
        ),
    ],
)
def test_model_config_errors(text, message):
    with pytest.raises(ModelConfigError, match=message):
        parse_config_text(text)


def test_a_model_config_nested_past_the_recursion_limit_is_a_model_config_error():
    # found by fuzz/targets/model_config.py (fuzz/corpus/model_config/finding-any-nested-too-deeply)
    level = "custom_model_config { [type.googleapis.com/tensorflow.serving.ModelServerConfig] { "
    with pytest.raises(ModelConfigError) as error:
        parse_config_text(level * 400, "m.config")
    assert str(error.value) == (
        "Invalid protobuf file: 'm.config': Error parsing text-format tensorflow.serving.ModelServerConfig: "
        "messages nested too deeply"
    )


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
    params = parse_batching_parameters(
        "max_batch_size { value: 8 }\nbatch_timeout_micros { value: 500 }\n"
        "num_batch_threads { value: 3 }\nmax_enqueued_batches { value: 7 }\n"
        "allowed_batch_sizes: 4\nallowed_batch_sizes: 8\npad_variable_length_inputs: true"
    )
    assert params == BatchingParameters(8, 500, 7, 3, (4, 8), True)
    assert parse_batching_parameters("") == BatchingParameters(1000, 0, 10, 0, (), False)
    with pytest.raises(
        BatchingConfigError,
        match="Last entry in allowed_batch_sizes must match max_batch_size; last entry was 4; expected 8",
    ):
        parse_batching_parameters("max_batch_size { value: 8 }\nallowed_batch_sizes: 4")
    with pytest.raises(BatchingConfigError, match="Error parsing text-format tensorflow.serving.BatchingParameters"):
        parse_batching_parameters("max_batch_size: 8")


def test_variable_length_inputs_are_padded_with_the_first_element():
    tasks = [_Task({"x": np.array([[1, 2, 3]])}, 1, None, 0.0), _Task({"x": np.array([[5], [6]])}, 2, None, 0.0)]
    assert _merge("x", tasks, True).tolist() == [[1, 2, 3], [5, 5, 5], [6, 5, 5]]
    with pytest.raises(ServingError, match="have different shapes and padding is turned off"):
        _merge("x", tasks, False)


FLOAT32_TEXTS = [
    (3.0, "3.0"),
    (0.1, "0.1"),
    (42.0, "42.0"),
    (-0.0, "-0.0"),
    (1e-05, "1e-05"),
    (9e6, "9e+06"),
    (100000.0, "100000.0"),
    (1234567.0, "1234567.0"),
    (123456.7, "123456.703"),
    (3.14159265, "3.14159274"),
    (1.43577434e9, "1.43577434e+09"),
    (1e20, "1e+20"),
    (float("nan"), "NaN"),
    (float("-inf"), "-Infinity"),
]


@pytest.mark.parametrize("value, text", FLOAT32_TEXTS)
def test_float32_text_is_tfs_text(value, text):
    assert json_text.float_texts(np.array([value], np.float32)) == [text]


def test_float32_texts_of_a_large_array_take_the_vectorised_path_to_the_same_texts():
    values = np.array([value for value, _ in FLOAT32_TEXTS] * 2, np.float32)
    assert values.size > json_text.SMALL
    assert json_text.float_texts(values) == [text for _, text in FLOAT32_TEXTS] * 2


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_small_and_vectorised_float_paths_agree(dtype):
    rng = np.random.default_rng(7)
    info = np.finfo(dtype)
    with np.errstate(over="ignore"):
        values = np.concatenate(
            [
                np.array([info.max, -info.max, info.tiny, info.smallest_subnormal, np.inf, np.nan, -0.0, 1 / 3]),
                rng.standard_normal(3000) * 10.0 ** rng.integers(-40, 40, 3000),
                rng.integers(-(10**7), 10**7, 3000),
                rng.integers(-1000, 1000, 3000) / 8,
            ]
        ).astype(dtype)
    vectorised = json_text.float_texts(values)
    small = [text for i in range(0, values.size, 4) for text in json_text.float_texts(values[i : i + 4])]
    assert small == vectorised


def test_double_text_uses_17_digits_when_needed():
    assert json_text.float_texts(np.array([0.1, 1 / 3], np.float64)) == ["0.1", "0.33333333333333331"]


def test_debug_text_of_request_values_is_rapidjson_pretty_with_one_line_arrays():
    assert json_text.debug({"instances": [1.0, 1e3], "s": "a\x01"}) == (
        '{\n    "instances": [1.0, 1000.0],\n    "s": "a\\u0001"\n}'
    )
    assert json_text.debug(list(range(1000))).startswith("[0, 1, 2") and len(json_text.debug(list(range(1000)))) == 256


FLOAT = TensorInfo("x", "x:0", 1, (-1,))
INT32 = TensorInfo("i", "i:0", 3, (-1,))
STRING = TensorInfo("s", "s:0", 7, (-1,))


@pytest.mark.parametrize(
    "value, info, expected",
    [
        ([[1, 2], [3, 4]], FLOAT, np.array([[1, 2], [3, 4]], np.float32)),
        ([1, 2147483647], INT32, np.array([1, 2147483647], np.int32)),
        (["a", {"b64": "AAE="}], STRING, np.array([b"a", b"\x00\x01"], object)),
        (1e300, FLOAT, np.array(np.inf, np.float32)),  # numpy warns; the server mutes that warning
    ],
)
@pytest.mark.filterwarnings("ignore:overflow encountered in cast")
def test_json_values_convert_to_the_signature_dtype(value, info, expected):
    for may_hold_bools in (True, False):  # the checked path and the vectorised one agree
        array = json_request.to_array(value, info, may_hold_bools)
        assert array.dtype == expected.dtype and array.tolist() == expected.tolist()


@pytest.mark.parametrize(
    "value, info, message",
    [
        ([1.0], INT32, "JSON Value: 1.0 Type: Number is not of expected type: int32"),
        ([2147483648], INT32, "JSON Value: 2147483648 Type: Number is not of expected type: int32"),
        ([[1], [2, 3]], FLOAT, "Encountered list at unexpected size: 2 at level: 1 expected size: 1"),
        ([[1], 2], FLOAT, "JSON Value: 2 found at incorrect level: 2 in the JSON DOM. Expected at level: 2"),
        ([1, [2]], FLOAT, "Encountered list at unexpected level: 1 expected < 1"),
        ([None], FLOAT, "JSON Value: null Type: Null is not of expected type: float"),
    ],
)
def test_json_value_errors(value, info, message):
    with pytest.raises(ServingError, match=message.replace("[", r"\[").replace("(", r"\(")):
        json_request.to_array(value, info, may_hold_bools=False)


def test_columnar_response_nests_every_dimension_over_lines():
    body = json_response.predict_body(
        {"y": np.array([[1, 2]], np.int64), "z": np.zeros((0, 2), np.float32)}, row_format=False
    )
    assert body == (
        b'{\n    "outputs": {\n        "y": [\n            [\n                1,\n                2\n'
        b'            ]\n        ],\n        "z": []\n    }\n}'
    )


def test_row_response_checks_the_batch_dimension():
    with pytest.raises(ServingError, match="Tensor name: b has inconsistent batch size: 1 expecting: 2"):
        json_response.predict_body({"a": np.zeros(2), "b": np.zeros(1)}, row_format=True)
    with pytest.raises(ServingError, match="Tensor name: a has no shape information "):
        json_response.predict_body({"a": np.float32(1.0).reshape(())}, row_format=True)
    assert json_response.predict_body({"a": np.zeros((0, 2), np.float32)}, True) == b'{\n    "predictions": []\n}'


@pytest.mark.parametrize(
    "method, path, route",
    [
        ("POST", "/v1/models/m%20x/versions/007:classify", Route(Verb.CLASSIFY, "m x", 7)),
        ("POST", "/V1/MODELS/m/labels/stable:predict", Route(Verb.PREDICT, "m", label="stable")),
        ("POST", "/v1/models/m:regress", Route(Verb.REGRESS, "m")),
        ("GET", "/v1/models/m/versions/2", Route(Verb.STATUS, "m", 2)),
        ("GET", "/v1/models/m/metadata", Route(Verb.METADATA, "m")),
    ],
)
def test_rest_routes(method, path, route):
    assert RestApi.route(method, path) == route


@pytest.mark.parametrize(
    "method, path, status, body",
    [
        ("POST", "/v1/models/m:Predict", 400, b'{\n    "error": "Malformed request: POST /v1/models/m:Predict"\n}'),
        ("GET", "/v1/models", 400, b'{\n    "error": "Missing model name in request."\n}'),
        ("PUT", "/v1/models/m", 400, b'{\n    "error": "Malformed request: PUT /v1/models/m"\n}'),
        ("TRACE", "/v1/models/m", 501, None),
        ("GET", "/v2/models/m", 404, None),
    ],
)
def test_rest_routes_answered_by_the_path_alone(method, path, status, body):
    route = RestApi.route(method, path)
    assert (route.verb, route.fixed.status) == (None, status)
    assert route.fixed.body == (body or http_server.html_error(status).body)


def test_the_model_server_imports_tensorflow_without_keras():
    """Keras (and scikit-learn, which Keras imports when installed) would double a restarted server's start."""
    code = (
        "import sys\nfrom sagemaker_tfs.model_server.__main__ import skip_keras\nskip_keras()\nimport tensorflow\n"
        "print('keras' in sys.modules, 'sklearn' in sys.modules, tensorflow.constant(2.0).numpy())"
    )
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "TF_CPP_MIN_LOG_LEVEL": "3"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.stdout.split() == ["False", "False", "2.0"], result.stderr


# ---------------------------------------------------------------------------------------------- big tensors
# The numpy paths for big float tensors (json_request.NumericArray, tfs_json_text.float32_json) against the
# element-by-element paths they replace: the same arrays to the bit, the same texts, the same errors.


def _float32_cases() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(20240611)
    info = np.finfo(np.float32)
    near_tens = np.array([10.0**k for k in range(-45, 39)], np.float32)
    with np.errstate(over="ignore"):
        cases = {
            "any bits": rng.integers(0, 2**32, 40000, dtype=np.uint64).astype(np.uint32).view(np.float32),
            "every decade": (rng.standard_normal(20000) * 10.0 ** rng.integers(-46, 40, 20000)).astype(np.float32),
            "one decade": rng.uniform(2, 2.5, 5000).astype(np.float32),
            "decade by decade": np.concatenate(
                [
                    np.where(rng.random(400) < 0.3, np.float32(2 * 10.0**k), rng.uniform(10.0**k, 10.0 ** (k + 1), 400))
                    for k in range(-7, 11)
                ]
            ).astype(np.float32),
            "unit interval": rng.random(5000, dtype=np.float32),
            "signed": (rng.random(5000, dtype=np.float32) - 0.5) * 8,
            "small": rng.uniform(1e-5, 1e-3, 5000).astype(np.float32),
            "millions": -rng.uniform(1e5, 1e9, 5000).astype(np.float32),
            "integers": rng.integers(-(10**8), 10**8, 5000).astype(np.float32),
            "halves": (rng.integers(-1000, 1000, 5000) / 2).astype(np.float32),
            "zeros": np.where(rng.random(5000) < 0.5, np.float32(0), np.float32(-0.0)) * rng.integers(0, 2, 5000),
            "special": np.array(
                [
                    0.0,
                    -0.0,
                    np.nan,
                    -np.nan,
                    np.inf,
                    -np.inf,
                    info.max,
                    -info.max,
                    info.tiny,
                    info.smallest_subnormal,
                    1e-5,
                    9e6,
                    1e5,
                    999999.5,
                    9999999,
                    123456789,
                    1e9,
                    2**24 + 1,
                    1 + 2.0**-23,
                    0.1,
                    1 / 3,
                ]
                * 30,
                np.float32,
            ),
            "powers of ten": np.concatenate(
                [near_tens, np.nextafter(near_tens, np.float32(0)), np.nextafter(near_tens, np.float32(np.inf))] * 4
            ),
        }
    return cases


FLOAT32_CASES = _float32_cases()


@pytest.mark.parametrize("case", FLOAT32_CASES)
def test_float32_texts_of_big_arrays_are_the_element_by_element_texts(case, monkeypatch):
    values = FLOAT32_CASES[case]
    expected = [json_text._float_text(v, False) for v in values.tolist()]
    assert values.size >= json_text.VECTOR_MIN
    assert json_text.float_texts(values) == expected
    monkeypatch.setattr(json_text, "_BLOCK", 37)  # many blocks: one decade or not, one layout or mixed
    assert json_text.float_texts(values) == expected


def _element_by_element_body(outputs, row_format: bool, monkeypatch) -> bytes:
    with monkeypatch.context() as patch:
        patch.setattr(json_response, "_float32_items", lambda *args, **kwargs: None)
        patch.setattr(json_text, "VECTOR_MIN", 2**62)
        return json_response.predict_body(outputs, row_format)


@pytest.mark.parametrize("shape", [(600,), (3, 300), (2, 3, 4, 25), (1, 7, 7, 3), (4, 1, 70), (2, 2, 2, 2, 40)])
def test_float32_answers_of_big_tensors_are_the_element_by_element_answers(shape, monkeypatch):
    rng = np.random.default_rng(sum(shape))
    y = (rng.standard_normal(shape) * 10.0 ** rng.integers(-6, 8, shape)).astype(np.float32)
    y.reshape(-1)[::7] = rng.uniform(1, 2, y.size)[::7]
    for outputs in ({"y": y}, {"y": y, "z": -y}, {"y": y, "i": np.arange(shape[0])}):
        for row_format in (True, False):
            expected = _element_by_element_body(outputs, row_format, monkeypatch)
            assert json_response.predict_body(outputs, row_format) == expected


def test_float32_rows_of_a_batch_are_cut_from_the_batch_text(monkeypatch):
    from sagemaker_tfs.model_server.batch_scheduler import BatchRows

    whole = np.random.default_rng(5).random((6, 20, 3), dtype=np.float32)
    memo: dict = {}
    for start, stop in ((0, 1), (1, 4), (4, 6)):
        rows = BatchRows.of(whole, start, stop, memo)
        expected = _element_by_element_body({"y": whole[start:stop]}, True, monkeypatch)
        assert json_response.predict_body({"y": rows}, True) == expected


NUMBER_FORMATS = [  # how a client may write a number
    lambda v, rng: repr(float(v)),
    lambda v, rng: f"{v:.9g}",
    lambda v, rng: f"{v:.17g}",
    lambda v, rng: f"{v:e}",
    lambda v, rng: f"{v:.3E}",
    lambda v, rng: str(int(v * 1000)),
    lambda v, rng: f"{v:.25f}",
    lambda v, rng: rng.choice(
        [
            "0",
            "-0",
            "0.0",
            "-0.0",
            "1e-400",
            "4.9e-324",
            "1.4e-45",
            "7e-46",
            "3.4028235677973366e38",
            "3.4028234e38",
            "16777217",
            "16777217.0",
            "1.000000059604644775390625",
            "123456789012345",
            "-999999999999999",
            "1E+2",
            "2.5e+00",
            "0.000000000000000000000000000000000001234",
            "1" * 40 + ".5",
            "9.999999999999999999999e-5",
            "1e-5",
            "0e0",
            "-0e-0",
        ]
    ),
]


def _numbers(count: int, rng, formats=NUMBER_FORMATS) -> list[str]:
    values = (rng.standard_normal(count) * 10.0 ** rng.integers(-8, 9, count)).astype(np.float32)
    kinds = rng.integers(0, len(formats), count)
    return [str(formats[kind](value, rng)) for kind, value in zip(kinds.tolist(), values.tolist(), strict=True)]


def _nested(tokens: list[str], shape: tuple[int, ...], separator: str, rng) -> str:
    """The JSON lists of `shape` holding the tokens, with whitespace of some kind around them."""
    spaces = ["", " ", "\n", "\t", "\r\n  "]
    if len(shape) == 1:
        items = tokens
    else:
        step = len(tokens) // shape[0]
        items = [_nested(tokens[i * step : (i + 1) * step], shape[1:], separator, rng) for i in range(shape[0])]
    if separator == "mixed":
        return "[" + ",".join(rng.choice(spaces) + item + rng.choice(spaces) for item in items) + "]"
    return "[" + separator.join(items) + "]"


def _outcome(doc_of, body: bytes, info: TensorInfo):
    """(the tensor of a predict body and whether it is in rows, or its error: code and message; whether the body took
    the numeric path), as rest.py gets them."""
    taken = False
    try:
        doc = doc_of(body)
        taken = any(isinstance(value, json_request.NumericArray) for value in doc.values())
        tensors, row_format = json_request.predict_inputs(doc, {"x": info}, json_request.may_hold_bools(doc, body))
        return (tensors["x"], row_format), taken
    except ServingError as exc:
        return (exc.code, exc.message), taken


def _same_outcome(body: bytes, info: TensorInfo) -> bool:
    """Whether the numeric path (taken, or refused) gives what the usual parse gives; True if it took the body."""
    usual, _ = _outcome(json_request.request_object, body, info)
    fast, taken = _outcome(lambda text: json_request.predict_request(text, lambda name: info.dtype), body, info)
    if isinstance(usual[0], np.ndarray):
        assert isinstance(fast[0], np.ndarray), fast
        (expected, expected_rows), (array, rows) = usual, fast
        assert (array.dtype, array.shape, rows) == (expected.dtype, expected.shape, expected_rows)
        bits = np.uint32 if array.dtype == np.float32 else np.uint64
        assert np.array_equal(array.view(bits), expected.view(bits))
    else:
        assert fast == usual
    return taken


DOUBLE = TensorInfo("x", "x:0", 2, (-1,))


@pytest.mark.filterwarnings("ignore:overflow encountered in cast")  # the usual path's float32 of 1e300
@pytest.mark.parametrize("info", [FLOAT, DOUBLE], ids=["float", "double"])
@pytest.mark.parametrize("separator", [", ", ",", "mixed"])
@pytest.mark.parametrize("shape", [(1500,), (15, 100), (3, 5, 100), (2, 5, 10, 10), (1, 1, 1, 1000)])
def test_numeric_bodies_convert_to_the_usual_tensors(shape, separator, info, monkeypatch):
    rng = np.random.default_rng(len(shape) * 100 + len(separator) + info.dtype)
    tokens = _numbers(int(np.prod(shape)), rng)
    text = _nested(tokens, shape, separator, rng)
    monkeypatch.setattr(json_request, "FAST_MIN_BYTES", 0)
    for body in (
        f'{{"instances": {text}}}',
        f'{{"inputs":{text} }}',
        f'{{"signature_name": "serving_default", "instances": {text}}}',
        f'\n{{ "instances" :\n{text}\n, "signature_name":"serving_default"}}\n',
    ):
        assert _same_outcome(body.encode(), info)  # taken: valid JSON, numbers of up to 15-digit integers


@pytest.mark.filterwarnings("ignore:overflow encountered in cast")
@pytest.mark.parametrize("info", [FLOAT, DOUBLE], ids=["float", "double"])
def test_float_formats_of_every_kind_convert_to_the_usual_values(info, monkeypatch):
    rng = np.random.default_rng(7 + info.dtype)
    values = FLOAT32_CASES["every decade"].astype(np.float64)
    formats = [repr, lambda v: f"{v:.9g}", lambda v: f"{v:.17g}", lambda v: f"{v:.3e}", lambda v: f"{v:.12E}"]
    kinds = rng.integers(0, len(formats), values.size).tolist()
    tokens = [formats[k](v) for k, v in zip(kinds, values.tolist(), strict=True)]
    tokens = [t.lower() for t, v in zip(tokens, values.tolist(), strict=True) if math.isfinite(v)]
    tokens = [t + ".0" if t.lstrip("-").isdigit() else t for t in tokens]  # %.17g of 1e16: a 17-digit integer
    assert _same_outcome(f'{{"instances": [{", ".join(tokens)}]}}'.encode(), info)
    digits = zip(rng.integers(1, 9, 3000).tolist(), rng.integers(0, 10**16, 3000).tolist(), strict=True)
    midpoints = [f"{a}.{b}" for a, b in digits]  # 17 digits, some near a float32's rounding midpoint
    assert _same_outcome(f'{{"inputs": [{",".join(midpoints)}]}}'.encode(), info)


@pytest.mark.parametrize(
    "defect",
    [
        "01",
        "1.",
        ".5",
        "-",
        "+1",
        "1e",
        "1e+",
        "1.2.3",
        "1e5e5",
        "--1",
        "1-2",
        "1 2",
        "1.5e3.5",
        "e5",
        "-e5",
        "1e-",
        "NaN",
        "Infinity",
        "-Infinity",
        "true",
        "false",
        "null",
        '"1"',
        "[1]",
        "{}",
        "",
        " ",
        "1,2",
        "0x10",
        "1_000",
        "12345678901234567890",
        "1" * 5000,
        "1e400",
        "-1e999",
        "- 1",
        "1e+-5",
        "1.e5",
        "00",
        "-01.5",
        "\u00bd",
        "1\x00",
    ],
)
def test_bodies_the_numeric_path_refuses_answer_as_before(defect, monkeypatch):
    rng = np.random.default_rng(len(defect))
    monkeypatch.setattr(json_request, "FAST_MIN_BYTES", 0)
    for place, separator in ((0, ", "), (250, "mixed"), (-1, ", ")):  # the first, one within, the last
        tokens = [repr(float(v)) for v in rng.random(500, dtype=np.float32).tolist()]
        tokens[place] = defect
        body = f'{{"instances": {_nested(tokens, (5, 100), separator, rng)}}}'.encode()
        assert not _same_outcome(body, FLOAT)


def test_integers_past_two_to_the_53_convert_as_the_usual_path_does(monkeypatch):
    """int64 -> float32 rounds once where int64 -> double -> float32 rounds twice: 2^60 + 2^36 + 1 is above a float32
    midpoint, its double is on it. Such integers for a float input take the usual path; for a double input, and
    beside decimal points only, the numeric path is exact."""
    monkeypatch.setattr(json_request, "FAST_MIN_BYTES", 0)
    integers = [2**60 + 2**36 + 1, -(2**60 + 2**36 + 1), 2**63 - 1, 2**53 + 1] * 100
    unsigned = [2**64 - 2**39 + 1, 2**64 - 1, 2**60 + 2**36 + 1] * 100  # numpy's uint64
    for values in (integers, unsigned):
        body = f'{{"instances": [{", ".join(map(str, values))}]}}'.encode()
        assert not _same_outcome(body, FLOAT)
        assert _same_outcome(body, DOUBLE)
    decimals = ", ".join(f"{value}.0" for value in integers)
    assert _same_outcome(f'{{"instances": [{decimals}]}}'.encode(), FLOAT)
    small = ", ".join(str(value % 2**53) for value in integers)  # exact in a double: the same roundings
    assert _same_outcome(f'{{"instances": [{small}]}}'.encode(), FLOAT)


@pytest.mark.parametrize(
    "text",
    [
        "[[0.5, 1.5], [2.5]]",
        "[[0.5, 1.5], 2.5]",
        "[0.5, [1.5, 2.5]]",
        "[[0.5, 1.5]] ",
        "[[]]",
        "[]",
        "[[0.5,,1.5]]",
        "[[0.5, 1.5],]",
        "[,[0.5]]",
        "[[0.5] [1.5]]",
        "[[0.5],\n[1.5]",
        "[[0.5],[1.5]]]",
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[0.5]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
        "[[0.5, 1.5], [2.5, 3.5]] x",
        "[[0.5, 1.5], [2.5, 3.5]]}",
    ],
)
def test_irregular_arrays_answer_as_before(text, monkeypatch):
    monkeypatch.setattr(json_request, "FAST_MIN_BYTES", 0)
    padding = ", ".join(["[0.25, 0.75]"] * 500)
    for body in (
        f'{{"instances": {text}}}',
        f'{{"instances": [{padding}, {text}]}}',
        f'{{"instances": [{text}, {padding}]}}',
        f'{{"inputs": {text}, "inputs": [1.0]}}',
        f'{{"signature_name": "a", "instances": {text}, "signature_name": "b"}}',
        f'{{"signature_name": "tr\\u0075e", "instances": [{padding}]}}',
        f'{{"instances": [{padding}]}}\n\n',
        f'{{"instances": [{padding}], "extra": 1}}',
        f'\ufeff{{"instances": [{padding}]}}',
    ):
        for info in (FLOAT, DOUBLE, INT32):
            _same_outcome(body.encode(), info)  # whether taken or not: the same tensor or error


def test_small_bodies_and_other_inputs_take_the_usual_path():
    body = b'{"instances": [1.0, 2.0, 5.0]}'
    assert isinstance(json_request.predict_request(body, lambda name: FLOAT.dtype)["instances"], list)
    big = f'{{"instances": [{", ".join(["0.5"] * 20000)}]}}'.encode()
    for dtype in (INT32.dtype, STRING.dtype, None):
        assert isinstance(json_request.predict_request(big, lambda name, dtype=dtype: dtype)["instances"], list)
    numbers = json_request.predict_request(big, lambda name: FLOAT.dtype)["instances"]
    assert isinstance(numbers, json_request.NumericArray)
    assert _same_outcome(big, INT32) is False  # converted, for an int32 input, as the usual path does


class _Servables:
    """A ServableManager of one model `m` whose signature has one input x (dtype as given) and one output y."""

    def __init__(self, dtype: int):
        from sagemaker_tfs.model_server.servable import Signature

        x, y = TensorInfo("x", "x:0", dtype, None), TensorInfo("y", "y:0", dtype, None)
        signature = Signature("serving_default", "tensorflow/serving/predict", {"x": x}, {"y": y}, None)
        self.servable = type("Servable", (), {"name": "m", "version": 1, "signatures": {"serving_default": signature}})

    def resolve(self, name, version=None, label=None):
        if name != "m":
            raise ServingError(Code.NOT_FOUND, f"Servable not found for request: Latest({name})")
        return self.servable


class _Runner:
    """Runs y = 0.5 x + 2 at once."""

    def run_in_loop(self, servable, feeds, fetches, api):
        from concurrent.futures import Future

        future = Future()
        (x,) = feeds.values()
        future.set_result([x * x.dtype.type(0.5) + x.dtype.type(2)])
        return future


@pytest.mark.filterwarnings("ignore:overflow encountered in cast")
@pytest.mark.parametrize("dtype", [1, 2, 3])
def test_rest_predict_of_big_bodies_answers_as_before(dtype, monkeypatch):
    rng = np.random.default_rng(dtype)
    api = RestApi(_Servables(dtype), _Runner())
    taken, numeric_array = [], json_request._numeric_array
    monkeypatch.setattr(json_request, "_numeric_array", lambda *args: taken.append(args[0]) or numeric_array(*args))
    rows = rng.random((3, 40, 40), dtype=np.float32).tolist()
    bodies = [
        json.dumps({"instances": rows}),
        json.dumps({"signature_name": "other", "instances": rows}),
        json.dumps({"inputs": rows}).replace("]]", "], 7]", 1),  # ragged
        json.dumps({"instances": rows})[:-9] + "1.2.3]]]}",  # not JSON
        json.dumps({"instances": [[[int(v * 10**6) for v in r] for r in row] for row in rows]}),
    ]
    for path in ("/v1/models/m:predict", "/v1/models/missing:predict"):
        for body in bodies:
            body = body.encode()
            assert len(body) > json_request.FAST_MIN_BYTES
            response = api.handle("POST", path, body)
            with monkeypatch.context() as patch:
                patch.setattr(json_request, "FAST_MIN_BYTES", 2**62)
                patch.setattr(json_text, "VECTOR_MIN", 2**62)
                patch.setattr(json_response, "_float32_items", lambda *args, **kwargs: None)
                usual = api.handle("POST", path, body)
            assert (response.status, response.body) == (usual.status, usual.body)
    assert len(taken) == (4 if dtype in (1, 2) else 0)  # for the model's float input and default signature
