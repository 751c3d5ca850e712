"""SAGEMAKER_METRICS on a multi-model endpoint: the app's requests are counted as on a single-model one, by route
(the route's template, so one label for every model) and status, with their stages."""

from __future__ import annotations

import metrics_pages
import ports
from mme_support import MultiModelStack, model


def test_invocations_of_every_model_are_counted_under_one_route(tmp_path):
    root = tmp_path / "models"
    root.mkdir()
    port = ports.free_port()
    env = {"SAGEMAKER_METRICS": "true", "SAGEMAKER_METRICS_PORT": str(port)}
    with MultiModelStack(root, env) as stack:
        for name in ("a", "b"):
            assert stack.load(name, str(model(root, name))).status == 200
        assert [stack.invoke(name).status for name in ("a", "a", "b")] == [200, 200, 200]
        assert stack.invoke("b", {"instances": ["x"]}).status == 400  # the model server's error, passed on
        assert stack.call("POST", "/invocations", "{}").status == 400  # no model named

        # each worker writes its totals twice a second: the page once it has every count
        requests = "sagemaker_tfs_request_duration_seconds_count"
        page = metrics_pages.counted_page(
            port,
            {
                metrics_pages.metric(requests, route="/models/{name}/invoke", status="200"): 3,
                metrics_pages.metric(requests, route="/models/{name}/invoke", status="400"): 1,
                metrics_pages.metric(requests, route="/invocations", status="400"): 1,
                metrics_pages.metric(
                    "sagemaker_tfs_stage_duration_seconds_count", route="/models/{name}/invoke", stage="model_server"
                ): 4,
            },
        )
    assert (
        sum(
            v for (name, labels), v in page.items() if name == requests and ("route", "/models/{name}/invoke") in labels
        )
        == 4
    )
    assert metrics_pages.sample(page, "sagemaker_tfs_requests_in_flight") == 0
