"""Job parameters: API and SDK names, SageMaker's validation messages, the CreateTransformJob request."""

import json

import pytest
from sagemaker_tfs.transform import cli
from sagemaker_tfs.transform.api import resolve
from sagemaker_tfs.transform.job import TransformJob, ValidationError

BASE = {"data": "s3://bucket/in/", "output_path": "s3://bucket/out/"}

REQUEST = {
    "TransformJobName": "seed-job",
    "ModelName": "seed-model",
    "MaxConcurrentTransforms": 2,
    "MaxPayloadInMB": 1,
    "BatchStrategy": "SingleRecord",
    "ModelClientConfig": {"InvocationsTimeoutInSeconds": 30, "InvocationsMaxRetries": 1},
    "Environment": {"LOG_LEVEL": "debug"},
    "TransformInput": {
        "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": "s3://bucket/batch_input/"}},
        "ContentType": "application/json",
        "CompressionType": "Gzip",
        "SplitType": "Line",
    },
    "TransformOutput": {"S3OutputPath": "s3://bucket/output/", "Accept": "application/json", "AssembleWith": "Line"},
    "TransformResources": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 2},
    "DataProcessing": {"InputFilter": "$", "OutputFilter": "$['SageMakerOutput','value']", "JoinSource": "Input"},
    "Tags": [{"Key": "team", "Value": "ml"}],
}


def test_a_request_round_trips_unchanged():
    job = TransformJob.create(REQUEST)
    assert job.to_request() == REQUEST
    assert (job.split_type, job.strategy, job.instance_count, job.invocations_timeout, job.max_retries) == (
        "Line",
        "SingleRecord",
        2,
        30,
        1,
    )


def test_sdk_names_api_leaf_names_and_sections_mean_the_same_job():
    sdk = TransformJob.create(
        job_name="j",
        model_name="m",
        split_type="Line",
        strategy="MultiRecord",
        max_payload=2,
        assemble_with="Line",
        env={"A": "1"},
        model_client_config={"InvocationsMaxRetries": 0},
        **BASE,
    )
    api = TransformJob.create(
        TransformJobName="j",
        ModelName="m",
        SplitType="Line",
        BatchStrategy="MultiRecord",
        MaxPayloadInMB="2",
        TransformOutput={"S3OutputPath": "s3://bucket/out/", "AssembleWith": "Line"},
        Environment={"A": "1"},
        InvocationsMaxRetries=0,
        S3Uri="s3://bucket/in/",
    )
    assert sdk == api


def test_parameters_override_the_request_and_unset_fields_stay_unset():
    job = TransformJob.create(REQUEST, split_type="None", max_payload=6, max_concurrent_transforms=None)
    assert (job.split_type, job.max_payload, job.max_concurrent_transforms) == ("None", 6, 2)
    bare = TransformJob.create(None, default_model_name="half_plus_three", **BASE)
    assert bare.strategy is None and bare.max_payload is None and bare.max_concurrent_transforms is None
    assert bare.model_name == "half-plus-three" and bare.job_name.startswith("half-plus-three-")
    assert "BatchStrategy" not in bare.to_request() and "Environment" not in bare.to_request()


def test_local_paths_and_file_uris_are_accepted():
    job = TransformJob.create(data="file:///data/in", output_path="out")
    assert (job.data, job.output_path) == ("/data/in", "out")


@pytest.mark.parametrize(
    "params, message",
    [
        (
            {"split_type": "Lines"},
            "Value 'Lines' at 'transformInput.splitType' failed to satisfy constraint: Member must "
            "satisfy enum value set: [None, Line, RecordIO, TFRecord]",
        ),
        (
            {"strategy": "MULTI_RECORD"},
            "Value 'MULTI_RECORD' at 'batchStrategy' failed to satisfy constraint: Member "
            "must satisfy enum value set: [MultiRecord, SingleRecord]",
        ),
        (
            {"max_payload": 101},
            "Value '101' at 'maxPayloadInMB' failed to satisfy constraint: Member must have value "
            "less than or equal to 100",
        ),
        (
            {"max_payload": 6, "max_concurrent_transforms": 20},
            "MaxConcurrentTransforms * MaxPayloadInMB must not exceed 100 MB (20 * 6 = 120)",
        ),
        (
            {"instance_count": 0},
            "at 'transformResources.instanceCount' failed to satisfy constraint: Member must have "
            "value greater than or equal to 1",
        ),
        (
            {"model_client_config": {"InvocationsMaxRetries": 4}},
            "Value '4' at 'modelClientConfig.invocationsMaxRetries'",
        ),
        (
            {"input_filter": "$." + "a" * 62, "content_type": "application/json"},
            "at 'dataProcessing.inputFilter' failed to satisfy constraint: Member must "
            "have length less than or equal to 63",
        ),
        (
            {"input_filter": "$[0:2,246:]", "content_type": "text/csv", "split_type": "Line"},
            "Invalid JsonPath: $[0:2,246:]: only single range filters of format (eg: [1:5]) are supported. "
            "Format [0:2,246:] is not supported",
        ),
        (
            {
                "join_source": "Input",
                "content_type": "application/json",
                "accept": "application/jsonlines",
                "split_type": "Line",
            },
            "JoinSource=Input requires ContentType and Accept to be the same",
        ),
        (
            {"join_source": "Input", "content_type": "text/csv", "accept": "text/csv", "split_type": "Line"},
            "JoinSource=Input with text/csv requires AssembleWith=Line",
        ),
        (
            {"join_source": "Input", "content_type": "text/csv", "accept": "text/csv", "assemble_with": "Line"},
            "DataProcessing with text/csv requires SplitType=Line",
        ),
        ({"input_filter": "$[1]", "content_type": "application/x-image"}, "DataProcessing supports only JSON and CSV"),
        (
            {"env": {f"K{i}": "v" for i in range(17)}},
            "at 'environment' failed to satisfy constraint: Member must have length less than or equal to 16",
        ),
        ({"env": {"1BAD": "v"}}, "Map keys must satisfy constraint"),
        (
            {"job_name": "no_underscores"},
            "at 'transformJobName' failed to satisfy constraint: Member must satisfy regular expression pattern",
        ),
        ({"SplitTyp": "Line"}, "Unknown parameter 'SplitTyp'"),
        (
            {"TransformInput": {"Splittype": "Line"}},
            "Unknown parameter in TransformInput: 'Splittype', must be one of: "
            "CompressionType, ContentType, DataSource, SplitType",
        ),
        (
            {"max_payload": "six"},
            "Value 'six' at 'maxPayloadInMB' failed to satisfy constraint: Member must be an integer",
        ),
    ],
)
def test_invalid_jobs_are_refused_with_sagemaker_like_messages(params, message):
    with pytest.raises(ValidationError) as error:
        TransformJob.create(**{**BASE, **params})
    assert message in str(error.value)
    assert str(error.value).startswith("1 validation error detected: ")


def test_every_problem_is_listed_at_once():
    with pytest.raises(ValidationError) as error:
        TransformJob.create(split_type="x", assemble_with="y")
    assert str(error.value).startswith("4 validation errors detected: ")
    assert "Value null at 'transformInput.dataSource.s3DataSource.s3Uri'" in str(error.value)
    assert "Value null at 'transformOutput.s3OutputPath'" in str(error.value)


@pytest.mark.parametrize(
    "answer, expected",
    [
        (None, (1, 6, "MultiRecord")),
        ({"MaxConcurrentTransforms": 4, "BatchStrategy": "SINGLE_RECORD", "MaxPayloadInMB": 2}, (4, 2, "SingleRecord")),
        ({"MaxConcurrentTransforms": 4, "BatchStrategy": "MultiRecord", "MaxPayloadInMB": 0}, (4, 0, "MultiRecord")),
        ({"MaxConcurrentTransforms": "many", "BatchStrategy": "BOTH", "MaxPayloadInMB": 500}, (1, 6, "MultiRecord")),
    ],
)
def test_container_answer_fills_what_the_job_leaves_unset(answer, expected):
    assert resolve(TransformJob.create(**BASE), answer) == expected


def test_job_values_win_over_the_container_answer():
    job = TransformJob.create(strategy="SingleRecord", max_payload=1, max_concurrent_transforms=3, **BASE)
    assert resolve(job, {"MaxConcurrentTransforms": 8, "BatchStrategy": "MULTI_RECORD", "MaxPayloadInMB": 6}) == (
        3,
        1,
        "SingleRecord",
    )
    zero = TransformJob.create(max_concurrent_transforms=0, **BASE)  # 0 means unset
    assert resolve(zero, {"MaxConcurrentTransforms": 5}) == (5, 6, "MultiRecord")


def test_cli_dry_run_prints_the_request_built_from_a_file_and_options(tmp_path, capsys):
    request = tmp_path / "job.json"
    request.write_text(json.dumps(REQUEST))
    status = cli.main(
        [
            "--model",
            "model.tar.gz",
            "--request",
            str(request),
            "--split-type",
            "None",
            "--MaxPayloadInMB",
            "6",
            "--env",
            "EXTRA=1",
            "--dry-run",
        ]
    )
    assert status == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["TransformInput"]["SplitType"] == "None" and printed["MaxPayloadInMB"] == 6
    assert printed["Environment"] == {"EXTRA": "1"}
    assert printed["TransformInput"]["DataSource"] == REQUEST["TransformInput"]["DataSource"]


def test_cli_refuses_an_invalid_job_with_status_2(capsys):
    status = cli.main(["--model", "m", "--data", "in", "--output-path", "out", "--strategy", "Single"])
    assert status == 2
    assert "Value 'Single' at 'batchStrategy'" in capsys.readouterr().err
