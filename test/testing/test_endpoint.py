"""sagemaker_tfs.testing as a user's tests use it: Endpoint in-process (the app in this process, the model servers
shared), the same answers as the whole stack, and the pytest plugin's fixture."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import processes
import pytest
from model_dirs import copy_model, write_code
from paths import HALF_PLUS_THREE, HALF_PLUS_TWO
from sagemaker_tfs.errors import StartupError
from sagemaker_tfs.shared.model_tree import ModelTreeError
from sagemaker_tfs.testing import Endpoint, model_servers

PAIR = """
    import json

    def input_handler(data, context):
        values = json.loads(data.read().decode())
        if not isinstance(values, list):
            raise ValueError("send a JSON list")
        print("pair got", len(values), "values")
        return json.dumps({"instances": values})

    def output_handler(response, context):
        if response.status_code != 200:
            raise ValueError(response.content.decode())
        doubled = [2 * y for y in response.json()["predictions"]]
        return json.dumps({"doubled": doubled, "attributes": context.custom_attributes}), "application/json"
"""

HANDLER = """
    import json

    def handler(data, context):
        instances = json.loads(data.read().decode())
        answer = context.session.post(context.rest_uri, data=json.dumps({"instances": instances}))
        return json.dumps({"y": answer.json()["predictions"], "accept": context.accept_header}), "application/json"
"""

TOOLKIT = """
    import json

    def model_fn(model_dir):
        return lambda values: [v * 10 for v in values]

    def input_fn(body, content_type):
        return json.loads(body)

    def predict_fn(data, model):
        return model(data)

    def output_fn(prediction, accept):
        return json.dumps({"tenfold": prediction})
"""


@pytest.fixture(scope="module")
def pair_model(tmp_path_factory) -> Path:
    return write_code(copy_model(HALF_PLUS_TWO, tmp_path_factory.mktemp("pair"), "model"), PAIR)


def test_a_pair_script_answers_in_process(pair_model):
    with Endpoint(pair_model) as endpoint:
        result = endpoint.invoke("[1.0, 2.0, 5.0]", custom_attributes="tag=a")
        assert (result.status, result.headers["content-type"]) == (200, "application/json")
        assert result.json() == {"doubled": [5.0, 6.0, 9.0], "attributes": "tag=a"}
        assert endpoint.ping().status == 200


def test_a_scripts_error_gets_the_stacks_error_and_its_log_lines(pair_model):
    with Endpoint(pair_model) as endpoint:
        result = endpoint.invoke('{"not": "a list"}', request_id="rid-1")
    assert result.status == 500  # a script's exception, as in the stack
    assert result.headers["x-amzn-requestid"] == "rid-1"
    assert "send a JSON list" in result.json()["error"]
    assert any("rid-1" in line and "send a JSON list" in line for line in result.log_lines), result.log_lines


def test_endpoints_of_one_folder_share_their_model_server(pair_model):
    with Endpoint(pair_model) as first:
        first.invoke("[1.0]")
    shared_before = dict(model_servers._shared)
    with Endpoint(pair_model) as second:
        assert second.invoke("[3.0]").json()["doubled"] == [7.0]
    assert model_servers._shared == shared_before  # no new model server was started


def test_a_handler_script_with_its_session(tmp_path):
    model = write_code(copy_model(HALF_PLUS_THREE, tmp_path, "model"), HANDLER)
    with Endpoint(model) as endpoint:
        result = endpoint.invoke("[1.0, 3.0]", accept="application/json")
    assert result.status == 200
    assert result.json() == {"y": [3.5, 4.5], "accept": "application/json"}


STREAMING = """
    def handler(data, context):
        words = data.read().decode().split()
        return (word + "\\n" for word in words), "text/plain"
"""


def test_a_streamed_answer_is_read_whole_in_process_and_through_the_stack(tmp_path):
    model = write_code(copy_model(HALF_PLUS_THREE, tmp_path, "model"), STREAMING)
    with Endpoint(model) as in_process, Endpoint(model, stack=True) as stack:
        answers = [endpoint.invoke("a b c", content_type="text/plain") for endpoint in (in_process, stack)]
    assert [(answer.status, answer.body, answer.headers["content-type"]) for answer in answers] == [
        (200, b"a\nb\nc\n", "text/plain")
    ] * 2


ENDLESS = """
    import json
    import os
    import time

    def handler(data, context):
        request = json.loads(data.read())

        def parts():
            try:
                yield f"session {context.session_id}\\n"
                deadline = time.monotonic() + 10
                while not os.path.exists(request["flag"]) and time.monotonic() < deadline:
                    time.sleep(0.01)
                yield "flagged\\n" if os.path.exists(request["flag"]) else "never flagged\\n"
                while True:
                    time.sleep(0.05)
                    yield "more\\n"
            finally:
                open(request["closed"], "w").close()

        return parts(), "text/plain"
"""


def test_invoke_stream_gives_the_parts_as_they_come_and_leaving_it_closes_the_script_s_generator(tmp_path):
    model = write_code(copy_model(HALF_PLUS_THREE, tmp_path, "model"), ENDLESS)
    with Endpoint(model) as in_process, Endpoint(model, stack=True) as stack:
        for name, endpoint in (("in-process", in_process), ("stack", stack)):
            flag, closed = tmp_path / f"{name}-flag", tmp_path / f"{name}-closed"
            request = json.dumps({"flag": str(flag), "closed": str(closed)})
            with endpoint.invoke_stream(request, session_id="s-1") as stream:
                assert (stream.status, stream.headers["content-type"]) == (200, "text/plain")
                parts = iter(stream)
                assert next(parts) == b"session s-1\n"  # the script waits for the flag: this part came without it
                flag.touch()
                assert next(parts) == b"flagged\n"
            processes.wait_for(closed.exists, what=f"the generator closed ({name})")


def test_a_toolkit_script_without_a_savedmodel(tmp_path):
    model = write_code(tmp_path / "model", TOOLKIT)
    with Endpoint(model) as endpoint:
        result = endpoint.invoke("[1, 2]")
        assert (result.status, result.json()) == (200, {"tenfold": [10, 20]})
        assert endpoint.ping().status == 200


def test_startup_problems_are_serves_messages(tmp_path):
    with pytest.raises(ModelTreeError, match="no SavedModel"):
        Endpoint(tmp_path)
    broken = write_code(copy_model(HALF_PLUS_TWO, tmp_path, "broken"), "def input_handler(data, context:\n")
    with pytest.raises(Exception, match=r"inference\.py.*line 1"):
        Endpoint(broken)


def test_a_model_that_does_not_load_fails_with_the_model_servers_reason(tmp_path):
    model = copy_model(HALF_PLUS_TWO, tmp_path, "model")
    (model / "00000123" / "saved_model.pb").write_bytes(b"not a SavedModel")
    with pytest.raises(StartupError, match="could not load model"):
        Endpoint(model)


def test_the_plugins_fixture(sagemaker_endpoint, pair_model):
    endpoint = sagemaker_endpoint(pair_model)
    assert endpoint.invoke("[0.0]").json()["doubled"] == [4.0]


REQUESTS = [
    ("[1.0, 2.0]", "application/json", None, None),
    ("[1.0, 2.0]", "application/json", "application/json", "a=1"),
    ('{"x": 1}', "application/json", None, None),  # the script's exception
    ("not json", "application/json", None, None),  # json's error in the script
    ("[1.0]", "text/csv", None, None),
    ("", "application/json", None, None),
]


def test_in_process_answers_are_the_stacks(pair_model):
    """Every request gets the same status, body and app headers in-process as through nginx and gunicorn."""
    shared = ("content-type", "x-amzn-requestid")
    with Endpoint(pair_model) as in_process, Endpoint(pair_model, stack=True) as stack:
        assert stack.url is not None
        for i, (body, content_type, accept, attributes) in enumerate(REQUESTS):
            answers = [
                endpoint.invoke(body, content_type, accept, attributes, request_id=f"same-{i}")
                for endpoint in (in_process, stack)
            ]
            ours, theirs = answers
            assert (ours.status, ours.body) == (theirs.status, theirs.body), (body, ours, theirs)
            assert {k: ours.headers.get(k) for k in shared} == {k: theirs.headers.get(k) for k in shared}
        assert in_process.ping().status == stack.ping().status == 200


def test_a_multi_model_endpoint_with_target_model(tmp_path):
    root = tmp_path / "models"
    copy_model(HALF_PLUS_TWO, root, "two")
    copy_model(HALF_PLUS_THREE, root, "three")
    with Endpoint(root, {"SAGEMAKER_MULTI_MODEL": "true"}) as endpoint:
        assert endpoint.stack  # a multi-model endpoint's models load through serve's registry
        two = endpoint.invoke('{"instances": [1.0]}', target_model="two")
        three = endpoint.invoke('{"instances": [1.0]}', target_model="three")
    assert (two.status, two.json()) == (200, {"predictions": [2.5]})
    assert (three.status, three.json()) == (200, {"predictions": [3.5]})


def test_no_model_servers_are_left_after_stop_all(pair_model):
    with Endpoint(pair_model) as endpoint:
        endpoint.invoke("[1.0]")
    processes = [p for servers in model_servers._shared.values() for p in servers.processes]
    model_servers.stop_all()
    assert processes and all(p.poll() is not None for p in processes)
    assert shutil.which("true")  # (the next test starts them again on first use)
