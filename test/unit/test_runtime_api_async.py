"""runtime_api/asynchronous.py alone: the requests it takes and refuses, what it writes, its queue and its stop, with a
fake container (the whole stack, through boto3, is test/stack/test_stack_runtime_api_async.py)."""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import time
from pathlib import Path

import falcon.testing
import processes
import pytest
from sagemaker_tfs.config import Settings
from sagemaker_tfs.runtime_api.asynchronous import AsyncInvocations, Invocation
from sagemaker_tfs.runtime_api.container import Answer
from sagemaker_tfs.web.app import WebApp

PATH = "/endpoints/local/async-invocations"


class FakeContainer:
    """Answers every call with `answer` (or raises `error`), after `gate` opens; keeps the calls."""

    def __init__(self, answer: Answer | None = None, error: Exception | None = None):
        self.answer = answer or Answer(200, "application/json", None, b'{"predictions": [3.5]}')
        self.error = error
        self.calls: list[tuple[str, str, bytes, dict[str, str], float]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Semaphore(0)  # released once per call, when it starts

    def call(self, method: str, path: str, body: bytes | None, headers: dict[str, str], timeout: float) -> Answer:
        self.calls.append((method, path, body, headers, timeout))
        self.entered.release()
        self.gate.wait()
        if self.error is not None:
            raise self.error
        return self.answer


@pytest.fixture
def output(tmp_path) -> Path:
    return tmp_path / "out"


def make(
    output: Path | None, container: FakeContainer, **env: str
) -> tuple[AsyncInvocations, falcon.testing.TestClient]:
    settings = Settings.from_env(
        {
            **({"SAGEMAKER_LOCAL_ASYNC_OUTPUT_PATH": str(output)} if output else {}),
            "SAGEMAKER_LOCAL_ASYNC_MAX_CONCURRENT": "1",
            "SAGEMAKER_LOCAL_ASYNC_INPUT_PATH": tempfile.gettempdir(),
            **env,
        }
    )
    invocations = AsyncInvocations(settings, container, None)
    app = WebApp()  # as runtime_api/server.py builds it
    app.add_route("/endpoints/{endpoint}/async-invocations", POST=invocations.answer)
    invocations.start()
    return invocations, falcon.testing.TestClient(app)


def post(client: falcon.testing.TestClient, body: bytes = b"", **headers: str) -> falcon.testing.Result:
    sent = {f"X-Amzn-SageMaker-{name.replace('_', '-')}": value for name, value in headers.items()}
    return client.simulate_post(PATH, body=body, headers={"X-Amzn-RequestId": "rid-1", **sent})


def input_file(tmp_path: Path, body: bytes = b'{"instances": [1.0]}') -> Path:
    path = tmp_path / "input.json"
    path.write_bytes(body)
    return path


def names(result: falcon.testing.Result) -> tuple[str, str]:
    """The output's and the failure's file names the answer gives (a UUID each request: <id>.out, <id>-error.out)."""
    output, failure = (result.headers[f"X-Amzn-SageMaker-{kind}Location"] for kind in ("Output", "Failure"))
    output_name, failure_name = Path(output).name, Path(failure).name
    unique = output_name.removesuffix(".out")
    assert len(unique) == 36 and failure_name == f"{unique}-error.out"
    return output_name, failure_name


def written(folder: Path, *names: str) -> None:
    """Waits until the worker has written every one of `names` under `folder` (stop() would drop what is queued)."""
    processes.wait_for(lambda: all((folder / name).exists() for name in names), 10, f"{names} written")


def test_a_local_input_is_answered_at_once_and_its_output_written_whole(tmp_path, output):
    container = FakeContainer()
    invocations, client = make(output, container)
    result = post(
        client,
        InputLocation=str(input_file(tmp_path)),
        Content_Type="application/json",
        Accept="application/json",
        Custom_Attributes="tfs-model-name=m",
        Inference_Id="inf-1",
    )
    assert result.status_code == 202
    assert result.json == {"InferenceId": "inf-1"}
    name, failure = names(result)
    assert result.headers["X-Amzn-SageMaker-OutputLocation"] == f"{output}/{name}"
    assert result.headers["X-Amzn-SageMaker-FailureLocation"] == f"{output}/{failure}"
    written(output, name)
    assert (output / name).read_bytes() == b'{"predictions": [3.5]}'
    assert container.calls == [
        (
            "POST",
            "/invocations",
            b'{"instances": [1.0]}',
            {
                "X-Amzn-RequestId": "rid-1",
                "X-Amzn-SageMaker-Inference-Id": "inf-1",
                "Content-Type": "application/json",
                "Accept": "application/json",
                "X-Amzn-SageMaker-Custom-Attributes": "tfs-model-name=m",
            },
            900,
        )
    ]
    invocations.stop()
    assert sorted(p.name for p in output.iterdir()) == [name]  # no temporary file left


def test_an_inline_body_a_file_uri_and_a_generated_inference_id(tmp_path, output):
    container = FakeContainer()
    invocations, client = make(output, container)
    inline = post(client, b"[1.0]", InvocationTimeoutSeconds="5")
    from_uri = post(client, InputLocation=f"file://{input_file(tmp_path, b'[2.0]')}")
    assert (inline.status_code, from_uri.status_code) == (202, 202)
    ids = [inline.json["InferenceId"], from_uri.json["InferenceId"]]
    outputs = [names(inline)[0], names(from_uri)[0]]
    written(output, *outputs)
    invocations.stop()
    assert all(len(i) == 36 for i in ids) and ids[0] != ids[1]  # UUIDs
    assert sorted((body, timeout) for _, _, body, _, timeout in container.calls) == [(b"[1.0]", 5), (b"[2.0]", 900)]
    assert sorted(p.name for p in output.iterdir()) == sorted(outputs)


def test_the_extension_and_the_filename_name_the_output(tmp_path):
    invocations, client = make(tmp_path / "out", FakeContainer(), SAGEMAKER_LOCAL_ASYNC_FAILURE_PATH="s3://b/")
    result = post(client, b"1", Inference_Id="i", S3OutputPathExtension="day/1", Filename="r.json")
    written(tmp_path / "out" / "day" / "1", "r.json")
    invocations.stop()
    assert result.headers["X-Amzn-SageMaker-OutputLocation"] == f"{tmp_path}/out/day/1/r.json"
    failure = result.headers["X-Amzn-SageMaker-FailureLocation"]
    assert failure.startswith("s3://b/day/1/") and failure.endswith("-error.out") and len(failure) == 13 + 46
    assert (tmp_path / "out" / "day" / "1" / "r.json").exists()


def test_the_container_s_error_body_is_the_failure(tmp_path, output, caplog):
    caplog.set_level(logging.INFO, "sagemaker_tfs.runtime_api")
    container = FakeContainer(Answer(400, "application/json", None, b'{"error": "bad input"}'))
    invocations, client = make(output, container)
    _, failure = names(post(client, b"x", Inference_Id="bad"))
    written(output, failure)
    invocations.stop()
    assert sorted(p.name for p in output.iterdir()) == [failure]
    assert (output / failure).read_bytes() == b'{"error": "bad input"}'
    assert f"inference bad: failed (the container answered 400), failure written to {output}/{failure}" in caplog.text


@pytest.mark.parametrize(
    "error, message",
    [
        (TimeoutError(), b"Invocation timed out: the container did not answer within InvocationTimeoutSeconds (900 s)"),
        (ConnectionRefusedError("refused"), b"Unable to reach the container: refused"),
    ],
)
def test_no_answer_is_a_failure_saying_why(output, error, message):
    invocations, client = make(output, FakeContainer(error=error))
    _, failure = names(post(client, b"x", Inference_Id="i"))
    written(output, failure)
    invocations.stop()
    assert (output / failure).read_bytes() == message


def test_an_unreadable_input_is_a_failure_and_the_container_is_not_called(tmp_path, output):
    container = FakeContainer()
    invocations, client = make(output, container)
    _, name = names(post(client, InputLocation=str(tmp_path / "missing.json"), Inference_Id="i"))
    written(output, name)
    invocations.stop()
    failure = (output / name).read_text()
    assert failure == f"Unable to read the input {tmp_path}/missing.json: No such file or directory"
    assert container.calls == []


def test_an_invocation_that_waited_past_its_ttl_fails_as_expired(output):
    container = FakeContainer()
    invocations, _ = make(output, container)
    invocations.queue.put(
        Invocation(
            "old", "rid", None, b"x", {}, f"{output}/old.out", f"{output}/old-error.out", 60, 900, time.monotonic() - 61
        )
    )
    written(output, "old-error.out")
    invocations.stop()
    assert (
        (output / "old-error.out")
        .read_text()
        .startswith("Request expired: it waited 61 s in the queue, more than its RequestTTLSeconds (60 s)")
    )
    assert container.calls == []


def test_an_output_that_cannot_be_written_becomes_a_failure(tmp_path, caplog):
    caplog.set_level(logging.INFO, "sagemaker_tfs.runtime_api")
    (tmp_path / "out").write_text("a file where the output folder would be")
    invocations, client = make(
        tmp_path / "out", FakeContainer(), SAGEMAKER_LOCAL_ASYNC_FAILURE_PATH=str(tmp_path / "failures")
    )
    name, failure = names(post(client, b"x", Inference_Id="i"))
    written(tmp_path / "failures", failure)
    invocations.stop()
    assert (tmp_path / "failures" / failure).read_text().startswith(f"Unable to write the output {tmp_path}")
    assert f"inference i: unable to write the output {tmp_path}/out/{name}" in caplog.text


@pytest.mark.parametrize(
    "body, headers, message",
    [
        (
            b"",
            {},
            "Provide exactly one of InputLocation (X-Amzn-SageMaker-InputLocation) and Body: the request has neither",
        ),
        (
            b"x",
            {"InputLocation": "/in"},
            "Provide exactly one of InputLocation (X-Amzn-SageMaker-InputLocation) and Body, not both",
        ),
        (
            b"x" * 128_001,
            {},
            "The inline Body is 128001 bytes, more than 128000: store it and give its InputLocation "
            "(X-Amzn-SageMaker-InputLocation)",
        ),
        (
            b"",
            {"InputLocation": "https://b.s3.amazonaws.com/k"},
            "InputLocation 'https://b.s3.amazonaws.com/k' (X-Amzn-SageMaker-InputLocation): the local endpoint reads "
            "s3://bucket/key, file:///path or a local path",
        ),
        (
            b"",
            {"InputLocation": "s3://bucket"},
            "InputLocation 's3://bucket' (X-Amzn-SageMaker-InputLocation) must be s3://bucket/key",
        ),
        (
            b"",
            {"InputLocation": "file://relative"},
            "InputLocation 'file://relative' (X-Amzn-SageMaker-InputLocation) "
            "must be a file:// URI of an absolute path: file:///path/to/input",
        ),
        (
            b"x",
            {"RequestTTLSeconds": "59"},
            "1 validation error detected: Value '59' at 'requestTTLSeconds' failed to "
            "satisfy constraint: Member must have value greater than or equal to 60",
        ),
        (
            b"x",
            {"InvocationTimeoutSeconds": "soon"},
            "1 validation error detected: Value 'soon' at "
            "'invocationTimeoutSeconds' failed to satisfy constraint: Member "
            "must be an integer",
        ),
        (
            b"x",
            {"Inference-Id": "a/b"},
            "InferenceId 'a/b' (X-Amzn-SageMaker-Inference-Id) must not hold '/' here: it names the output file",
        ),
        (
            b"x",
            {"Inference-Id": "a\u00e9"},
            "1 validation error detected: Value 'a\u00e9' at 'inferenceId' failed to satisfy "
            "constraint: Member must satisfy regular expression pattern: \\A\\S[\\p{Print}]*\\z",
        ),
        (
            b"x",
            {"S3OutputPathExtension": "a/../b"},
            "S3OutputPathExtension 'a/../b' "
            "(X-Amzn-SageMaker-S3OutputPathExtension) must have no '..' segment "
            "here: the output must stay under its path",
        ),
        (
            b"x",
            {"Filename": "a.b.c"},
            "1 validation error detected: Value 'a.b.c' at 'filename' failed to satisfy "
            "constraint: Member must satisfy regular expression pattern: "
            "^(?!.*\\..*\\.)[a-zA-Z0-9][a-zA-Z0-9-_\\.]*$",
        ),
        (
            b"x",
            {"Accept": "a" * 1025},
            "1 validation error detected: Value '" + "a" * 1025 + "' at 'accept' failed to "
            "satisfy constraint: Member must have length less than or equal to 1024",
        ),
        (
            b"x",
            {"Custom-Attributes": "\u00e9" * 1025},
            "2 validation errors detected: Value at 'customAttributes' failed "
            "to satisfy constraint: Member must have length less than or equal "
            "to 1024; Value at 'customAttributes' failed to satisfy constraint: "
            "Member must satisfy regular expression pattern: \\p{ASCII}*",
        ),
    ],
)
def test_refusals_are_validation_errors_naming_the_header(output, body, headers, message):
    container = FakeContainer()
    invocations, client = make(output, container)
    result = post(client, body, **headers)
    invocations.stop()
    assert (result.status_code, result.headers["x-amzn-ErrorType"], result.json) == (
        400,
        "ValidationError",
        {"Message": message},
    )
    assert container.calls == [] and not output.exists()


def test_without_an_output_path_the_operation_says_which_variable_to_set():
    invocations, client = make(None, FakeContainer())
    result = post(client, b"x")
    invocations.stop()
    assert (result.status_code, result.headers["x-amzn-ErrorType"]) == (400, "ValidationError")
    assert "set SAGEMAKER_LOCAL_ASYNC_OUTPUT_PATH" in result.json["Message"]


def test_a_full_queue_throttles(output):
    container = FakeContainer()
    container.gate.clear()
    invocations, client = make(output, container, SAGEMAKER_LOCAL_ASYNC_MAX_QUEUED="1")
    first = post(client, b"1", Inference_Id="in-flight")
    assert first.status_code == 202
    assert container.entered.acquire(timeout=10)  # the worker holds the first: the queue is empty again
    second = post(client, b"2", Inference_Id="queued")
    assert second.status_code == 202
    refused = post(client, b"3", Inference_Id="refused")
    assert (refused.status_code, refused.headers["x-amzn-ErrorType"], refused.json) == (
        400,
        "ThrottlingException",
        {
            "Message": "The endpoint's asynchronous queue is full (1 requests waiting, "
            "SAGEMAKER_LOCAL_ASYNC_MAX_QUEUED); retry later"
        },
    )
    container.gate.set()
    outputs = [names(first)[0], names(second)[0]]
    written(output, *outputs)
    invocations.stop()
    assert sorted(p.name for p in output.iterdir()) == sorted(outputs)


def test_stop_finishes_what_is_in_flight_and_ends_what_is_queued_with_a_failure(output, caplog):
    caplog.set_level(logging.INFO, "sagemaker_tfs.runtime_api")
    container = FakeContainer()
    container.gate.clear()
    invocations, client = make(output, container)
    in_flight, _ = names(post(client, b"1", Inference_Id="in-flight"))
    assert container.entered.acquire(timeout=10)
    _, queued_failure = names(post(client, b"2", Inference_Id="queued"))
    stopping = threading.Thread(target=invocations.stop)
    stopping.start()
    written(output, queued_failure)
    assert stopping.is_alive()  # waits for the one in flight
    refused = post(client, b"3")
    assert (refused.status_code, refused.headers["x-amzn-ErrorType"]) == (503, "ServiceUnavailable")
    container.gate.set()
    stopping.join(10)
    assert not stopping.is_alive()
    assert sorted(p.name for p in output.iterdir()) == sorted([in_flight, queued_failure])
    assert (output / queued_failure).read_text() == (
        "Request not run: the endpoint stopped (its container received SIGTERM) while this request was queued; "
        "nothing was sent to the model, invoke it again"
    )
    assert (
        f"inference queued: failed (stopped while queued), failure written to {output}/{queued_failure}" in caplog.text
    )
    assert len(container.calls) == 1


def test_two_requests_with_one_inference_id_write_two_outputs(output):
    container = FakeContainer()
    invocations, client = make(output, container)
    first, second = (names(post(client, body, Inference_Id="same")) for body in (b"1", b"2"))
    assert first != second
    written(output, first[0], second[0])
    invocations.stop()
    assert sorted(p.name for p in output.iterdir()) == sorted([first[0], second[0]])


def test_a_local_input_outside_the_input_path_is_refused(tmp_path, output):
    _, client = make(output, FakeContainer(), SAGEMAKER_LOCAL_ASYNC_INPUT_PATH=str(tmp_path / "inputs"))
    (tmp_path / "inputs").mkdir()
    (tmp_path / "inputs" / "link").symlink_to("/etc/passwd")
    for location in ("/etc/passwd", f"file://{tmp_path}/inputs/../secret", str(tmp_path / "inputs" / "link")):
        result = client.simulate_post(PATH, headers={"X-Amzn-SageMaker-InputLocation": location})
        assert (result.status_code, result.headers["x-amzn-errortype"]) == (400, "ValidationError")
        assert result.json["Message"].startswith(
            f"InputLocation '{location}' is outside SAGEMAKER_LOCAL_ASYNC_INPUT_PATH"
        )


def test_without_an_input_path_only_s3_and_inline_inputs_are_taken(output):
    _, client = make(output, FakeContainer(), SAGEMAKER_LOCAL_ASYNC_INPUT_PATH="")
    result = client.simulate_post(PATH, headers={"X-Amzn-SageMaker-InputLocation": "/tmp/in.json"})
    assert (result.status_code, result.json["Message"]) == (
        400,
        (
            "InputLocation '/tmp/in.json' is a local path: set SAGEMAKER_LOCAL_ASYNC_INPUT_PATH on the container to "
            "the "
            "folder local inputs may be read from, or give an s3:// location"
        ),
    )


def test_a_link_put_on_the_way_after_acceptance_is_refused_when_the_input_is_read(tmp_path, output):
    """The input is checked when the request is accepted and read later: a file, or a folder on its way, replaced by
    a link in between is not followed (the secret never reaches the container or the output)."""
    inputs, secret = tmp_path / "inputs", tmp_path / "secret"
    (inputs / "folder").mkdir(parents=True)
    secret.mkdir()
    (secret / "in.json").write_bytes(b"the secret")
    (inputs / "in.json").write_bytes(b"1")
    (inputs / "folder" / "in.json").write_bytes(b"2")
    (inputs / "fifo").mkdir()
    os.mkfifo(inputs / "fifo" / "in.json")
    container = FakeContainer()
    container.gate.clear()
    invocations, client = make(output, container, SAGEMAKER_LOCAL_ASYNC_INPUT_PATH=str(inputs))
    in_flight, _ = names(post(client, b"0", Inference_Id="in-flight"))
    assert container.entered.acquire(timeout=10)  # the worker holds it: the next ones wait in the queue
    failures = {}
    for name, location in (
        ("file", inputs / "in.json"),
        ("folder", inputs / "folder" / "in.json"),
        ("fifo", inputs / "fifo" / "in.json"),
    ):
        result = post(client, InputLocation=str(location), Inference_Id=name)
        assert result.status_code == 202
        failures[name] = output / names(result)[1]
    (inputs / "in.json").unlink()
    (inputs / "in.json").symlink_to(secret / "in.json")
    (inputs / "folder").rename(tmp_path / "moved")
    (inputs / "folder").symlink_to(secret)
    container.gate.set()
    written(output, in_flight, *(path.name for path in failures.values()))
    invocations.stop()
    assert [call[2] for call in container.calls] == [b"0"]
    assert failures["file"].read_text() == (
        f"Unable to read the input {inputs}/in.json: 'in.json' on the way to 'in.json' is a symbolic link, which is "
        "not followed"
    )
    assert failures["folder"].read_text() == (
        f"Unable to read the input {inputs}/folder/in.json: 'folder' on the way to 'folder/in.json' is a symbolic "
        "link, which is not followed"
    )
    assert failures["fifo"].read_text() == f"Unable to read the input {inputs}/fifo/in.json: not a regular file"
