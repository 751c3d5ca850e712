"""seed_job_parameters (seed 000): the story's script, unchanged (a pure Python model that must be warmed up,
every function taking the optional context), served without a SavedModel and run through Batch Transform with
the story's parameters; each case gives what the story observed on SageMaker."""

from __future__ import annotations

import json
from pathlib import Path

import processes
import pytest
from clients import invoke
from examples_support import build_module
from sagemaker_tfs.transform import transform
from serve_stack import Stack

PAYLOAD_ERROR = "Too much data for max payload size"
EMOJI = ["🍣", "🍵"]
SMALL = 120  # lines per file for the jobs that send one request per line


@pytest.fixture(scope="module")
def build():
    return build_module("seed_job_parameters")


@pytest.fixture(scope="module")
def example(packaged):
    return packaged("seed_job_parameters")


@pytest.fixture(scope="module")
def stack(example):
    with Stack(example.model_dir) as stack:
        yield stack


@pytest.fixture(scope="module")
def inputs(example) -> Path:
    """The two 100,000-line files build.py wrote."""
    return example.export_dir.parent / "batch_input"


@pytest.fixture(scope="module")
def small_inputs(build, tmp_path_factory) -> Path:
    return build.write_inputs(tmp_path_factory.mktemp("small") / "batch_input", SMALL)


def output(value: int) -> str:
    return json.dumps({"output": f"I want to {EMOJI[value % 2]}"}, ensure_ascii=False)


def run(stack, data: Path, out: Path, **params) -> dict:
    return transform(stack.url, data=str(data), output_path=str(out), content_type="application/json", **params)


def test_the_start_up_functions_ran_with_the_context_before_the_first_request(stack):
    answer = invoke(stack, '{"value": 3}')
    assert (answer.status, answer.content_type) == (200, "application/json")
    assert answer.text == output(3)
    # the script's print reaches the stack's log through serve's pipe, maybe after the answer: wait for its line
    log = processes.wait_for_log(stack, "input_fn\n")
    assert (
        log.index("pre_model_fn\n") < log.index("model_fn\n") < log.index("model_warmup_fn\n") < log.index("input_fn\n")
    )
    assert f"{stack.env['SAGEMAKER_MODEL_DIR']} <sagemaker_tfs.toolkit.Context model_name='model'>" in log


def test_the_built_inputs_are_the_story_s(inputs, build):
    for number in (1, 2):
        lines = (inputs / f"testdata{number}.jsonl").read_text().splitlines()
        assert len(lines) == 100_000 and [json.loads(line)["value"] for line in lines] == build.values(number)
    assert (inputs / "testdata1.jsonl").read_text().startswith('{"value":1}\n{"value":3}\n{"value":4}\n')


def test_single_record_with_a_1_mb_payload_fails_on_the_whole_file(stack, inputs, tmp_path):
    description = run(stack, inputs, tmp_path / "out", strategy="SingleRecord", max_payload=1)
    assert description["TransformJobStatus"] == "Failed"
    assert [obj["Messages"] for obj in description["LocalRun"]["Objects"]] == [[PAYLOAD_ERROR], [PAYLOAD_ERROR]]


def test_multi_record_json_fails_with_the_script_s_extra_data_error(stack, inputs, tmp_path):
    description = run(
        stack,
        inputs,
        tmp_path / "out",
        split_type="Line",
        strategy="MultiRecord",
        max_payload=1,
        model_client_config={"InvocationsMaxRetries": 0},
    )
    assert description["FailureReason"] == "AlgorithmError: See job logs for more information"
    for obj in description["LocalRun"]["Objects"]:
        assert obj["Requests"] == 2  # 1.5 MB of lines in payloads of at most 1 MB: both fail
        prefix = 'Bad HTTP status received from algorithm: 500\n\nMessage:\n{"error": "Extra data: line 2 column 1 '
        assert len(obj["Messages"]) == 2 and all(m.startswith(prefix) for m in obj["Messages"])
        assert prefix + '(char 12)"}' in obj["Messages"]  # the first payload starts with {"value":1} or {"value":13}


def test_line_single_record_concatenates_the_answers(stack, small_inputs, build, tmp_path):
    description = run(stack, small_inputs, tmp_path / "out", split_type="Line", strategy="SingleRecord", max_payload=1)
    assert description["TransformJobStatus"] == "Completed"
    assert (tmp_path / "out" / "testdata1.jsonl.out").read_text() == "".join(output(v) for v in build.values(1, SMALL))


def test_line_single_record_assembled_with_line_answers_one_line_per_line(stack, small_inputs, build, tmp_path):
    description = run(
        stack,
        small_inputs,
        tmp_path / "out",
        split_type="Line",
        strategy="SingleRecord",
        assemble_with="Line",
        max_concurrent_transforms=4,
    )
    assert description["TransformJobStatus"] == "Completed"
    for number in (1, 2):
        text = (tmp_path / "out" / f"testdata{number}.jsonl.out").read_text()
        assert text == "".join(output(v) + "\n" for v in build.values(number, SMALL))
    assert (tmp_path / "out" / "testdata1.jsonl.out").read_text().splitlines()[:3] == [
        '{"output": "I want to 🍵"}',
        '{"output": "I want to 🍵"}',
        '{"output": "I want to 🍣"}',
    ]


def test_join_source_input_and_an_output_filter(stack, small_inputs, build, tmp_path):
    description = run(
        stack,
        small_inputs,
        tmp_path / "joined",
        split_type="Line",
        strategy="SingleRecord",
        assemble_with="Line",
        accept="application/json",
        join_source="Input",
    )
    assert description["TransformJobStatus"] == "Completed"
    lines = (tmp_path / "joined" / "testdata1.jsonl.out").read_text().splitlines()
    assert lines[:2] == [
        '{"SageMakerOutput":{"output":"I want to 🍵"},"value":1}',
        '{"SageMakerOutput":{"output":"I want to 🍵"},"value":3}',
    ]
    description = run(
        stack,
        small_inputs,
        tmp_path / "filtered",
        split_type="Line",
        strategy="SingleRecord",
        assemble_with="Line",
        accept="application/json",
        join_source="Input",
        output_filter="$['SageMakerOutput','value']",
    )
    assert description["TransformJobStatus"] == "Completed"
    lines = (tmp_path / "filtered" / "testdata1.jsonl.out").read_text().splitlines()
    assert len(lines) == SMALL
    assert lines[:2] == [
        '{"SageMakerOutput":{"output":"I want to 🍵"},"value":1}',
        '{"SageMakerOutput":{"output":"I want to 🍵"},"value":3}',
    ]
