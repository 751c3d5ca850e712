"""Per-model code: `<url>/code/inference.py` (either contract) else the default handler, modules private to each
model, code imported by every worker at load and forgotten by every worker at unload, script errors as 500s
that leave nothing behind."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import model_dirs
import processes
import pytest
from mme_support import error, model

REPORTER = """
    import json
    import os
    import helpers

    def handler(data, context):
        return json.dumps({"pid": os.getpid(), "value": helpers.VALUE, "model": context.model_name,
                           "rest_uri": context.rest_uri, "grpc_port": context.grpc_port,
                           "channel": context.channel is not None})
"""


def answers_of_every_worker(stack, name: str, workers: int = 2, **headers: str) -> dict[int, dict]:
    """Invoke until each gunicorn worker answered (a guard, not a timing check). nginx keeps its connections to
    gunicorn and reuses them, so requests go out 8 at a time: nginx then opens more connections, which the kernel
    spreads over the workers."""
    seen: dict[int, dict] = {}

    def every_worker_answered() -> bool:
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda _: stack.invoke(name, **headers), range(8)))
        for answer in answers:
            assert answer.status == 200, answer.text
            body = json.loads(answer.body)
            seen[body["pid"]] = body
        return len(seen) == workers

    processes.wait_for(every_worker_answered, timeout=60, what="an answer from every worker")
    return seen


def test_each_model_has_its_own_script_and_private_modules(stack, root):
    first = model(root, "private-a", script=REPORTER, files={"lib/helpers.py": "VALUE = 'a'\n"})
    second = model(root, "private-b", script=REPORTER, files={"helpers.py": "VALUE = 'b'\n"})
    plain = model(root, "private-none")
    try:
        for name, url in (("a", first), ("b", second), ("none", plain)):
            assert stack.load(name, str(url)).status == 200
        port = str(stack.model_server_ports[0])
        for name, value in (("a", "a"), ("b", "b")):
            for body in answers_of_every_worker(stack, name).values():
                assert {k: v for k, v in body.items() if k != "pid"} == {
                    "value": value,
                    "model": name,
                    "grpc_port": port,
                    "channel": True,
                    "rest_uri": f"http://127.0.0.1:{int(port) + 1}/v1/models/{name}:predict",
                }
        versioned = stack.invoke("a", X_Amzn_SageMaker_Custom_Attributes="tfs-model-version=123,tfs-method=regress")
        assert json.loads(versioned.body)["rest_uri"].endswith("/v1/models/a/versions/123:regress")
        assert stack.invoke("none").json() == {"predictions": [2.5, 3.0]}  # no script: the default handler
    finally:
        for name in ("a", "b", "none"):
            stack.unload(name)


def test_an_unload_forgets_the_code_in_every_worker_and_a_reload_imports_it_again(stack, root):
    url = model(root, "changing", script=REPORTER, files={"helpers.py": "VALUE = 'old'\n"})
    assert stack.load("changing", str(url)).status == 200
    assert {body["value"] for body in answers_of_every_worker(stack, "changing").values()} == {"old"}
    assert stack.unload("changing").status == 200
    (url / "code" / "helpers.py").write_text("VALUE = 'new'\n")
    assert stack.load("changing", str(url)).status == 200
    try:
        assert {body["value"] for body in answers_of_every_worker(stack, "changing").values()} == {"new"}
    finally:
        stack.unload("changing")


def test_the_pair_contract_per_model(stack, root):
    url = model(
        root,
        "pair",
        script="""
        import json

        def input_handler(data, context):
            return json.dumps({"instances": [float(v) for v in data.read().decode().split()]})

        def output_handler(response, context):
            return f"{context.model_name}: {response.json()['predictions']}", "text/plain"
    """,
    )
    try:
        assert stack.load("pair", str(url)).status == 200
        answer = stack.invoke("pair", "1 2", content_type="text/plain")
        assert (answer.status, answer.text, answer.content_type) == (200, "pair: [2.5, 3.0]", "text/plain")
    finally:
        stack.unload("pair")


@pytest.mark.parametrize(
    "script, message",
    [
        ("import json\nVALUE = 1 / 0\n", "{script} failed to import: ZeroDivisionError: division by zero"),
        (
            "def input_handler(data, context):\n    return data\n",
            "Handlers are not implemented correctly in user script. {script} defines only input_handler: define "
            "handler(data, context), or both input_handler(data, context) and output_handler(response, context)",
        ),
    ],
)
def test_a_script_that_cannot_be_used_is_500_and_leaves_nothing_behind(stack, root, script, message):
    url = model(root, f"bad-script-{len(script)}", script=script)
    answer = stack.load("scripted", str(url))
    assert (answer.status, answer.json()) == (
        500,
        error("Failed to load model scripted: " + message.format(script=url / "code" / "inference.py")),
    )
    assert stack.invoke("scripted").json() == error("Model scripted is not loaded yet.")
    assert stack.listed().json() == {"models": []}
    model_dirs.write_code(url, REPORTER, {"helpers.py": "VALUE = 'fixed'\n"})
    try:
        assert stack.load("scripted", str(url)).status == 200
        assert {b["value"] for b in answers_of_every_worker(stack, "scripted").values()} == {"fixed"}
    finally:
        stack.unload("scripted")


def test_a_models_requirements_are_not_installed(stack, root):
    url = model(root, "with-requirements", files={"requirements.txt": "no-such-package==1.0\n"})
    try:
        assert stack.load("reqs", str(url)).status == 200
        processes.wait_for_log(
            stack, f"{url}/code/requirements.txt of model reqs is not installed: a load does not run pip"
        )
    finally:
        stack.unload("reqs")


TOOLKIT = """
    import json
    import os

    def model_fn(model_dir, context):  # no SavedModel client wanted: the model is this dict
        return {"dir": model_dir, "name": context.model_name, "pid": os.getpid()}

    def input_fn(body, content_type):
        return [float(v) for v in body.decode().split()]

    def predict_fn(data, model):
        return {"sum": sum(data), **model}

    def output_fn(prediction, accept):
        return json.dumps(prediction), "application/json"
"""


def test_the_inference_toolkit_contract_per_model(stack, root):
    url = model(root, "toolkit", script=TOOLKIT)
    served = model(
        root,
        "toolkit-served",
        script="""
        def output_fn(prediction, accept):  # the default model_fn: the model server's model, by the model's name
            return str(prediction), "text/plain"  # ServedModel.predict gives the predictions
    """,
    )
    try:
        assert stack.load("tk", str(url)).status == 200
        bodies = answers_of_every_worker(stack, "tk", content_type="text/plain", body="1 2")
        assert {json.dumps({k: v for k, v in b.items() if k != "pid"}) for b in bodies.values()} == {
            json.dumps({"sum": 3.0, "dir": str(url.resolve()), "name": "tk"})
        }  # model_fn ran in every worker
        assert stack.load("tk-served", str(served)).status == 200
        answer = stack.invoke("tk-served", '{"instances": [1.0, 2.0]}')
        assert (answer.status, answer.text) == (200, "[2.5, 3.0]")
    finally:
        stack.unload("tk")
        stack.unload("tk-served")


def test_a_failing_model_fn_is_the_loads_500(stack, root):
    url = model(
        root,
        "toolkit-broken",
        script="""
        def model_fn(model_dir):
            raise RuntimeError("no weights in " + model_dir)

        def predict_fn(data, model):
            return data
    """,
    )
    answer = stack.load("broken-tk", str(url))
    assert answer.status == 500
    assert answer.json()["error"].startswith("Failed to load model broken-tk: ")
    assert f"model_fn raised RuntimeError: no weights in {url.resolve()}" in answer.json()["error"]
    assert stack.listed().json() == {"models": []}
