"""The inference toolkit contract through the whole stack (serve, nginx, gunicorn, the app, the model server when
a SavedModel is present), one test per row of the tables of the spec (docs/toolkit-contract.md): the functions and
their defaults, the context, what the functions receive, the default decoders and encoders, the served model,
return values, errors and the environment variables. Start-up failures are in test_stack_toolkit_startup.py."""

from __future__ import annotations

import io
import threading
from pathlib import Path

import model_dirs
import numpy as np
import paths
import processes
import pytest
import serve_stack
from clients import npy_body
from sagemaker_tfs.config import Settings
from sagemaker_tfs.shared import runtime_dir
from stack_support import invoke

READY_LINE = " INFO serve: ready: "
NO_SUPPORT = (
    "is not supported by this framework. Please implement input_fn to deserialize the request data or an "
    "output_fn to serialize the response."
)

# ---- the default input_fn, predict_fn (model.predict) and output_fn ----

DEFAULTS = """
    class Doubler:
        def predict(self, data):
            return data if isinstance(data, dict) else data * 2

    def model_fn(model_dir):
        return Doubler()
"""


@pytest.fixture(scope="module")
def defaults(tmp_path_factory):
    folder = model_dirs.write_code(tmp_path_factory.mktemp("defaults") / "model", DEFAULTS)
    with serve_stack.Stack(folder, env={"SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT": "text/csv"}) as stack:
        yield stack


def test_no_model_server_runs_without_a_saved_model(defaults):
    # the ready line is serve's last line of start-up: no model server was started before it
    log = processes.wait_for_log(defaults, "no SavedModel in ", READY_LINE)
    assert "starting model server" not in log
    assert not list(defaults.runtime_dir.glob("tfs-*.pid"))


@pytest.mark.parametrize(
    "body, content_type, accept, expected",
    [
        ("[1, 2]", "application/json", "application/json", "[2, 4]"),  # JSON array -> numpy
        ("[[1.5, 2], [3, 4]]", "application/json", "application/json", "[[3.0, 4.0], [6.0, 8.0]]"),
        ('{"a": [1, 2]}', "application/json", "application/json", '{"a": [1, 2]}'),  # an object stays a dict
        ("3", "application/json", "application/json", "6"),  # a number: 0-d array
        ("[1, 2]", "Application/JSON; charset=utf-8", "application/json", "[2, 4]"),  # parameters and case ignored
        ("1,2,3", "text/csv", "text/csv", "2\n4\n6\n"),  # int64, one row: 1-D
        ("1.5,2", "text/csv", "text/csv", "3.0\n4.0\n"),  # float64, not a structured array
        ("1,2\r\n3,4\r\n", "text/csv", "text/csv", "2,4\n6,8\n"),  # 2-D: a line per row
        ("1\n2\n\n3\n", "text/csv", "text/csv", "2\n4\n6\n"),  # one column: 1-D; blank lines skipped
        ('"1","2"', "text/csv", "application/json", "[2, 4]"),  # RFC 4180 quoting
        ("7", "text/csv", "text/csv", "14\n"),
        ("1\n[2, 3]\n\n4\n", "application/jsonlines", "application/json", None),  # ragged JSON lines: 400 below
        ("[1, 2]\n[3, 4]\n", "application/jsonlines", "application/jsonlines", "[2, 4]\n[6, 8]"),
        ("1\n2\n", "application/jsonlines", "text/csv", "2\n4\n"),
        ("3", "application/json", "text/csv", "6\n"),  # 0-d as CSV: one line
    ],
)
def test_default_decoders_and_encoders(defaults, body, content_type, accept, expected):
    answer = invoke(defaults, body, content_type, Accept=accept)
    if expected is None:
        assert answer.status == 400
        assert answer.json()["error"].startswith("the JSON lines cannot be an array: ")
        return
    assert (answer.status, answer.content_type, answer.text) == (200, accept.split(";")[0], expected)


def test_npy_in_and_out_never_pickled(defaults):
    array = np.array([[1.5, 2.0], [3.0, 4.0]], dtype=np.float32)
    answer = invoke(defaults, npy_body(array), "application/x-npy", Accept="application/x-npy")
    assert (answer.status, answer.content_type) == (200, "application/x-npy")
    result = np.load(io.BytesIO(answer.body), allow_pickle=False)
    assert result.dtype == np.float32 and result.tolist() == [[3.0, 4.0], [6.0, 8.0]]
    assert invoke(defaults, npy_body(np.array([1, 2])), "application/x-npy", Accept="application/json").text == "[2, 4]"


@pytest.mark.parametrize(
    "body, error",
    [
        (
            npy_body(np.array([{"x": 1}], dtype=object), allow_pickle=True),
            "cannot read the NPY body: it holds Python objects (a pickled payload), which are refused "
            "(allow_pickle=False); "
            "send an array of numbers or strings",
        ),
        (b"\x80\x04\x95 a pickle", "cannot read the NPY body: it does not start with the NPY magic \\x93NUMPY"),
        (npy_body(np.array([1.0, 2.0]))[:-3], "cannot read the NPY body: "),
    ],
)
def test_a_pickled_or_corrupt_npy_body_is_400(defaults, body, error):
    answer = invoke(defaults, body, "application/x-npy")
    assert answer.status == 400
    assert answer.json()["error"].startswith(error)


@pytest.mark.parametrize(
    "body, content_type, error",
    [
        ("[[1, 2], [3]]", "application/json", "the JSON value cannot be an array: "),
        ("[1, 2", "application/json", "the request body is not valid JSON: Expecting ',' delimiter: line 1 column 6"),
        (
            "1,2\n3,x\n",
            "text/csv",
            "CSV line 2: 'x' is not a number (the default input_fn reads numbers only; write an "
            "input_fn for other fields)",
        ),
        (
            "1,2\n3\n",
            "text/csv",
            "CSV line 2 has 1 field(s) but line 1 has 2: every row must have the same number of fields",
        ),
        (
            "1\n{\n",
            "application/jsonlines",
            "JSON lines: line 2 is not one JSON value: Expecting property name enclosed in double quotes at column 2",
        ),
        ("", "application/json", "empty request body"),
        ("", "text/csv", "empty request body"),
        (b"", "application/x-npy", "empty request body"),
    ],
)
def test_bad_bodies_are_400_naming_the_problem(defaults, body, content_type, error):
    answer = invoke(defaults, body, content_type, Accept="application/json")
    assert answer.status == 400
    assert answer.json()["error"].startswith(error)


def test_other_types_are_415_and_406_with_the_toolkit_s_text(defaults):
    answer = invoke(defaults, "<x/>", "application/xml")
    assert (answer.status, answer.json()) == (415, {"error": f"Content type application/xml {NO_SUPPORT}"})
    answer = invoke(defaults, "[1]", "application/json", Accept="application/xml, image/*")
    assert (answer.status, answer.json()) == (406, {"error": f"Content type application/xml, image/* {NO_SUPPORT}"})


@pytest.mark.parametrize(
    "accept, content_type",
    [
        (None, "text/csv"),  # SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT
        ("*/*", "text/csv"),
        ("text/csv;q=0.5, application/json", "application/json"),  # the highest q wins
        ("application/xml, application/jsonlines, text/csv", "application/jsonlines"),  # then list order
        ("application/json;q=0, text/*;q=0.2", "text/csv"),  # q=0 excluded
    ],
)
def test_the_default_output_fn_chooses_by_accept(defaults, accept, content_type):
    answer = invoke(defaults, "[1, 2]", "application/json", **({"Accept": accept} if accept else {}))
    assert (answer.status, answer.content_type) == (200, content_type)


def test_a_missing_content_type_is_json(defaults):
    assert invoke(defaults, "[1, 2]", None, Accept="application/json").text == "[2, 4]"


# ---- the functions, the context, what they receive, return values, errors ----

PROBE = """
    import json
    import os
    import threading
    import time

    import falcon
    import numpy as np
    import probe_helper  # from code/lib
    from sagemaker_inference import content_types, decoder, encoder, errors
    from sagemaker_inference.default_inference_handler import DefaultInferenceHandler
    from sagemaker_tfs import HandlerError

    CALLS = []  # the start-up calls of this worker, in order


    class TooManyRequests(errors.BaseInferenceToolkitError):
        def __init__(self):
            super().__init__(429, "slow down", "Too Many Requests")


    def pre_model_fn(model_dir, context):
        CALLS.append(["pre_model_fn", model_dir, context.system_properties, context.model_name,
                      context.get_all_request_header(0)])


    def model_fn(model_dir):
        time.sleep(float(os.environ["PROBE_MODEL_FN_SECONDS"]))  # longer than gunicorn's timeout
        CALLS.append(["model_fn", model_dir])
        return {"warm": False}


    def model_warmup_fn(model_dir, model, context=None):  # a defaulted parameter counts: it gets the context
        CALLS.append(["model_warmup_fn", model_dir, type(context).__name__])
        model["warm"] = True


    def input_fn(input_data, content_type, context):
        probe = context.get_request_header(0, "x-probe")
        context.seen = [id(context)]
        if probe == "received":
            shown = input_data if isinstance(input_data, str) else list(input_data)
            return {"type": type(input_data).__name__, "input_data": shown, "content_type": content_type}
        if probe == "compat":
            return decoder.decode(input_data, content_type)
        raise_for(probe)
        return input_data


    def raise_for(probe):
        if probe == "generic":
            raise errors.GenericInferenceToolkitError(409, "conflicting record")
        if probe == "base":
            raise TooManyRequests()
        if probe == "handler":
            raise HandlerError(422, "field x is missing")
        if probe == "falcon":
            raise falcon.HTTPServiceUnavailable(description="busy", headers={"Retry-After": "3"})
        if probe == "unsupported":
            raise errors.UnsupportedFormatError("application/x-foo")
        if probe == "value":
            raise ValueError("boom")


    def predict_fn(data, model, context=None):
        context.seen.append(id(context))
        if context.get_request_header(0, "X-Probe") == "compat":
            return DefaultInferenceHandler().default_output_fn(data * 2, content_types.CSV)
        return {"data": data, "warm": model["warm"]}


    def output_fn(prediction, accept, context):
        context.seen.append(id(context))
        probe = context.get_request_header(0, "X-Probe")
        if probe == "startup":
            return {"calls": CALLS, "pid": os.getpid(), "helper": probe_helper.__file__}
        if probe == "received":
            return {**prediction["data"], "accept": accept}
        if probe == "context":
            return {"system_properties": context.system_properties, "model_name": context.model_name,
                    "properties": context.request_processor[0].get_request_properties(),
                    "all": context.get_all_request_header(0), "one": context.get_request_header(0, "x-CUSTOM"),
                    "none": context.get_request_header(0, "X-Absent"), "same": len(set(context.seen)) == 1}
        if probe == "status":
            context.set_response_status(202, "Accepted")
            context.set_response_content_type(0, "text/plain")
            return "queued", "application/json"
        if probe == "return":
            kind = context.get_request_header(0, "X-Return")
            return {
                "pair": ("body", "text/plain"), "triple": ("made", "text/plain", 201), "str": "bare",
                "bytes": b"bare", "bytearray": bytearray(b"bare"), "dict": {"a": 1}, "list": [1, "x"],
                "array": np.arange(3), "none": None,
            }[kind]
        if probe == "compat":
            return prediction
        if probe == "echo":
            return prediction["data"], "text/plain"
        return prediction
"""


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    folder = tmp_path_factory.mktemp("probe") / "model"
    model_dirs.write_code(folder, files={"probe.py": PROBE, "lib/probe_helper.py": "HELPS = True\n"})
    env = {
        "SAGEMAKER_PROGRAM": "probe.py",
        "SAGEMAKER_MODEL_SERVER_WORKERS": "2",
        "SAGEMAKER_GUNICORN_THREADS": "4",
        "SAGEMAKER_MODEL_SERVER_TIMEOUT": "2",
        "PROBE_MODEL_FN_SECONDS": "4",
    }
    with serve_stack.Stack(folder, env=env) as stack:
        stack.model_dir = folder
        yield stack


def run(stack, probe: str, body: str | bytes = "[1]", content_type: str | None = "application/json", **headers):
    return invoke(stack, body, content_type, X_Probe=probe, **headers)


def test_the_toolkit_s_worker_count_and_timeout_names_apply(probe):
    # gunicorn's command line is built from the settings serve hands it (its title replaces what ps shows of it)
    master = probe.pid_of("gunicorn-supervised")
    environ = Path(f"/proc/{master}/environ").read_bytes().split(b"\0")
    handed = Settings.from_env(dict(entry.decode().split("=", 1) for entry in environ if b"=" in entry))
    assert handed.gunicorn_workers == 2  # SAGEMAKER_MODEL_SERVER_WORKERS
    assert handed.gunicorn_timeout_seconds == 2  # SAGEMAKER_MODEL_SERVER_TIMEOUT
    assert len(probe.gunicorn_workers()) == 2
    processes.wait_for_log(
        probe, "inference toolkit functions pre_model_fn, model_fn, model_warmup_fn, input_fn, predict_fn, output_fn"
    )  # SAGEMAKER_PROGRAM=probe.py


def test_every_worker_ran_the_start_up_functions_in_order_outliving_gunicorn_s_timeout(probe):
    model_dir = str(probe.model_dir.resolve())
    answer = run(probe, "startup")
    assert answer.status == 200
    assert answer.json()["calls"] == [
        ["pre_model_fn", model_dir, {"model_dir": model_dir, "gpu_id": None, "batch_size": 1}, "model", {}],
        ["model_fn", model_dir],
        ["model_warmup_fn", model_dir, "Context"],
    ]
    assert answer.json()["helper"] == f"{model_dir}/code/lib/probe_helper.py"
    # serve opened the port once both workers had run them (model_fn takes 4 s, gunicorn's timeout is 2 s)
    assert runtime_dir.ready_workers(probe.runtime_dir) == 2
    # gunicorn's lines and its workers' come through one pipe: a timeout would be logged before a new worker's line
    log = processes.wait_for_log(probe, "sagemaker_tfs.toolkit: model_warmup_fn done in", count=2)
    assert log.count("sagemaker_tfs.toolkit: model_warmup_fn done in") == 2
    assert "WORKER TIMEOUT" not in log


def test_the_context_of_a_request(probe):
    answer = run(probe, "context", X_Custom="Value, with comma", X_Amzn_SageMaker_Custom_Attributes="a=1")
    assert answer.status == 200
    body = answer.json()
    headers = body["properties"]
    assert headers["Content-Type"] == "application/json" and headers["X-Custom"] == "Value, with comma"
    assert headers["X-Amzn-Sagemaker-Custom-Attributes"] == "a=1" and headers["Content-Length"] == "3"
    assert body["all"] == headers
    assert (body["one"], body["none"], body["same"]) == ("Value, with comma", None, True)
    model_dir = str(probe.model_dir.resolve())
    assert body["system_properties"] == {"model_dir": model_dir, "gpu_id": None, "batch_size": 1}
    assert body["model_name"] == "model"


def test_set_response_status_and_content_type_override_the_return_value(probe):
    answer = run(probe, "status")
    assert (answer.status, answer.content_type, answer.text) == (202, "text/plain", "queued")


@pytest.mark.parametrize(
    "body, content_type, accept, expected",
    [
        (
            "[1]",
            None,
            None,
            {"type": "str", "input_data": "[1]", "content_type": "application/json", "accept": "application/json"},
        ),
        (
            "1,2",
            "text/csv",
            "*/*",
            {"type": "str", "input_data": "1,2", "content_type": "text/csv", "accept": "application/json"},
        ),
        (
            "Ã©".encode("latin-1"),
            "text/csv; charset=latin-1",
            "text/csv, application/json",
            {
                "type": "str",
                "input_data": "Ã©",
                "content_type": "text/csv; charset=latin-1",
                "accept": "text/csv, application/json",
            },
        ),
        (
            b"\x00\xff",
            "application/octet-stream",
            "image/png",
            {
                "type": "bytearray",
                "input_data": [0, 255],
                "content_type": "application/octet-stream",
                "accept": "image/png",
            },
        ),
        (
            b"1\n",
            "application/jsonlines",
            None,
            {
                "type": "bytearray",
                "input_data": [49, 10],
                "content_type": "application/jsonlines",
                "accept": "application/json",
            },
        ),
    ],
)
def test_what_the_functions_receive(probe, body, content_type, accept, expected):
    answer = run(probe, "received", body, content_type, **({"Accept": accept} if accept else {}))
    assert answer.status == 200
    assert answer.json() == expected


def test_an_undecodable_text_body_is_400(probe):
    answer = run(probe, "received", b"\xff\xfe", "application/json")
    assert (answer.status, answer.json()) == (
        400,
        {"error": "the request body is not utf-8 text: invalid byte at position 0"},
    )


@pytest.mark.parametrize(
    "kind, status, content_type, body",
    [
        ("pair", 200, "text/plain", b"body"),
        ("triple", 201, "text/plain", b"made"),
        ("str", 200, "text/csv", b"bare"),  # the first concrete type of Accept
        ("bytes", 200, "text/csv", b"bare"),
        ("bytearray", 200, "text/csv", b"bare"),
        ("dict", 200, "application/json", b'{"a": 1}'),
        ("list", 200, "application/json", b'[1, "x"]'),
    ],
)
def test_return_values(probe, kind, status, content_type, body):
    answer = run(probe, "return", X_Return=kind, Accept="text/*, text/csv, application/json")
    assert (answer.status, answer.content_type, answer.body) == (status, content_type, body)


@pytest.mark.parametrize("kind, shown", [("array", "array([0, 1, 2])"), ("none", "None")])
def test_a_body_of_another_type_is_500_naming_it(probe, kind, shown):
    answer = run(probe, "return", X_Return=kind)
    assert (answer.status, answer.json()) == (
        500,
        {
            "error": (
                f"output_fn returned {shown}, which cannot be sent: return (body, content_type), (body, content_type, "
                "status) or a body (str, bytes, dict or list)"
            )
        },
    )


@pytest.mark.parametrize(
    "probe_name, status, error",
    [
        ("generic", 409, "conflicting record"),
        ("base", 429, "slow down"),
        ("handler", 422, "field x is missing"),
        ("unsupported", 415, f"Content type application/x-foo {NO_SUPPORT}"),
        ("value", 500, "boom"),
    ],
)
def test_errors_choose_the_status_with_a_json_body(probe, probe_name, status, error):
    answer = run(probe, probe_name, X_Amzn_RequestId=f"req-{probe_name}")
    assert (answer.status, answer.json()) == (status, {"error": error})
    assert answer.headers["x-amzn-requestid"] == f"req-{probe_name}"


def test_a_falcon_http_error_keeps_its_status_and_headers(probe):
    answer = run(probe, "falcon")
    assert (answer.status, answer.headers["retry-after"]) == (503, "3")
    assert answer.json() == {"error": "busy", "title": "503 Service Unavailable", "description": "busy"}


def test_an_unexpected_error_logs_its_traceback_with_the_request_id(probe):
    run(probe, "value", X_Amzn_RequestId="req-traceback")
    line = "request req-traceback: 500 ValueError: boom (POST /invocations)"
    log = processes.wait_for_log(probe, line)
    processes.wait_for_log(probe, "Traceback (most recent call last)", since=log.index(line) + len(line))


def test_the_compatibility_imports_decode_and_encode(probe):
    answer = run(probe, "compat", "1,2\n3,4", "text/csv")
    assert (answer.status, answer.content_type, answer.text) == (200, "text/csv", "2,4\n6,8\n")
    pickled = npy_body(np.array([{"x": 1}], dtype=object), allow_pickle=True)
    answer = run(probe, "compat", pickled, "application/x-npy")
    assert answer.status == 400 and "refused (allow_pickle=False)" in answer.json()["error"]


def test_threads_each_get_their_own_context(probe):
    answers = {}

    def send(i: int) -> None:
        answers[i] = run(probe, "echo", f"request {i}", "text/plain")

    threads = [threading.Thread(target=send, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert {i: (a.status, a.text) for i, a in answers.items()} == {i: (200, f"request {i}") for i in range(16)}


# ---- the served model: a SavedModel without model_fn ----

SERVED = """
    import json

    import numpy as np

    MODEL = []


    def model_warmup_fn(model_dir, model):
        MODEL.append(model)


    def input_fn(input_data, content_type):
        return json.loads(input_data)


    def output_fn(prediction, accept, context):
        if context.get_request_header(0, "X-Probe") != "members":
            return json.dumps(prediction), "application/json"
        model = MODEL[0]
        return {
            "type": type(model).__name__, "name": model.name, "prediction": prediction,
            "version": model.predict([1.0], version=123),
            "signature": model.predict({"instances": [1.0]}, signature_name="serving_default"),
            "columnar": model.predict({"inputs": [1.0, 2.0]}),
            "numpy": model.predict(np.array([[1.0], [2.0]], dtype=np.float32)),
            "regress": model.request({"signature_name": "tensorflow/serving/regress", "examples": [{"x": 1.0}]},
                                     method="regress"),
        }
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = tmp_path_factory.mktemp("served") / "model"
    model_dirs.copy_model(paths.HALF_PLUS_THREE, folder, "half_plus_three")
    model_dirs.write_code(folder, SERVED)
    with serve_stack.Stack(folder, env={"SAGEMAKER_GUNICORN_WORKERS": "1"}) as stack:
        yield stack


def test_without_model_fn_and_predict_fn_the_served_model_predicts(served):
    answer = invoke(served, "[1.0, 2.0, 5.0]")
    assert (answer.status, answer.json()) == (200, [3.5, 4.0, 5.5])


def test_the_served_model_s_members(served):
    answer = invoke(served, "[1.0]", X_Probe="members")
    assert answer.status == 200
    assert answer.json() == {
        "type": "ServedModel",
        "name": "half_plus_three",
        "prediction": [3.5],
        "version": [3.5],
        "signature": [3.5],
        "columnar": [3.5, 4.0],
        "numpy": [[3.5], [4.0]],
        "regress": {"results": [3.5]},
    }


def test_a_model_server_error_reaches_the_client_with_its_status_and_message(served):
    answer = invoke(served, '["a"]')
    assert (answer.status, answer.json()) == (
        400,
        {
            "error": "Failed to process element: 0 of 'instances' list. "
            'Error: INVALID_ARGUMENT: JSON Value: "a" Type: String '
            "is not of expected type: float"
        },
    )
