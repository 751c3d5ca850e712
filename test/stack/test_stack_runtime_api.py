"""SageMaker Runtime's InvokeEndpoint and InvokeEndpointWithResponseStream on a local container
(SAGEMAKER_LOCAL_RUNTIME_API=true), called with boto3's own `sagemaker-runtime` client: the same answers as
`/invocations`, SageMaker's errors as botocore raises them."""

from __future__ import annotations

import os
import shutil
import signal

import clients
import falcon.testing
import processes
import pytest
import serve_stack
from sagemaker_tfs.config import Settings
from sagemaker_tfs.runtime_api import members, realtime
from sagemaker_tfs.runtime_api.container import Answer
from sagemaker_tfs.web.app import WebApp
from stack_support import invoke, model_dir

ON = {"SAGEMAKER_LOCAL_RUNTIME_API": "true"}
BODY = b'{"instances": [1.0, 2.0, 5.0]}'
SLOW_SCRIPT = """
    import time

    def handler(data, context):
        body = data.read()
        if context.custom_attributes == "sleep":
            time.sleep(20)
        if context.custom_attributes == "fail":
            raise RuntimeError("the handler failed")
        return body, context.accept_header
"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    env = {**ON, "SAGEMAKER_LOCAL_RUNTIME_MAX_PAYLOAD_MB": "1"}
    with serve_stack.Stack(model_dir(tmp_path_factory.mktemp("plain")), env=env) as running:
        yield running


@pytest.fixture(scope="module")
def scripted(tmp_path_factory):
    env = {
        **ON,
        "SAGEMAKER_LOCAL_RUNTIME_TIMEOUT_SECONDS": "1",
        "SAGEMAKER_LOCAL_RUNTIME_VARIANT": "Blue",
        "SAGEMAKER_GUNICORN_WORKERS": "1",
    }  # one worker: a call that times out must not hold up the others
    with serve_stack.Stack(model_dir(tmp_path_factory.mktemp("scripted"), SLOW_SCRIPT), env=env) as running:
        yield running


@pytest.mark.parametrize(
    "body, content_type, accept, attributes",
    [
        (BODY, "application/json", None, None),  # the direct route
        (BODY, "application/json", None, "tfs-model-name=model,tfs-method=predict"),  # the direct route, named
        (b"1.0\n2.0\n", "text/csv", "text/csv", None),  # the app's codecs
        (b"[1.0, 2.0]", "application/json", "application/jsonlines", None),
    ],
)
def test_invoke_endpoint_answers_what_invocations_answers(stack, body, content_type, accept, attributes):
    headers = {"Accept": accept} if accept else {}
    expected = invoke(stack, body, content_type, attributes, **headers)
    assert expected.status == 200
    args = {"Accept": accept} if accept else {}
    if attributes:
        args["CustomAttributes"] = attributes
    answer = clients.runtime_client(stack.port).invoke_endpoint(
        EndpointName="local-endpoint", Body=body, ContentType=content_type, **args
    )
    assert answer["Body"].read() == expected.body
    assert answer["ContentType"] == expected.content_type
    assert answer["InvokedProductionVariant"] == "AllTraffic"
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert "CustomAttributes" not in answer  # the container's answer sets none


def test_a_client_error_of_the_container_is_a_model_error_with_its_status_and_body(stack):
    bad = b'{"instances": ["a"]}'
    container = invoke(stack, bad)
    assert container.status == 400
    error = clients.client_error(
        lambda: clients.runtime_client(stack.port).invoke_endpoint(
            EndpointName="local-endpoint", Body=bad, ContentType="application/json"
        )
    )
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 424
    assert error["Error"]["Code"] == "ModelError"
    assert error["OriginalStatusCode"] == 400
    assert error["OriginalMessage"] == container.text
    stream = (
        f"arn:aws:logs:local:000000000000:log-group:/aws/sagemaker/Endpoints/local-endpoint:log-stream:"
        f"AllTraffic/serve-{stack.proc.pid}"
    )
    assert error["LogStreamArn"] == stream
    assert error["Error"]["Message"] == (
        f'Received client error (400) from primary with message "{container.text}". See {stream} for more information.'
    )


@pytest.mark.parametrize(
    "which, body, content_type",
    [
        ("stack", BODY, "application/json"),  # the direct route
        ("stack", b"1.0\n2.0\n", "text/csv"),  # the app's workers
        ("scripted", b"1,2", "text/csv"),  # the app's workers, with a script
    ],
)
def test_the_request_id_endpoint_name_and_inference_id_are_logged_and_the_id_answered(
    request, which, body, content_type
):
    stack = request.getfixturevalue(which)
    answer = clients.runtime_client(stack.port).invoke_endpoint(
        EndpointName="logged-endpoint", Body=body, ContentType=content_type, InferenceId="inference-7"
    )
    rid = answer["ResponseMetadata"]["RequestId"]
    assert len(rid) == 36
    processes.wait_for_log(stack, f"request {rid}: InvokeEndpoint logged-endpoint, inference id inference-7")


def test_a_body_over_the_payload_limit_is_a_validation_error(stack):
    body = b'{"instances": [' + b"1.0, " * (1024 * 1024 // 5) + b"1.0]}"
    error = clients.client_error(
        lambda: clients.runtime_client(stack.port).invoke_endpoint(
            EndpointName="e", Body=body, ContentType="application/json"
        )
    )
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert error["Error"]["Code"] == "ValidationError"
    rid = error["ResponseMetadata"]["RequestId"]
    assert error["Error"]["Message"] == f"Request {rid} has oversize body."


def test_an_empty_body_is_a_validation_error(stack):
    error = clients.client_error(
        lambda: clients.runtime_client(stack.port).invoke_endpoint(
            EndpointName="e", Body=b"", ContentType="application/json"
        )
    )
    assert (error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]) == ("ValidationError", 400)
    assert error["Error"]["Message"] == (
        "1 validation error detected: Value at 'body' failed to satisfy constraint: Member must not be empty"
    )


def test_a_target_model_on_a_single_model_endpoint_is_a_validation_error(stack):
    error = clients.client_error(
        lambda: clients.runtime_client(stack.port).invoke_endpoint(
            EndpointName="e", Body=BODY, ContentType="application/json", TargetModel="model.tar.gz"
        )
    )
    assert (error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]) == ("ValidationError", 400)
    assert error["Error"]["Message"] == (
        "TargetModel is only valid for a multi-model endpoint: this container "
        "serves one model (SAGEMAKER_MULTI_MODEL is not true)"
    )


@pytest.mark.parametrize(
    "member, value, message",
    [
        (
            "TargetContainerHostname",
            "c1",
            "TargetContainerHostname is not supported by the local endpoint e: it serves one "
            "container, not a multi-container endpoint with direct invocation",
        ),
        (
            "EnableExplanations",
            "`true`",
            "EnableExplanations is not supported by the local endpoint e: it has no SageMaker Clarify explainer",
        ),
        (
            "InferenceComponentName",
            "ic-1",
            "InferenceComponentName is not supported by the local endpoint e: it has no inference components",
        ),
        (
            "TargetVariant",
            "Green",
            "TargetVariant 'Green' is not a production variant of endpoint e: its one variant is "
            "AllTraffic (SAGEMAKER_LOCAL_RUNTIME_VARIANT)",
        ),
    ],
)
def test_members_one_local_container_cannot_honour_are_refused(stack, member, value, message):
    error = clients.client_error(
        lambda: clients.runtime_client(stack.port).invoke_endpoint(
            EndpointName="e", Body=BODY, ContentType="application/json", **{member: value}
        )
    )
    assert (error["ResponseMetadata"]["HTTPStatusCode"], error["Error"]["Code"]) == (400, "ValidationError")
    assert error["Error"]["Message"] == message


def test_the_endpoint_s_own_variant_is_accepted(stack):
    answer = clients.runtime_client(stack.port).invoke_endpoint(
        EndpointName="e", Body=BODY, ContentType="application/json", TargetVariant="AllTraffic"
    )
    assert answer["Body"].read() == invoke(stack, BODY).body


def test_members_that_break_the_service_model_are_validation_errors_in_sagemaker_s_words(stack):
    error = clients.client_error(
        lambda: clients.runtime_client(stack.port).invoke_endpoint(
            EndpointName="my_endpoint",
            Body=BODY,
            ContentType="application/json",
            InferenceId="i" * 65,
            CustomAttributes="a" * 1025,
        )
    )
    assert (error["ResponseMetadata"]["HTTPStatusCode"], error["Error"]["Code"]) == (400, "ValidationError")
    assert error["Error"]["Message"] == (
        "3 validation errors detected: Value 'my_endpoint' at 'endpointName' failed to satisfy constraint: Member "
        "must satisfy regular expression pattern: ^[a-zA-Z0-9](-*[a-zA-Z0-9])*; Value at 'customAttributes' failed "
        "to satisfy constraint: Member must have length less than or equal to 1024; Value '" + "i" * 65 + "' at "
        "'inferenceId' failed to satisfy constraint: Member must have length less than or equal to 64"
    )


def member_cases() -> list[tuple[str, str, str]]:
    """(member, header, value) for every header member of InvokeEndpoint: values at and past its length limits, and
    values its pattern refuses (a non-ASCII byte, a tab, an underscore), generated from the service model's table
    (an empty value: as if the header were not sent, on both routes);
    sorted, so that every run (and each worker of a parallel one) lists the same cases."""
    cases = []
    for member in members.OPERATIONS["InvokeEndpoint"]:
        if member.location != "header":
            continue
        longest = member.max or 64
        for value in {"", "a", "a" * longest, "a" * (longest + 1), "a\xe9", "a\tb", "a_b", "AllTraffic"}:
            cases.append((member.name, member.location_name, value))
    return sorted(cases)


def operation_s_own_answer(header: str, value: str) -> tuple[int, bytes]:
    """The status and error body InvokeEndpoint gives for one header value, computed in this process (its checks
    run before it calls the container, which here answers 200 to anything; a 200 says they passed)."""
    app = WebApp()
    app.add_route(realtime.ROUTE, POST=realtime.InvokeEndpoint(Settings.from_env({}), Always200(), None).answer)
    result = falcon.testing.TestClient(app).simulate_post(
        "/endpoints/e/invocations", body=BODY, headers={"Content-Type": "application/json", header: value}
    )
    return result.status_code, result.content if result.status_code != 200 else b""


class Always200:
    def call(self, method, path, body, headers, timeout) -> Answer:
        return Answer(200, "application/json", None, b"{}")


@pytest.mark.parametrize("member, header, value", member_cases())
def test_nginx_vouches_for_no_request_the_operation_refuses(stack, member, header, value):
    """On a stack without a script, nginx sends InvokeEndpoint down the direct route when it can vouch for every
    member (stack/runtime_route.py): each member's values, past its limits and its pattern included, get what the
    operation itself answers."""
    status, error = operation_s_own_answer(header, value)
    headers = {"Content-Type": "application/json", header: value}
    answer = clients.http_call(stack.port, "POST", "/endpoints/e/invocations", BODY, headers)
    if status != 200:
        assert (answer.status, answer.body) == (status, error)
        return
    container = clients.http_call(stack.port, "POST", "/invocations", BODY, headers)  # what the operation passes on
    if container.status == 200:
        assert (answer.status, answer.body, answer.headers["x-amzn-invoked-production-variant"]) == (
            200,
            container.body,
            "AllTraffic",
        )
    else:
        assert (answer.status, answer.json()["OriginalStatusCode"]) == (424, container.status)


def test_a_server_error_of_a_handler_is_a_model_error(scripted):
    container = invoke(scripted, BODY, attributes="fail")
    assert container.status == 500
    error = clients.client_error(
        lambda: clients.runtime_client(scripted.port).invoke_endpoint(
            EndpointName="e", Body=BODY, ContentType="application/json", CustomAttributes="fail"
        )
    )
    assert (error["Error"]["Code"], error["OriginalStatusCode"]) == ("ModelError", 500)
    assert error["OriginalMessage"] == container.text
    assert error["Error"]["Message"].startswith('Received server error (500) from primary with message "')


def test_the_variant_setting_names_the_invoked_production_variant(scripted):
    answer = clients.runtime_client(scripted.port).invoke_endpoint(
        EndpointName="e", Body=b"1,2", ContentType="text/csv", Accept="text/csv"
    )
    assert (answer["Body"].read(), answer["ContentType"], answer["InvokedProductionVariant"]) == (
        b"1,2",
        "text/csv",
        "Blue",
    )


def test_an_answer_later_than_the_timeout_is_a_model_error_as_sagemaker_gives_it(scripted):
    error = clients.client_error(
        lambda: clients.runtime_client(scripted.port).invoke_endpoint(
            EndpointName="e", Body=BODY, ContentType="application/json", CustomAttributes="sleep"
        )
    )
    assert (error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]) == ("ModelError", 424)
    assert error["OriginalStatusCode"] == 0
    assert error["OriginalMessage"] == (
        "Your invocation timed out while waiting for a response from container "
        "primary. Review the latency metrics for each container, resolve the issue, "
        "and try again."
    )


def timed_out_then_answered(stack) -> None:
    """A call whose handler outlasts the timeout is SageMaker's ModelError; the next call is answered meanwhile."""
    client = clients.runtime_client(stack.port)
    error = clients.client_error(
        lambda: client.invoke_endpoint(
            EndpointName="e", Body=BODY, ContentType="application/json", CustomAttributes="sleep"
        )
    )
    assert (error["Error"]["Code"], error["OriginalStatusCode"]) == ("ModelError", 0)
    answer = client.invoke_endpoint(EndpointName="e", Body=b"1,2", ContentType="text/csv", Accept="text/csv")
    assert answer["Body"].read() == b"1,2"


def test_a_timed_out_call_holds_up_no_other_call_of_its_worker(scripted):
    """InvokeEndpoint runs in the app's workers, beside the call it makes to its own app (a greenlet of the loop
    worker): when that call outlasts the timeout, the client gets its ModelError and the worker (one here) goes on
    answering while the handler ends."""
    timed_out_then_answered(scripted)


def test_under_a_threaded_worker_a_timed_out_call_holds_up_no_other(tmp_path):
    """The same with gunicorn's `gthread` worker class (one thread), where the call runs in a thread of its own."""
    env = {
        **ON,
        "SAGEMAKER_LOCAL_RUNTIME_TIMEOUT_SECONDS": "1",
        "SAGEMAKER_GUNICORN_WORKERS": "1",
        "SAGEMAKER_GUNICORN_WORKER_CLASS": "gthread",
    }
    with serve_stack.Stack(model_dir(tmp_path, SLOW_SCRIPT), env=env) as stack:
        timed_out_then_answered(stack)


def test_a_container_that_is_not_ready_is_service_unavailable(tmp_path):
    folder = model_dir(tmp_path)
    with serve_stack.Stack(folder, env=ON) as stack:
        shutil.rmtree(folder / "00000123")  # the model server started again cannot load the model: /ping stays 503
        os.kill(stack.pid_of("tfs-0"), signal.SIGKILL)
        processes.wait_for(lambda: clients.http_status(stack.url + "/ping") == 503, what="/ping answering 503")
        error = clients.client_error(
            lambda: clients.runtime_client(stack.port).invoke_endpoint(
                EndpointName="down", Body=BODY, ContentType="application/json"
            )
        )
    assert (error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]) == ("ServiceUnavailable", 503)
    assert (
        error["Error"]["Message"] == "The endpoint down is not ready: its container does not answer GET /ping with 200"
    )


def test_without_the_setting_the_runtime_api_does_not_exist(tmp_path):
    with serve_stack.Stack(model_dir(tmp_path)) as stack:
        error = clients.client_error(
            lambda: clients.runtime_client(stack.port).invoke_endpoint(
                EndpointName="e", Body=BODY, ContentType="application/json"
            )
        )
        assert error["ResponseMetadata"]["HTTPStatusCode"] == 404
        answer = clients.http_call(
            stack.port, "POST", "/endpoints/e/invocations", BODY, {"Content-Type": "application/json"}
        )
        assert (answer.status, answer.json()) == (404, {"error": "Not Found"})


def test_a_burst_of_concurrent_calls_is_answered_whole(stack):
    """64 at once: more than the socket's backlog would have been at socketserver's default (5)."""
    from concurrent.futures import ThreadPoolExecutor

    client = clients.runtime_client(stack.port)
    expected = invoke(stack, BODY).body
    with ThreadPoolExecutor(64) as pool:
        bodies = list(
            pool.map(
                lambda _: client.invoke_endpoint(EndpointName="e", Body=BODY, ContentType="application/json")[
                    "Body"
                ].read(),
                range(64),
            )
        )
    assert bodies == [expected] * 64


def streamed(answer: dict) -> list[bytes]:
    """The PayloadParts of InvokeEndpointWithResponseStream's answer, read through boto3's EventStream."""
    parts = []
    for event in answer["Body"]:
        assert list(event) == ["PayloadPart"], event
        parts.append(event["PayloadPart"]["Bytes"])
    return parts


def lines_of(answer: dict) -> list[bytes]:
    """The answer's lines as AWS's LineIterator example reads them: the parts buffered, since SageMaker does not
    align them with the container's writes (nor with lines)."""
    buffer, lines = b"", []
    for part in streamed(answer):
        buffer += part
        *whole, buffer = buffer.split(b"\n")
        lines.extend(whole)
    return [*lines, buffer] if buffer else lines


@pytest.mark.parametrize(
    "body, content_type, accept",
    [
        (BODY, "application/json", None),  # the direct route
        (b"1.0\n2.0\n", "text/csv", "text/csv"),  # the app's codecs
    ],
)
def test_the_streaming_operation_answers_what_invocations_answers(stack, body, content_type, accept):
    expected = invoke(stack, body, content_type, None, **({"Accept": accept} if accept else {}))
    assert expected.status == 200
    answer = clients.runtime_client(stack.port).invoke_endpoint_with_response_stream(
        EndpointName="local-endpoint", Body=body, ContentType=content_type, **({"Accept": accept} if accept else {})
    )
    assert streamed(answer) == [expected.body]
    assert answer["ContentType"] == expected.content_type
    assert answer["InvokedProductionVariant"] == "AllTraffic"
    assert answer["ResponseMetadata"]["HTTPHeaders"]["content-type"] == "application/vnd.amazon.eventstream"
    assert "CustomAttributes" not in answer


def test_a_large_answer_comes_in_parts_that_a_line_reader_joins(stack):
    rows = b"\n".join(b"%d.0" % value for value in range(60_000))  # an answer of about 420 kB: 7 parts
    expected = invoke(stack, rows, "text/csv", None, Accept="text/csv")
    assert expected.status == 200 and len(expected.body) > 6 * 65536
    answer = clients.runtime_client(stack.port).invoke_endpoint_with_response_stream(
        EndpointName="local-endpoint", Body=rows, ContentType="text/csv", Accept="text/csv"
    )
    parts = streamed(answer)  # as the container's answer arrives: not aligned with its writes, nor with lines
    assert len(parts) > 1 and max(len(part) for part in parts) <= 65536
    assert b"".join(parts) == expected.body
    again = clients.runtime_client(stack.port).invoke_endpoint_with_response_stream(
        EndpointName="local-endpoint", Body=rows, ContentType="text/csv", Accept="text/csv"
    )
    assert lines_of(again) == expected.body.split(b"\n")


def test_the_streaming_operation_passes_its_accept_member_as_the_container_s_accept(scripted):
    answer = clients.runtime_client(scripted.port).invoke_endpoint_with_response_stream(
        EndpointName="e", Body=b"echo", ContentType="text/plain", Accept="text/x-mine"
    )
    assert (streamed(answer), answer["ContentType"], answer["InvokedProductionVariant"]) == (
        [b"echo"],
        "text/x-mine",
        "Blue",
    )


def test_the_streaming_operation_s_errors_are_sagemaker_s(stack):
    client = clients.runtime_client(stack.port)
    bad = b'{"instances": ["a"]}'
    container = invoke(stack, bad)
    error = clients.client_error(
        lambda: client.invoke_endpoint_with_response_stream(EndpointName="e", Body=bad, ContentType="application/json")
    )
    assert (error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]) == ("ModelError", 424)
    assert (error["OriginalStatusCode"], error["OriginalMessage"]) == (400, container.text)
    empty = clients.client_error(lambda: client.invoke_endpoint_with_response_stream(EndpointName="e", Body=b""))
    assert (empty["Error"]["Code"], empty["Error"]["Message"]) == (
        "ValidationError",
        "1 validation error detected: Value at 'body' failed to satisfy constraint: Member must not be empty",
    )
    session = clients.client_error(
        lambda: client.invoke_endpoint_with_response_stream(EndpointName="e", Body=BODY, SessionId="session-1")
    )
    assert (session["Error"]["Code"], session["Error"]["Message"]) == (
        "ValidationError",
        "SessionId session-1 is not an open session of endpoint e: its container never opened it, or closed it",
    )


def test_a_stream_later_than_the_timeout_is_a_model_stream_error(scripted):
    error = clients.client_error(
        lambda: clients.runtime_client(scripted.port).invoke_endpoint_with_response_stream(
            EndpointName="e", Body=BODY, ContentType="application/json", CustomAttributes="sleep"
        )
    )
    assert (error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]) == ("ModelStreamError", 424)
    assert error["Error"]["Message"] == (
        "Your model primary did not complete sending the inference response in the allotted time."
    )
    assert error["ErrorCode"] == "ModelInvocationTimeExceeded"
