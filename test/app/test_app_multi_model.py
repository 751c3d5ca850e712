"""The app of a multi-model endpoint built in-process (the same create_app as a single-model endpoint's), following
a registry publisher run by the test, against the real model server: the routes follow the published snapshots."""

from __future__ import annotations

import io
import time

import falcon.testing
import numpy as np
from app_harness import multi_model_app
from app_support import OTHER_MODEL, ModelServer
from sagemaker_tfs.shared import npy


def snapshot(*names: str, state: str = "ready") -> list[dict]:
    return [{"name": name, "load_id": 1, "state": state, "url": "/nowhere", "script": None} for name in names]


def test_the_routes_follow_the_registry(model_server: ModelServer, tmp_path):
    with multi_model_app(model_server, tmp_path) as (app, publisher):
        client = falcon.testing.TestClient(app)
        body = '{"instances": [1.0, 2.0]}'

        def invoke(name: str) -> falcon.testing.Result:
            return client.simulate_post(
                f"/models/{name}/invoke", body=body, headers={"Content-Type": "application/json"}
            )

        assert invoke(OTHER_MODEL).json == {"error": f"Model {OTHER_MODEL} is not loaded yet."}
        publisher.publish(snapshot(OTHER_MODEL), time.monotonic() + 10)
        answer = invoke(OTHER_MODEL)
        assert (answer.status_code, answer.json) == (200, {"predictions": [2.5, 3.0]})
        arrays = client.simulate_post(
            f"/models/{OTHER_MODEL}/invoke",
            body=npy.dump(np.array([1.0, 2.0])),
            headers={"Content-Type": npy.NPY, "Accept": npy.NPY},
        )
        answered = np.load(io.BytesIO(arrays.content))  # float32: the binary way, as single-model endpoints
        assert (arrays.status_code, answered.dtype, answered.tolist()) == (200, np.float32, [2.5, 3.0])
        publisher.publish(snapshot(OTHER_MODEL, state="loading"), time.monotonic() + 10)
        assert invoke(OTHER_MODEL).status_code == 404  # its code is imported, it is not routed yet
        publisher.publish([], time.monotonic() + 10)
        assert invoke(OTHER_MODEL).status_code == 404
        answer = client.simulate_post("/invocations", body=body, headers={"Content-Type": "application/json"})
        assert (answer.status_code, answer.json) == (400, {"error": "Invocation request does not contain model name."})
        assert (client.simulate_get("/ping").status_code, client.simulate_get("/ping").text) == (200, "")
