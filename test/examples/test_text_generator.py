"""text_generator: a character-level model whose script streams each generated character as a JSON line as soon as
it is made (a handler returning a generator, one model server call per character), the same greedy text in-process,
through the stack and through boto3's InvokeEndpointWithResponseStream; its 400s; and its stateful sessions."""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

import pytest
from clients import client_error, runtime_client
from examples_support import build_module
from sagemaker_tfs.testing import Endpoint

PROMPT = "the client "
MAX_TOKENS = 48
REQUEST = json.dumps({"prompt": PROMPT, "max_tokens": MAX_TOKENS})
EXPECTED = "reads the text while it grows, one line for each"  # the corpus's next 48 characters, recited
JSON_LINES = "application/jsonlines"
KNOWS = " ,.:abcdefghiklmnopqrstuwxy"  # the vocabulary's characters
# SageMaker Runtime's API on the stack's port, for boto3
STACK_ENV = {"SAGEMAKER_LOCAL_RUNTIME_API": "true"}


@pytest.fixture(scope="module")
def example(packaged):
    return packaged("text_generator")


@pytest.fixture(scope="module")
def build():
    return build_module("text_generator")


@pytest.fixture(scope="module")
def endpoint(example):
    """The script in this process (sagemaker_tfs.testing), against a real model server."""
    with Endpoint(example.model_dir) as running:
        yield running


@pytest.fixture(scope="module")
def stack(example):
    """The whole stack (serve, nginx, gunicorn), with SageMaker Runtime's API on its port."""
    with Endpoint(example.model_dir, env=STACK_ENV, stack=True) as running:
        yield running


def port_of(stack: Endpoint) -> int:
    port = urlsplit(stack.url).port
    assert port is not None
    return port


def generated(body: bytes) -> str:
    """The generated text of an answer, checked line by line: one {"token": character} per character, then
    {"done": true, "text": all of them}, each line ending with a newline."""
    assert body.endswith(b"\n")
    *tokens, last = [json.loads(line) for line in body.split(b"\n")[:-1]]
    assert all(list(token) == ["token"] and len(token["token"]) == 1 for token in tokens), tokens
    text = "".join(token["token"] for token in tokens)
    assert last == {"done": True, "text": text}
    return text


def stream_lines(event_stream) -> list[bytes]:
    """The lines of an InvokeEndpointWithResponseStream answer, as AWS's LineIterator example reads them: the
    PayloadParts buffered, since their bounds need not fall between lines."""
    buffer, lines = b"", []
    for event in event_stream:
        assert list(event) == ["PayloadPart"], event
        buffer += event["PayloadPart"]["Bytes"]
        *whole, buffer = buffer.split(b"\n")
        lines.extend(whole)
    return [*lines, buffer] if buffer else lines


def test_the_greedy_text_is_the_corpus_recited(build):
    assert EXPECTED == build.continuation(PROMPT, MAX_TOKENS)


@pytest.mark.parametrize(
    "request_body, text",
    [
        ({"prompt": PROMPT, "max_tokens": MAX_TOKENS}, EXPECTED),
        ({"max_tokens": 16}, "the model writes"),  # no prompt: all padding, the corpus's start
        ({"prompt": "picks the likeliest letter. ", "max_tokens": 10}, "the model "),  # round from its end
        ({"prompt": "keeps", "max_tokens": 1}, " "),
    ],
    ids=["prompt", "no-prompt", "wraps", "one"],
)
def test_in_process_the_answer_is_one_line_per_character_then_the_text(endpoint, request_body, text):
    result = endpoint.invoke(json.dumps(request_body))
    assert (result.status, result.content_type) == (200, JSON_LINES), result.body[:300]
    assert generated(result.body) == text
    assert len(text) == request_body["max_tokens"]


def test_the_stack_answers_what_the_script_answers_in_process(endpoint, stack):
    in_process, through_stack = endpoint.invoke(REQUEST), stack.invoke(REQUEST)
    assert (through_stack.status, through_stack.content_type) == (200, JSON_LINES), through_stack.body[:300]
    assert generated(through_stack.body) == EXPECTED
    assert through_stack.body == in_process.body


def test_through_the_stack_the_characters_come_in_separate_chunks(endpoint, stack):
    connection = http.client.HTTPConnection("127.0.0.1", port_of(stack), timeout=60)
    try:
        connection.request("POST", "/invocations", REQUEST, {"Content-Type": "application/json"})
        answer = connection.getresponse()
        assert answer.status == 200
        assert (answer.getheader("Transfer-Encoding"), answer.getheader("Content-Length")) == ("chunked", None)
        reads = []
        while part := answer.read1():  # at most one chunk's bytes each
            reads.append(part)
    finally:
        connection.close()
    assert b"".join(reads) == endpoint.invoke(REQUEST).body
    # one chunk a character as the script yields it (nginx may join some that reach it together): buffered
    # anywhere, the answer would be one chunk
    assert len(reads) > 1


def test_boto3_s_response_stream_carries_the_same_lines(endpoint, stack):
    answer = runtime_client(port_of(stack)).invoke_endpoint_with_response_stream(
        EndpointName="text-generator", Body=REQUEST, ContentType="application/json"
    )
    assert answer["ContentType"] == JSON_LINES
    lines = stream_lines(answer["Body"])
    assert lines == endpoint.invoke(REQUEST).body.split(b"\n")[:-1]
    assert len(lines) == MAX_TOKENS + 1


@pytest.mark.parametrize(
    "body, content_type, status, error",
    [
        (b"the client", "application/json", 400, "the request is not JSON ("),
        (b'["the client"]', "application/json", 400, 'send a JSON object: {"prompt": "...", "max_tokens": N}'),
        (
            b'{"prompt": "the", "max_tokens": 5, "temperature": 0.7}',
            "application/json",
            400,
            "unknown field(s) temperature: the fields are prompt, max_tokens, close",
        ),
        (
            b'{"prompt": "The Client!", "max_tokens": 5}',
            "application/json",
            400,
            f'prompt has characters the model does not know: "!CT" (it knows "{KNOWS}")',
        ),
        (b'{"prompt": 7, "max_tokens": 5}', "application/json", 400, "prompt must be a string, not 7"),
        (b'{"prompt": "the"}', "application/json", 400, "max_tokens must be an integer from 1 to 1000, not null"),
        (b'{"max_tokens": 0}', "application/json", 400, "max_tokens must be an integer from 1 to 1000, not 0"),
        (b'{"max_tokens": 1001}', "application/json", 400, "max_tokens must be an integer from 1 to 1000, not 1001"),
        (b'{"max_tokens": 2.0}', "application/json", 400, "max_tokens must be an integer from 1 to 1000, not 2.0"),
        (b'{"max_tokens": true}', "application/json", 400, "max_tokens must be an integer from 1 to 1000, not true"),
        (
            b'{"close": true}',
            "application/json",
            400,
            "close needs an open session: send its id in X-Amzn-SageMaker-Session-Id",
        ),
        (b'{"close": true, "max_tokens": 3}', "application/json", 400, 'close a session with {"close": true} alone'),
        (
            b"the client,40",
            "text/csv",
            415,
            'send JSON ({"prompt": "...", "max_tokens": N}), not text/csv',
        ),
    ],
    ids=[
        "not-json",
        "not-an-object",
        "unknown-field",
        "unknown-characters",
        "prompt-not-a-string",
        "no-max-tokens",
        "zero",
        "too-many",
        "float",
        "bool",
        "close-without-session",
        "close-with-more",
        "csv",
    ],
)
def test_a_bad_request_gets_a_clear_error(endpoint, body, content_type, status, error):
    result = endpoint.invoke(body, content_type)
    assert (result.status, result.content_type) == (status, "application/json")
    assert result.json()["error"].startswith(error), result.json()


def test_a_bad_request_through_the_stack_and_boto3_gets_the_same_error(endpoint, stack):
    bad = b'{"prompt": "The", "max_tokens": 5}'
    expected = endpoint.invoke(bad)
    assert expected.status == 400
    through_stack = stack.invoke(bad)
    assert (through_stack.status, through_stack.body) == (400, expected.body)
    error = client_error(
        lambda: runtime_client(port_of(stack)).invoke_endpoint_with_response_stream(
            EndpointName="text-generator", Body=bad, ContentType="application/json"
        )
    )
    assert (error["Error"]["Code"], error["OriginalStatusCode"]) == ("ModelError", 400)
    assert error["OriginalMessage"] == expected.text


def test_a_session_goes_on_from_where_it_stopped_until_it_is_closed(build, stack):
    client = runtime_client(port_of(stack))
    first = client.invoke_endpoint(
        EndpointName="text-generator",
        Body=json.dumps({"prompt": PROMPT, "max_tokens": 10}),
        ContentType="application/json",
        SessionId="NEW_SESSION",
    )
    session_id, _, expires = first["NewSessionId"].partition(";")
    assert expires.strip().startswith("Expires=")
    assert generated(first["Body"].read()) == EXPECTED[:10]
    second = client.invoke_endpoint(
        EndpointName="text-generator", Body=b'{"max_tokens": 38}', ContentType="application/json", SessionId=session_id
    )
    assert generated(second["Body"].read()) == EXPECTED[10:]  # from where the first stopped
    # a prompt is appended to the session's text first
    third = client.invoke_endpoint(
        EndpointName="text-generator",
        Body=b'{"prompt": " letter.", "max_tokens": 10}',
        ContentType="application/json",
        SessionId=session_id,
    )
    assert generated(third["Body"].read()) == " a session" == build.continuation(PROMPT + EXPECTED + " letter.", 10)
    closed = client.invoke_endpoint(
        EndpointName="text-generator", Body=b'{"close": true}', ContentType="application/json", SessionId=session_id
    )
    assert json.loads(closed["Body"].read()) == {"closed": session_id}
    assert closed["ClosedSessionId"] == session_id
    # closed: the session is gone (refused by the runtime API, or by the script with a 400 naming it)
    error = client_error(
        lambda: client.invoke_endpoint(
            EndpointName="text-generator",
            Body=b'{"max_tokens": 3}',
            ContentType="application/json",
            SessionId=session_id,
        )
    )
    assert session_id in error["Error"]["Message"]


def test_a_session_this_worker_does_not_know_is_a_400_naming_it(endpoint):
    result = endpoint.request(
        "POST",
        "/invocations",
        b'{"max_tokens": 3}',
        {"Content-Type": "application/json", "X-Amzn-SageMaker-Session-Id": "no-such-session"},
    )
    assert (result.status, result.json()) == (
        400,
        {"error": "session no-such-session is not open here: it was closed or expired, or never opened"},
    )
