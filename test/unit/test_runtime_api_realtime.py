"""runtime_api/realtime.py alone, with a fake container: what only a container other than ours can answer (the whole
stack, through boto3, is test/stack/test_stack_runtime_api.py)."""

from __future__ import annotations

import falcon.testing
from sagemaker_tfs.config import Settings
from sagemaker_tfs.runtime_api.container import Answer
from sagemaker_tfs.runtime_api.realtime import InvokeEndpoint
from sagemaker_tfs.web.app import WebApp


class FakeContainer:
    def __init__(self, answer: Answer):
        self.answer = answer
        self.calls: list[tuple[str, dict[str, str]]] = []

    def call(self, method, path, body, headers, timeout) -> Answer:
        self.calls.append((path, headers))
        return self.answer

    def ready(self) -> bool:
        return True


def client(container: FakeContainer) -> falcon.testing.TestClient:
    app = WebApp()
    app.add_route(
        "/endpoints/{endpoint}/invocations", POST=InvokeEndpoint(Settings.from_env({}), container, None).answer
    )
    return falcon.testing.TestClient(app)


def test_custom_attributes_the_container_answers_are_passed_back():
    container = FakeContainer(Answer(200, "text/csv", "trace=abc,model=x", b"1,2"))
    result = client(container).simulate_post(
        "/endpoints/e/invocations",
        body=b"1,2",
        headers={
            "Content-Type": "text/csv",
            "X-Amzn-RequestId": "rid-1",
            "X-Amzn-SageMaker-Custom-Attributes": "tfs-method=predict",
        },
    )
    assert (result.status_code, result.content, result.headers["content-type"]) == (200, b"1,2", "text/csv")
    assert result.headers["x-amzn-sagemaker-custom-attributes"] == "trace=abc,model=x"
    assert result.headers["x-amzn-invoked-production-variant"] == "AllTraffic"
    assert container.calls == [
        (
            "/invocations",
            {
                "Content-Type": "text/csv",
                "X-Amzn-RequestId": "rid-1",
                "X-Amzn-SageMaker-Custom-Attributes": "tfs-method=predict",
            },
        )
    ]


def test_any_2xx_of_the_container_is_a_success_and_headers_sagemaker_strips_are_not_passed_on():
    container = FakeContainer(Answer(201, None, None, b"created"))
    result = client(container).simulate_post(
        "/endpoints/e/invocations", body=b"x", headers={"X-Other": "y", "Content-Type": "application/octet-stream"}
    )
    assert (result.status_code, result.content) == (200, b"created")
    assert "x-amzn-sagemaker-custom-attributes" not in result.headers
    assert [sorted(headers) for _, headers in container.calls] == [["Content-Type", "X-Amzn-RequestId"]]
