"""SageMaker Runtime's InvokeEndpointAsync on a local container (SAGEMAKER_LOCAL_RUNTIME_API=true), called with
boto3's own `sagemaker-runtime` client: the output is what `/invocations` answers, written whole to the output path
(a folder, or an s3:// prefix on moto's server); failures go to the failure location; a full queue throttles; SIGTERM
finishes the invocation in flight and ends the queued ones with a failure."""

from __future__ import annotations

import json
import signal
import tempfile
from pathlib import Path

import boto3
import clients
import processes
import pytest
import serve_stack
from stack_support import invoke, model_dir

ON = {
    "SAGEMAKER_LOCAL_RUNTIME_API": "true",
    "SAGEMAKER_LOCAL_ASYNC_INPUT_PATH": tempfile.gettempdir(),
}  # the tests' inputs are under it
BODY = b'{"instances": [1.0, 2.0, 5.0]}'
BAD = b'{"instances": ["a"]}'  # half_plus_three answers 400
# Holds each request until the file its body names exists, so that a test knows what is in flight and what waits.
GATED_SCRIPT = """
    import json
    import os
    import time

    def handler(data, context):
        request = json.loads(data.read())
        print(f"handling {request['name']}", flush=True)
        while not os.path.exists(request["gate"]):
            time.sleep(0.05)
        return json.dumps({"handled": request["name"]}), "application/json"
"""


@pytest.fixture(scope="module")
def output(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("async-output")


@pytest.fixture(scope="module")
def stack(tmp_path_factory, output):
    env = {**ON, "SAGEMAKER_LOCAL_ASYNC_OUTPUT_PATH": str(output)}
    with serve_stack.Stack(model_dir(tmp_path_factory.mktemp("model")), env=env) as running:
        yield running


def gated_stack(root: Path, output: Path) -> serve_stack.Stack:
    """One invocation at a time, one more waiting: the third is throttled."""
    env = {
        **ON,
        "SAGEMAKER_LOCAL_ASYNC_OUTPUT_PATH": str(output),
        "SAGEMAKER_LOCAL_ASYNC_MAX_QUEUED": "1",
        "SAGEMAKER_LOCAL_ASYNC_MAX_CONCURRENT": "1",
    }
    return serve_stack.Stack(model_dir(root, GATED_SCRIPT), env=env)


def invoke_async(stack: serve_stack.Stack, **args) -> dict:
    return clients.runtime_client(stack.port).invoke_endpoint_async(EndpointName="local-endpoint", **args)


def input_file(folder: Path, name: str, body: bytes) -> Path:
    path = folder / name
    path.write_bytes(body)
    return path


def located(answer: dict) -> tuple[str, str]:
    """The output's and the failure's names: a UUID new for each request, as SageMaker names them."""
    output, failure = answer["OutputLocation"].rsplit("/", 1)[1], answer["FailureLocation"].rsplit("/", 1)[1]
    unique = output.removesuffix(".out")
    assert len(unique) == 36 and failure == f"{unique}-error.out"
    return output, failure


def gated(name: str, gate: Path) -> bytes:
    return json.dumps({"name": name, "gate": str(gate)}).encode()


def test_the_output_of_a_local_input_is_what_invocations_answers(stack, output, tmp_path):
    expected = invoke(stack, BODY)
    assert expected.status == 200
    answer = invoke_async(
        stack,
        InputLocation=str(input_file(tmp_path, "in.json", BODY)),
        ContentType="application/json",
        InferenceId="local-1",
    )
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 202
    name, failure = located(answer)
    assert (answer["InferenceId"], answer["OutputLocation"], answer["FailureLocation"]) == (
        "local-1",
        f"{output}/{name}",
        f"{output}/{failure}",
    )
    rid = answer["ResponseMetadata"]["RequestId"]
    processes.wait_for_log(
        stack,
        f"request {rid}: InvokeEndpointAsync local-endpoint, inference id local-1, input "
        f"{tmp_path}/in.json: queued, output {output}/{name}",
        f"inference local-1: output written to {output}/{name}",
    )
    assert (output / name).read_bytes() == expected.body
    assert not (output / failure).exists()


def test_a_file_uri_and_an_inline_body_with_a_generated_inference_id(stack, output, tmp_path):
    rows = b"1.0\n2.0\n"
    csv = invoke(stack, rows, "text/csv", Accept="text/csv")
    from_uri = invoke_async(
        stack, InputLocation=f"file://{input_file(tmp_path, 'in.csv', rows)}", ContentType="text/csv", Accept="text/csv"
    )
    inline = invoke_async(stack, Body=BODY, ContentType="application/json")
    for answer, expected in ((from_uri, csv.body), (inline, invoke(stack, BODY).body)):
        inference_id = answer["InferenceId"]
        assert len(inference_id) == 36  # a UUID, as SageMaker makes one
        name, _ = located(answer)
        processes.wait_for_log(stack, f"inference {inference_id}: output written to {output}/{name}")
        assert (output / name).read_bytes() == expected


def test_a_client_error_of_the_model_is_written_to_the_failure_location(stack, output, tmp_path):
    container = invoke(stack, BAD)
    assert container.status == 400
    answer = invoke_async(
        stack,
        InputLocation=str(input_file(tmp_path, "bad.json", BAD)),
        ContentType="application/json",
        InferenceId="bad-1",
    )
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 202  # accepted: the failure comes later
    name, failure = located(answer)
    processes.wait_for_log(
        stack, f"inference bad-1: failed (the container answered 400), failure written to {output}/{failure}"
    )
    assert (output / failure).read_bytes() == container.body
    assert not (output / name).exists()


def test_a_missing_input_is_a_failure(stack, output, tmp_path):
    _, failure = located(invoke_async(stack, InputLocation=str(tmp_path / "missing.json"), InferenceId="missing-1"))
    processes.wait_for_log(
        stack, f"inference missing-1: failed (unreadable input), failure written to {output}/{failure}"
    )
    assert (
        output / failure
    ).read_text() == f"Unable to read the input {tmp_path}/missing.json: No such file or directory"


@pytest.mark.parametrize(
    "args, message",
    [
        # botocore refuses a TTL under 60 itself (the model's `min`); over the `max` reaches the service
        (
            {"InputLocation": "s3://bucket/in.json", "RequestTTLSeconds": 21601},
            "1 validation error detected: Value '21601' at 'requestTTLSeconds' failed to satisfy constraint: Member "
            "must "
            "have value less than or equal to 21600",
        ),
        (
            {"InputLocation": "s3://bucket/in.json", "InvocationTimeoutSeconds": 3601},
            "1 validation error detected: Value '3601' at 'invocationTimeoutSeconds' failed to satisfy constraint: "
            "Member "
            "must have value less than or equal to 3600",
        ),
        ({}, "Provide exactly one of InputLocation (X-Amzn-SageMaker-InputLocation) and Body: the request has neither"),
        (
            {"InputLocation": "/in.json", "Body": BODY},
            "Provide exactly one of InputLocation (X-Amzn-SageMaker-InputLocation) and Body, not both",
        ),
    ],
)
def test_invalid_requests_are_validation_errors(stack, args, message):
    error = clients.client_error(lambda: invoke_async(stack, **args))
    assert (error["ResponseMetadata"]["HTTPStatusCode"], error["Error"]["Code"], error["Error"]["Message"]) == (
        400,
        "ValidationError",
        message,
    )


def test_without_an_output_path_the_operation_is_a_validation_error(tmp_path):
    with serve_stack.Stack(model_dir(tmp_path), env=ON) as stack:
        error = clients.client_error(lambda: invoke_async(stack, InputLocation="/in.json"))
    assert (error["ResponseMetadata"]["HTTPStatusCode"], error["Error"]["Code"]) == (400, "ValidationError")
    assert error["Error"]["Message"] == (
        "InvokeEndpointAsync needs an output location: set SAGEMAKER_LOCAL_ASYNC_OUTPUT_PATH (a folder or an s3:// "
        "prefix, the endpoint config's AsyncInferenceConfig S3OutputPath) on the container"
    )


def test_a_full_queue_is_throttled(tmp_path):
    output, gate = tmp_path / "out", tmp_path / "gate"
    with gated_stack(tmp_path / "model", output) as stack:
        first, _ = located(invoke_async(stack, Body=gated("first", gate), InferenceId="first"))
        processes.wait_for_log(stack, "handling first")  # in flight: the queue is empty again
        second, _ = located(invoke_async(stack, Body=gated("second", gate), InferenceId="second"))
        error = clients.client_error(lambda: invoke_async(stack, Body=gated("third", gate), InferenceId="third"))
        assert (error["ResponseMetadata"]["HTTPStatusCode"], error["Error"]["Code"]) == (400, "ThrottlingException")
        assert error["Error"]["Message"] == (
            "The endpoint's asynchronous queue is full (1 requests waiting, "
            "SAGEMAKER_LOCAL_ASYNC_MAX_QUEUED); retry later"
        )
        gate.touch()
        processes.wait_for_log(stack, "inference first: output written", "inference second: output written")
    assert sorted(path.name for path in output.iterdir()) == sorted([first, second])
    assert json.loads((output / second).read_bytes()) == {"handled": "second"}


def test_sigterm_finishes_the_invocation_in_flight_and_ends_the_queued_one_with_a_failure(tmp_path):
    output, gate = tmp_path / "out", tmp_path / "gate"
    with gated_stack(tmp_path / "model", output) as stack:
        in_flight, _ = located(invoke_async(stack, Body=gated("in-flight", gate), InferenceId="in-flight"))
        processes.wait_for_log(stack, "handling in-flight")
        _, queued = located(invoke_async(stack, Body=gated("queued", gate), InferenceId="queued"))
        stack.signal(signal.SIGTERM)
        processes.wait_for_log(
            stack, f"inference queued: failed (stopped while queued), failure written to {output}/{queued}"
        )
        assert stack.alive()  # waiting for the one in flight, nginx still answering it
        gate.touch()
        assert stack.proc.wait(60) == 0
    log = stack.log()
    assert f"inference in-flight: output written to {output}/{in_flight}" in log
    assert sorted(path.name for path in output.iterdir()) == sorted([in_flight, queued])
    assert json.loads((output / in_flight).read_bytes()) == {"handled": "in-flight"}
    assert (output / queued).read_text() == (
        "Request not run: the endpoint stopped (its container received SIGTERM) while this request was queued; "
        "nothing was sent to the model, invoke it again"
    )
    assert "handling queued" not in log


@pytest.fixture(scope="module")
def s3(s3_endpoint):
    client = boto3.client("s3", endpoint_url=s3_endpoint)
    client.create_bucket(Bucket="async")
    return client


@pytest.fixture(scope="module")
def s3_stack(tmp_path_factory, s3_endpoint, s3):
    env = {
        **ON,
        "SAGEMAKER_LOCAL_ASYNC_OUTPUT_PATH": "s3://async/output",
        "SAGEMAKER_LOCAL_ASYNC_FAILURE_PATH": "s3://async/failures",
        "AWS_ENDPOINT_URL_S3": s3_endpoint,
    }
    with serve_stack.Stack(model_dir(tmp_path_factory.mktemp("s3-model")), env=env) as running:
        yield running


def s3_object(s3, key: str) -> bytes:
    """The object once its writer's log line has said so."""
    return s3.get_object(Bucket="async", Key=key)["Body"].read()


def test_s3_input_and_output(s3_stack, s3):
    s3.put_object(Bucket="async", Key="input/in.json", Body=BODY)
    answer = invoke_async(
        s3_stack, InputLocation="s3://async/input/in.json", ContentType="application/json", InferenceId="s3-1"
    )
    name, failure = located(answer)
    assert (answer["OutputLocation"], answer["FailureLocation"]) == (
        f"s3://async/output/{name}",
        f"s3://async/failures/{failure}",
    )
    processes.wait_for_log(s3_stack, f"inference s3-1: output written to s3://async/output/{name}")
    assert s3_object(s3, f"output/{name}") == invoke(s3_stack, BODY).body


def test_s3_failures(s3_stack, s3):
    s3.put_object(Bucket="async", Key="input/bad.json", Body=BAD)
    bad = located(invoke_async(s3_stack, InputLocation="s3://async/input/bad.json", InferenceId="s3-bad"))
    missing = located(invoke_async(s3_stack, InputLocation="s3://async/input/missing.json", InferenceId="s3-missing"))
    processes.wait_for_log(
        s3_stack,
        f"inference s3-bad: failed (the container answered 400), failure written to s3://async/failures/{bad[1]}",
        f"inference s3-missing: failed (unreadable input), failure written to s3://async/failures/{missing[1]}",
    )
    assert s3_object(s3, f"failures/{bad[1]}") == invoke(s3_stack, BAD).body
    assert s3_object(s3, f"failures/{missing[1]}").startswith(
        b"Unable to read s3://async/input/missing.json: An error occurred (NoSuchKey)"
    )
    outputs = s3.list_objects_v2(Bucket="async", Prefix="output/").get("Contents", [])
    assert {f"output/{bad[0]}", f"output/{missing[0]}"} & {item["Key"] for item in outputs} == set()
