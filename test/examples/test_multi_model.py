"""multi_model: the example's walk-through through the whole stack (two gunicorn workers): three models loaded,
invoked (own script, universal script, versions), listed, described, unloaded and reloaded with new code."""

from __future__ import annotations

import json
import shutil
import sys

import pytest
from clients import http_call
from examples_support import EXAMPLES, run
from serve_stack import Stack

EXAMPLE = EXAMPLES / "multi_model"


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("multi_model") / "models"
    run(sys.executable, EXAMPLE / "build.py", root)
    return root


@pytest.fixture(scope="module")
def stack(root):
    env = {
        "SAGEMAKER_MULTI_MODEL": "true",
        "SAGEMAKER_GUNICORN_WORKERS": "2",
        "SAGEMAKER_MULTI_MODEL_CODE_DIR": str(EXAMPLE / "universal"),
    }
    with Stack(root, env) as running:
        yield running


def call(stack, method, path, body=None, **headers):
    return http_call(stack.port, method, path, body, {k.replace("_", "-"): v for k, v in headers.items()})


def load(stack, name, url):
    return call(stack, "POST", "/models", json.dumps({"model_name": name, "url": str(url)}))


def test_the_walk_through(stack, root):
    assert call(stack, "GET", "/models").json() == {"models": []}
    for name, folder in (("hp2", "half_plus_two"), ("hp10", "half_plus_ten"), ("x2", "times_two")):
        answer = load(stack, name, root / folder)
        assert (answer.status, answer.json()["success"].split(",")[0]) == (200, f"Successfully loaded model {name}")

    instances = (EXAMPLE / "samples" / "instances.json").read_bytes()
    answer = call(stack, "POST", "/models/hp2/invoke", instances, Content_Type="application/json")
    assert answer.json() == {"model": "hp2", "version": "latest", "predictions": [3.0, 3.5, 5.0]}
    answer = call(
        stack,
        "POST",
        "/models/hp2/invoke",
        "1.0",
        Content_Type="application/json",
        X_Amzn_SageMaker_Custom_Attributes="tfs-model-version=1",
    )
    assert answer.json() == {"model": "hp2", "version": "1", "predictions": [2.5]}
    answer = call(stack, "POST", "/models/x2/invoke", "1.5\n4", Content_Type="text/csv")
    assert answer.json() == {"model": "x2", "version": "latest", "predictions": [3.0, 8.0]}
    numbers = (EXAMPLE / "samples" / "numbers.txt").read_bytes()
    answer = call(stack, "POST", "/models/hp10/invoke", numbers, Content_Type="text/plain")
    assert (answer.status, answer.text) == (200, "half plus ten: 10.5\nhalf plus ten: 11.0\nhalf plus ten: 12.5")

    assert call(stack, "GET", "/models").json() == {
        "models": [
            {"modelName": "hp10", "modelUrl": str(root / "half_plus_ten")},
            {"modelName": "hp2", "modelUrl": str(root / "half_plus_two")},
            {"modelName": "x2", "modelUrl": str(root / "times_two")},
        ]
    }
    described = call(stack, "GET", "/models/x2").json()
    assert (described["modelUrl"], [v["state"] for v in described["model_version_status"]]) == (
        str(root / "times_two"),
        ["AVAILABLE"],
    )

    assert call(stack, "DELETE", "/models/hp10").json() == {"success": "Successfully unloaded model hp10."}
    script = root / "half_plus_ten" / "code" / "inference.py"
    script.write_text(script.read_text().replace("half plus ten", "0.5 x + 10"))
    assert load(stack, "hp10", root / "half_plus_ten").status == 200
    for _ in range(6):  # both workers answer with the new code
        answer = call(stack, "POST", "/models/hp10/invoke", "1", Content_Type="text/plain")
        assert answer.text == "0.5 x + 10: 10.5"
    for name in ("hp2", "hp10", "x2"):
        assert call(stack, "DELETE", f"/models/{name}").status == 200
    assert call(stack, "GET", "/models").json() == {"models": []}
    assert shutil.which("nginx")
