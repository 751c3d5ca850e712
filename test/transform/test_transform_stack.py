"""Acceptance: real transform jobs against real stacks of our container (nginx, gunicorn, the model server running
half_plus_three), started by the transform package itself.

Two stacks are shared by the module: the "seed" model (the seed write-up's script ported, seed_inference.py) and
the "plain" model (no code/: the default handler). Jobs that must start their own stacks (InstanceCount 2, a
model that fails to start) do so through transform().
"""

import gzip
import json
import logging
import shutil
import socket
import struct
from pathlib import Path

import boto3
import clients
import numpy as np
import paths
import pytest
from sagemaker_tfs.transform import api as transform_api
from sagemaker_tfs.transform import containers, transform
from sagemaker_tfs.transform.containers import container_environment, start_containers, stop_containers

HERE = Path(__file__).resolve().parent
EMOJI = ["🍣", "🍵"]
SEED_VALUES = [1, 3, 4, 15, 13] + [(i * 37) % 3001 for i in range(99_994)] + [3000]  # 100,000, as in the write-up
PAYLOAD_ERROR = "Too much data for max payload size"


def seed_output(value: int) -> str:
    """The write-up's output_fn for one record."""
    return json.dumps({"output": f"I want to {EMOJI[value % 2]}"}, ensure_ascii=False)


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def model_folder(parent: Path, script: Path | None) -> Path:
    model = parent / "model"
    shutil.copytree(paths.HALF_PLUS_THREE, model)
    if script is not None:
        (model / "code").mkdir()
        shutil.copy(script, model / "code" / "inference.py")
    return model


@pytest.fixture(scope="module")
def stacks(tmp_path_factory):
    """The seed and plain stacks, started (in parallel) with the code path transform() uses."""
    started = {}
    try:
        for name, script in (("seed", HERE / "seed_inference.py"), ("plain", None)):
            parent = tmp_path_factory.mktemp(f"{name}-stack")
            started[name] = start_containers(
                model_folder(parent, script), 1, container_environment({}, None, None, None), parent / "work", 180
            )
        yield {name: containers[0].url for name, containers in started.items()}
    finally:
        for containers in started.values():
            stop_containers(containers)


@pytest.fixture(scope="module")
def seed_files(tmp_path_factory) -> Path:
    """testdata1.jsonl and testdata2.jsonl: 100,000 lines of {"value": n} each (about 1.5 MB)."""
    folder = tmp_path_factory.mktemp("seed-data") / "batch_input"
    folder.mkdir()
    for number in (1, 2):
        (folder / f"testdata{number}.jsonl").write_text("".join(f'{{"value":{v}}}\n' for v in seed_values(number)))
    return folder


@pytest.fixture(scope="module")
def small_seed_files(tmp_path_factory) -> Path:
    """The first 150 lines of each seed file, for one request per record."""
    folder = tmp_path_factory.mktemp("small-seed-data") / "batch_input"
    folder.mkdir()
    for number in (1, 2):
        (folder / f"testdata{number}.jsonl").write_text(
            "".join(f'{{"value":{v}}}\n' for v in seed_values(number, small=True))
        )
    return folder


def seed_values(number: int, small: bool = False) -> list[int]:
    """testdata1: SEED_VALUES; testdata2: the same rotated (both start with a one-digit value, as in the seed)."""
    values = SEED_VALUES if number == 1 else SEED_VALUES[5:] + SEED_VALUES[:5]
    return values[:150] if small else values


def run(url: str, data: Path, out: Path, **params) -> dict:
    return transform(url, data=str(data), output_path=str(out), work_dir=str(out.parent / f"{out.name}-work"), **params)


# ----- the seed write-up's cases -----


def test_seed_whole_file_over_max_payload_fails_without_a_request(stacks, seed_files, tmp_path):
    description = run(
        stacks["seed"],
        seed_files,
        tmp_path / "out",
        content_type="application/json",
        strategy="SingleRecord",
        max_payload=1,
    )
    assert description["TransformJobStatus"] == "Failed"
    assert description["FailureReason"] == "ClientError: See job logs for more information"
    for obj in description["LocalRun"]["Objects"]:
        assert (obj["Status"], obj["Messages"], obj["Requests"], obj["FailedRecords"]) == (
            "Failed",
            [PAYLOAD_ERROR],
            0,
            [0],
        )
    assert listing(tmp_path / "out") == []


def test_seed_whole_file_in_one_request_reaches_the_script(stacks, seed_files, tmp_path):
    description = run(
        stacks["seed"],
        seed_files,
        tmp_path / "out",
        content_type="application/json",
        strategy="SingleRecord",
        max_payload=6,
        model_client_config={"InvocationsMaxRetries": 1},
    )
    assert description["FailureReason"] == "AlgorithmError: See job logs for more information"
    for obj in description["LocalRun"]["Objects"]:
        assert obj["Records"] == 1 and obj["Requests"] == 2 and obj["Retries"] == 1
        assert obj["BytesSent"] == 2 * Path(obj["Input"]).stat().st_size  # the whole file, twice
        [message] = obj["Messages"]
        assert message.startswith("Bad HTTP status received from algorithm: 500\n\nMessage:\n")
        assert json.loads(message.split("Message:\n", 1)[1]) == {"error": "Extra data: line 2 column 1 (char 12)"}
    assert listing(tmp_path / "out") == []


def test_seed_line_single_record_concatenates_outputs_without_a_separator(stacks, small_seed_files, tmp_path):
    description = run(
        stacks["seed"],
        small_seed_files,
        tmp_path / "out",
        content_type="application/json",
        split_type="Line",
        strategy="SingleRecord",
        max_payload=1,
    )
    assert description["TransformJobStatus"] == "Completed"
    assert description["LocalRun"]["Summary"]["Requests"] == 300
    for number in (1, 2):
        text = (tmp_path / "out" / f"testdata{number}.jsonl.out").read_text()
        assert text == "".join(seed_output(v) for v in seed_values(number, small=True))


def test_seed_line_single_record_with_assemble_with_line(stacks, small_seed_files, tmp_path):
    description = run(
        stacks["seed"],
        small_seed_files,
        tmp_path / "out",
        content_type="application/json",
        split_type="Line",
        strategy="SingleRecord",
        assemble_with="Line",
        max_concurrent_transforms=4,
    )
    assert description["TransformJobStatus"] == "Completed"
    text = (tmp_path / "out" / "testdata1.jsonl.out").read_text()
    assert text.splitlines()[:5] == [f'{{"output": "I want to {e}"}}' for e in ("🍵", "🍵", "🍣", "🍵", "🍵")]
    assert text == "".join(seed_output(v) + "\n" for v in seed_values(1, small=True))


def test_seed_line_multi_record_sends_lines_joined_by_newlines(stacks, seed_files, tmp_path):
    description = run(
        stacks["seed"],
        seed_files,
        tmp_path / "out",
        content_type="application/json",
        split_type="Line",
        strategy="MultiRecord",
        max_payload=1,
        model_client_config={"InvocationsMaxRetries": 0},
    )
    assert description["FailureReason"] == "AlgorithmError: See job logs for more information"
    for obj in description["LocalRun"]["Objects"]:
        assert obj["Requests"] == 2  # about 1.5 MB in batches of at most 1 MB, never mixing the two files
        assert obj["FailedRecords"] == list(range(100_000))
        assert "Extra data: line 2 column 1 (char 12)" in obj["Messages"][0]
    assert listing(tmp_path / "out") == []


def test_seed_multi_record_split_in_the_script_gives_the_single_record_output(stacks, seed_files, tmp_path):
    description = run(
        stacks["seed"],
        seed_files,
        tmp_path / "out",
        content_type="application/jsonlines",
        split_type="Line",
        strategy="MultiRecord",
        max_payload=1,
        assemble_with="Line",
    )
    assert description["TransformJobStatus"] == "Completed"
    assert description["LocalRun"]["Summary"]["Requests"] == 4
    for number in (1, 2):
        assert (tmp_path / "out" / f"testdata{number}.jsonl.out").read_text() == "".join(
            seed_output(v) + "\n" for v in seed_values(number)
        )


def test_seed_join_with_input(stacks, small_seed_files, tmp_path):
    description = run(
        stacks["seed"],
        small_seed_files,
        tmp_path / "out",
        content_type="application/json",
        accept="application/json",
        split_type="Line",
        strategy="SingleRecord",
        assemble_with="Line",
        join_source="Input",
    )
    assert description["TransformJobStatus"] == "Completed"
    lines = (tmp_path / "out" / "testdata1.jsonl.out").read_text().splitlines()
    assert lines[:5] == [  # byte for byte what the write-up shows
        '{"SageMakerOutput":{"output":"I want to 🍵"},"value":1}',
        '{"SageMakerOutput":{"output":"I want to 🍵"},"value":3}',
        '{"SageMakerOutput":{"output":"I want to 🍣"},"value":4}',
        '{"SageMakerOutput":{"output":"I want to 🍵"},"value":15}',
        '{"SageMakerOutput":{"output":"I want to 🍵"},"value":13}',
    ]
    assert len(lines) == 150


# ----- failures, split types -----


def test_records_answered_400_and_500_fail_their_files_only(stacks, tmp_path):
    data = tmp_path / "in"
    data.mkdir()
    (data / "a-client.jsonl").write_text('1\n"fail400"\n3\n"fail400"\n')
    (data / "b-algorithm.jsonl").write_text('"fail500"\n2\n')
    (data / "c-good.jsonl").write_text("5\n6\n")
    description = run(
        stacks["seed"],
        data,
        tmp_path / "out",
        content_type="application/jsonlines",
        split_type="Line",
        strategy="SingleRecord",
        assemble_with="Line",
        max_concurrent_transforms=2,
    )
    client, algorithm, good = description["LocalRun"]["Objects"]
    assert description["TransformJobStatus"] == "Failed"
    assert description["FailureReason"] == "ClientError: See job logs for more information"
    assert (client["FailedRecords"], client["Requests"], client["Retries"]) == ([1, 3], 4, 0)
    assert client["Messages"] == ['ClientError: 400\n\nMessage:\n{"error": "record refused on purpose: fail400"}']
    assert (algorithm["FailedRecords"], algorithm["Requests"], algorithm["Retries"]) == ([0], 5, 3)
    assert algorithm["Messages"] == [
        'Bad HTTP status received from algorithm: 500\n\nMessage:\n{"error": "record refused on purpose: fail500"}'
    ]
    assert good["Status"] == "Completed"
    assert listing(tmp_path / "out") == ["c-good.jsonl.out"]
    assert (tmp_path / "out" / "c-good.jsonl.out").read_text() == seed_output(5) + "\n" + seed_output(6) + "\n"


def test_a_record_over_max_payload_fails_its_file_under_each_strategy(stacks, tmp_path):
    data = tmp_path / "in"
    data.mkdir()
    (data / "big.csv").write_text("1\n" + "2" * (1024 * 1024 + 1) + "\n3\n")  # its 2nd record is over 1 MB
    (data / "small.csv").write_text("4\n5\n")
    for strategy in ("SingleRecord", "MultiRecord"):
        out = tmp_path / strategy
        description = run(
            stacks["plain"],
            data,
            out,
            content_type="text/csv",
            accept="text/csv",
            split_type="Line",
            assemble_with="Line",
            strategy=strategy,
            max_payload=1,
        )
        big, small = description["LocalRun"]["Objects"]
        assert (big["Status"], big["FailedRecords"], big["Messages"]) == ("Failed", [1], [PAYLOAD_ERROR])
        assert big["BytesSent"] < 100  # the other records were sent, the big one never
        assert description["FailureReason"] == "ClientError: See job logs for more information"
        assert small["Status"] == "Completed" and listing(out) == ["small.csv.out"]
        assert [float(x) for x in (out / "small.csv.out").read_text().split()] == [5.0, 5.5]


def framed_answers(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_tfrecord_single_record_strips_framing_and_multi_record_keeps_it(stacks, tfrecord_numbers, tmp_path):
    path, values = tfrecord_numbers
    expected_y = [0.5 * v + 3 for v in values]
    for strategy, framed, requests in (("SingleRecord", False, len(values)), ("MultiRecord", True, 1)):
        out = tmp_path / strategy
        description = run(
            stacks["seed"],
            path,
            out,
            content_type="application/x-tfrecord",
            split_type="TFRecord",
            strategy=strategy,
            assemble_with="Line",
        )
        assert description["TransformJobStatus"] == "Completed", description["LocalRun"]["Objects"]
        assert description["LocalRun"]["Summary"]["Requests"] == requests
        answers = framed_answers(out / f"{path.name}.out")
        assert [a["y"] for a in answers] == expected_y and {a["framed"] for a in answers} == {framed}


def recordio(data: bytes) -> bytes:
    return struct.pack("<II", 0xCED7230A, len(data)) + data + b"\0" * (-len(data) % 4)


def test_recordio_single_record_strips_framing_and_multi_record_keeps_it(stacks, tmp_path):
    values = [1.0, 2.5, -4.0, 10.0, 7.0]
    data = tmp_path / "in" / "numbers.rec"
    data.parent.mkdir()
    data.write_bytes(b"".join(recordio(str(v).encode()) for v in values))
    for strategy, framed, requests in (("SingleRecord", False, len(values)), ("MultiRecord", True, 1)):
        out = tmp_path / strategy
        description = run(
            stacks["seed"],
            data,
            out,
            content_type="application/x-recordio",
            split_type="RecordIO",
            strategy=strategy,
            assemble_with="Line",
        )
        assert description["TransformJobStatus"] == "Completed", description["LocalRun"]["Objects"]
        assert description["LocalRun"]["Summary"]["Requests"] == requests
        answers = framed_answers(out / "numbers.rec.out")
        assert [a["y"] for a in answers] == [0.5 * v + 3 for v in values] and {a["framed"] for a in answers} == {framed}


# ----- the default handler: filters and joins, Gzip, manifests, S3, instances -----


def test_npy_files_go_to_the_model_server_in_binary(stacks, tmp_path):
    data = tmp_path / "in"
    data.mkdir()
    images = np.random.default_rng(5).random((4, 224, 224, 3), dtype=np.float32)  # 2.4 MB, one request per file
    np.save(data / "images.npy", images)
    np.save(data / "numbers.npy", np.array([[1.0], [2.0]]))
    description = run(
        stacks["plain"],
        data,
        tmp_path / "out",
        content_type="application/x-npy",
        accept="application/x-npy",
        max_payload=6,
    )
    assert description["TransformJobStatus"] == "Completed", description["LocalRun"]["Objects"]
    # float32, the model's own type: JSON would have given float64
    answer = np.load(tmp_path / "out" / "images.npy.out")
    assert answer.dtype == np.float32 and answer.tobytes() == (images * np.float32(0.5) + np.float32(3)).tobytes()
    assert np.load(tmp_path / "out" / "numbers.npy.out").tolist() == [[3.5], [4.0]]


def test_csv_filters_and_join(stacks, tmp_path):
    data = tmp_path / "in"
    data.mkdir()
    (data / "data.csv").write_text("id1,1,2\nid2,3,4\nid3,5,6\n")
    description = run(
        stacks["plain"],
        data,
        tmp_path / "out",
        content_type="text/csv",
        accept="text/csv",
        split_type="Line",
        assemble_with="Line",
        input_filter="$[1:]",
        join_source="Input",
        output_filter="$[0,-1]",
        strategy="MultiRecord",
    )
    assert description["TransformJobStatus"] == "Completed", description["LocalRun"]["Objects"]
    assert description["LocalRun"]["Summary"]["Requests"] == 1
    rows = [line.split(",") for line in (tmp_path / "out" / "data.csv.out").read_text().splitlines()]
    # the model sees (1, 2), (3, 4), (5, 6); the last output column is 0.5 * second + 3
    assert [(row[0], float(row[1])) for row in rows] == [("id1", 4.0), ("id2", 5.0), ("id3", 6.0)]
    assert (tmp_path / "out" / "data.csv.out").read_text().endswith("\n")


def test_json_lines_filters_and_join(stacks, tmp_path):
    data = tmp_path / "in"
    data.mkdir()
    (data / "a.jsonl").write_text('{"id":"a","features":[1,2]}\n{"id":"b","features":[3,4],"extra":true}\n')
    description = run(
        stacks["plain"],
        data,
        tmp_path / "out",
        content_type="application/jsonlines",
        accept="application/jsonlines",
        split_type="Line",
        assemble_with="Line",
        input_filter="$.features",
        join_source="Input",
        output_filter="$['id','SageMakerOutput']",
    )
    assert description["TransformJobStatus"] == "Completed", description["LocalRun"]["Objects"]
    lines = (tmp_path / "out" / "a.jsonl.out").read_text().splitlines()
    assert [json.loads(line) for line in lines] == [
        {"id": "a", "SageMakerOutput": [3.5, 4.0]},
        {"id": "b", "SageMakerOutput": [4.5, 5.0]},
    ]


@pytest.mark.parametrize("media", ["text/csv", "application/jsonlines"])
def test_assemble_with_line_writes_one_line_per_record_and_no_blank_lines(stacks, tmp_path, media):
    data = tmp_path / "in"
    data.mkdir()
    (data / "a-small").write_text("1.0\n2.0\n3.0\n")
    values = [float(i % 100) for i in range(300_000)]  # 1.3 MB: two MultiRecord requests of at most 1 MB
    (data / "b-large").write_text("".join(f"{value}\n" for value in values))
    params = dict(content_type=media, accept=media, split_type="Line", assemble_with="Line")
    single = run(stacks["plain"], data / "a-small", tmp_path / "single", strategy="SingleRecord", **params)
    assert single["TransformJobStatus"] == "Completed", single["LocalRun"]["Objects"]
    assert (tmp_path / "single" / "a-small.out").read_text() == "3.5\n4.0\n4.5\n"
    multi = run(stacks["plain"], data, tmp_path / "multi", strategy="MultiRecord", max_payload=1, **params)
    assert multi["TransformJobStatus"] == "Completed", multi["LocalRun"]["Objects"]
    assert [o["Requests"] for o in multi["LocalRun"]["Objects"]] == [1, 2]
    assert (tmp_path / "multi" / "a-small.out").read_text() == "3.5\n4.0\n4.5\n"
    assert (tmp_path / "multi" / "b-large.out").read_text() == "".join(f"{0.5 * v + 3}\n" for v in values)


def test_gzip_inputs_listed_by_a_manifest(stacks, tmp_path):
    data = tmp_path / "in"
    (data / "part").mkdir(parents=True)
    (data / "part" / "a.csv.gz").write_bytes(gzip.compress(b"1\n2\n"))
    (data / "b.csv.gz").write_bytes(gzip.compress(b"4\n"))
    (data / "ignored.csv.gz").write_bytes(gzip.compress(b"8\n"))
    manifest = tmp_path / "inputs.manifest"
    manifest.write_text(json.dumps([{"prefix": f"{data}/"}, "part/a.csv.gz", "b.csv.gz"]))
    description = run(
        stacks["plain"],
        manifest,
        tmp_path / "out",
        data_type="ManifestFile",
        compression_type="Gzip",
        content_type="text/csv",
        accept="text/csv",
        split_type="Line",
        assemble_with="Line",
    )
    assert description["TransformJobStatus"] == "Completed", description["LocalRun"]["Objects"]
    assert listing(tmp_path / "out") == ["b.csv.gz.out", "part/a.csv.gz.out"]
    assert [float(x) for x in (tmp_path / "out" / "part" / "a.csv.gz.out").read_text().split()] == [3.5, 4.0]
    assert [float(x) for x in (tmp_path / "out" / "b.csv.gz.out").read_text().split()] == [5.0]


def test_s3_input_and_output(stacks, s3_endpoint, tmp_path):
    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    s3.create_bucket(Bucket="transform-job")
    s3.put_object(Bucket="transform-job", Key="batch_input/a.csv", Body=b"1\n2\n")
    s3.put_object(Bucket="transform-job", Key="batch_input/deeper/b.csv", Body=b"6\n")
    description = transform(
        stacks["plain"],
        data="s3://transform-job/batch_input",
        output_path="s3://transform-job/output/",
        s3_endpoint_url=s3_endpoint,
        content_type="text/csv",
        accept="text/csv",
        split_type="Line",
        assemble_with="Line",
    )
    assert description["TransformJobStatus"] == "Completed", description["LocalRun"]["Objects"]
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="transform-job", Prefix="output/")["Contents"]]
    assert keys == ["output/a.csv.out", "output/deeper/b.csv.out"]
    body = s3.get_object(Bucket="transform-job", Key="output/a.csv.out")["Body"].read().decode()
    assert [float(x) for x in body.split()] == [3.5, 4.0]
    assert [o["Output"] for o in description["LocalRun"]["Objects"]] == [
        "s3://transform-job/output/a.csv.out",
        "s3://transform-job/output/deeper/b.csv.out",
    ]


def test_fields_nobody_sets_take_sagemakers_defaults(stacks, tmp_path):
    data = tmp_path / "in"
    data.mkdir()
    (data / "a.csv").write_text("1\n")
    description = run(stacks["plain"], data, tmp_path / "out", content_type="text/csv")
    assert description["LocalRun"]["ExecutionParameters"] == {}  # the container reports only what is set
    assert (description["MaxConcurrentTransforms"], description["MaxPayloadInMB"], description["BatchStrategy"]) == (
        1,
        6,
        "MultiRecord",
    )


def test_unset_fields_come_from_the_containers_execution_parameters(tmp_path):
    """The model's environment sets the container's Batch Transform defaults; the job leaves them unset."""
    data = tmp_path / "in"
    data.mkdir()
    (data / "a.csv").write_text("1\n2\n3\n")
    env = {
        "SAGEMAKER_BATCH_STRATEGY": "SINGLE_RECORD",
        "SAGEMAKER_MAX_CONCURRENT_TRANSFORMS": "40",
        "SAGEMAKER_GUNICORN_WORKERS": "1",
    }
    description = transform(
        str(model_folder(tmp_path, None)),
        data=str(data),
        output_path=str(tmp_path / "out"),
        work_dir=str(tmp_path / "work"),
        content_type="text/csv",
        accept="text/csv",
        split_type="Line",
        assemble_with="None",
        env=env,
    )
    assert description["TransformJobStatus"] == "Completed", description["LocalRun"]
    # 40 x 6 MB (SageMaker's default payload) would exceed its 100 MB: the container reports 16
    assert description["LocalRun"]["ExecutionParameters"] == {
        "MaxConcurrentTransforms": 16,
        "BatchStrategy": "SINGLE_RECORD",
    }
    assert (description["MaxConcurrentTransforms"], description["MaxPayloadInMB"], description["BatchStrategy"]) == (
        16,
        6,
        "SingleRecord",
    )
    assert description["LocalRun"]["Summary"]["Requests"] == 3  # one per record
    assert (tmp_path / "out" / "a.csv.out").read_text() == "3.54.04.5"  # AssembleWith=None: answers as they came


def test_instance_count_2_from_a_model_archive(stacks, tmp_path):
    model = model_folder(tmp_path / "model-src", None)
    archive = tmp_path / "model.tar.gz"
    shutil.make_archive(str(archive).removesuffix(".tar.gz"), "gztar", root_dir=model)
    data = tmp_path / "in"
    data.mkdir()
    for i in range(4):
        (data / f"part-{i}.csv").write_text("".join(f"{i * 10 + n}\n" for n in range(20)))
    params = dict(
        content_type="text/csv",
        accept="text/csv",
        split_type="Line",
        assemble_with="Line",
        strategy="MultiRecord",
        env={"SAGEMAKER_GUNICORN_WORKERS": "1"},
    )
    description = transform(
        str(archive),
        data=str(data),
        output_path=str(tmp_path / "out2"),
        instance_count=2,
        max_concurrent_transforms=3,
        work_dir=str(tmp_path / "work"),
        **params,
    )
    assert description["TransformJobStatus"] == "Completed", description["LocalRun"]
    # the stacks got SAGEMAKER_MAX_CONCURRENT_TRANSFORMS (set only because the job sets the field)
    assert description["LocalRun"]["ExecutionParameters"]["MaxConcurrentTransforms"] == 3
    assert [o["Instance"] for o in description["LocalRun"]["Objects"]] == [0, 1, 0, 1]
    logs = description["LocalRun"]["ContainerLogs"]  # kept with the work folder the job was given
    assert len(logs) == 2 and all(Path(log).is_file() for log in logs)
    endpoints = description["LocalRun"]["Endpoints"]
    assert len(set(endpoints)) == 2 and all(clients.http_status(url + "/ping") is None for url in endpoints)
    single = run(stacks["plain"], data, tmp_path / "out1", **params)
    assert single["TransformJobStatus"] == "Completed"
    for i in range(4):
        name = f"part-{i}.csv.out"
        assert (tmp_path / "out2" / name).read_bytes() == (tmp_path / "out1" / name).read_bytes()
        assert [float(x) for x in (tmp_path / "out2" / name).read_text().split()] == [
            0.5 * (i * 10 + n) + 3 for n in range(20)
        ]


def test_a_job_in_a_temporary_work_folder_names_no_removed_log(tmp_path):
    data = tmp_path / "in"
    data.mkdir()
    (data / "one.csv").write_text("1\n")
    model = model_folder(tmp_path / "model-src", None)
    description = transform(
        str(model), data=str(data), output_path=str(tmp_path / "out"), content_type="text/csv", accept="text/csv"
    )
    assert description["TransformJobStatus"] == "Completed", description["LocalRun"]
    local = description["LocalRun"]
    assert local["ContainerLogs"] == []
    assert local["ContainerLogsNote"] == transform_api.LOGS_REMOVED
    assert "--work-dir" in local["ContainerLogsNote"]
    assert 0 < local["Summary"]["RecordsPerSecond"]  # one record: a rate below 1, not rounded to 0
    assert (tmp_path / "out" / "one.csv.out").read_text().split() == ["3.5"]


STREAMING_SCRIPT = """
def handler(data, context):
    values = data.read().decode().split()
    return (f"{float(value) * 2}\\n" for value in values), "text/csv"
"""


def test_a_script_s_streamed_answer_is_one_output(tmp_path):
    data = tmp_path / "in"
    data.mkdir()
    (data / "values.csv").write_text("1\n2\n3\n")
    script = tmp_path / "inference.py"
    script.write_text(STREAMING_SCRIPT)
    model = model_folder(tmp_path / "model-src", script)
    description = transform(
        str(model),
        data=str(data),
        output_path=str(tmp_path / "out"),
        work_dir=str(tmp_path / "work"),
        content_type="text/csv",
        accept="text/csv",
    )
    assert description["TransformJobStatus"] == "Completed", description["LocalRun"]
    assert (tmp_path / "out" / "values.csv.out").read_text() == "2.0\n4.0\n6.0\n"


def test_a_model_that_cannot_start_fails_the_job_with_the_containers_message(tmp_path):
    data = tmp_path / "in"
    data.mkdir()
    (data / "a.csv").write_text("1\n")
    model = tmp_path / "model"
    shutil.copytree(paths.BAD_HALF_PLUS_TWO, model)
    description = transform(
        str(model),
        data=str(data),
        output_path=str(tmp_path / "out"),
        work_dir=str(tmp_path / "work"),
        startup_timeout=120,
    )
    assert description["TransformJobStatus"] == "Failed"
    reason = description["FailureReason"]
    assert reason.startswith("AlgorithmError: Model container 0 exited with status ")
    assert "saved_model" in reason  # serve's own message names what is wrong
    assert listing(tmp_path / "out") == []


def test_a_stack_whose_port_another_process_took_is_started_again_on_other_ports(tmp_path, monkeypatch, caplog):
    chosen: list[list[int]] = []
    occupiers: list[socket.socket] = []
    free_ports = containers._free_ports

    def occupy(port: int) -> None:
        occupier = socket.socket()
        occupier.bind(("127.0.0.1", port))
        occupier.listen()
        occupiers.append(occupier)

    def chosen_then_taken(count: int, taken: set[int]) -> list[int]:
        ports = free_ports(count, taken)
        chosen.append(ports)
        if len(chosen) == 2:
            occupy(ports[1])  # the first start's model server REST port
        elif len(chosen) == 3:
            occupy(ports[0])  # the second start's nginx port
        return ports

    monkeypatch.setattr(containers, "_free_ports", chosen_then_taken)
    data = tmp_path / "in"
    data.mkdir()
    (data / "a.csv").write_text("1\n2\n")
    try:
        description = transform(
            str(model_folder(tmp_path, None)),
            data=str(data),
            output_path=str(tmp_path / "out"),
            work_dir=str(tmp_path / "work"),
            content_type="text/csv",
            accept="text/csv",
            split_type="Line",
            assemble_with="Line",
        )
    finally:
        for occupier in occupiers:
            occupier.close()
    assert description["TransformJobStatus"] == "Completed", description.get("FailureReason")
    assert (tmp_path / "out" / "a.csv.out").read_text() == "3.5\n4.0\n"
    assert len(chosen) == 6  # three starts: nginx's port, then the model server's two, each time
    assert description["LocalRun"]["Endpoints"] == [f"http://127.0.0.1:{chosen[4][0]}"]
    warnings = [
        r.getMessage() for r in caplog.records if r.name == "sagemaker_tfs.transform" and r.levelno == logging.WARNING
    ]
    assert warnings == [
        f"model container 0 lost one of its ports {tuple(chosen[0] + chosen[1])} to another process "
        "before binding it; starting it again on other ports",
        f"model container 0 lost one of its ports {tuple(chosen[2] + chosen[3])} to another process "
        "before binding it; starting it again on other ports",
    ]


def test_json_batches_take_the_direct_route_only_when_they_are_one_tfs_request(stacks, tmp_path):
    """No script, SAGEMAKER_BATCH: a MultiRecord batch of JSON lines goes to the app by its body (each line an
    instance: one prediction per line), a SingleRecord TFS request to the model server (its answer as TFS gives it)."""
    data = tmp_path / "in"
    data.mkdir()
    (data / "lines").write_text("[1.0]\n[2.0]\n[3.0]\n")
    (data / "requests").write_text('{"instances": [1.0, 2.0]}\n{"instances": [3.0]}\n')
    params = dict(content_type="application/json", accept="application/json", split_type="Line", assemble_with="Line")
    multi = run(stacks["plain"], data / "lines", tmp_path / "multi", strategy="MultiRecord", **params)
    assert multi["TransformJobStatus"] == "Completed", multi["LocalRun"]["Objects"]
    assert json.loads((tmp_path / "multi" / "lines.out").read_text()) == {"predictions": [[3.5], [4.0], [4.5]]}
    single = run(stacks["plain"], data / "requests", tmp_path / "single", strategy="SingleRecord", **params)
    assert single["TransformJobStatus"] == "Completed", single["LocalRun"]["Objects"]
    assert (tmp_path / "single" / "requests.out").read_text() == (
        '{\n    "predictions": [3.5, 4.0\n    ]\n}\n{\n    "predictions": [4.5\n    ]\n}\n'
    )
