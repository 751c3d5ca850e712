"""InvokeEndpoint's TargetModel on a local multi-model endpoint (SAGEMAKER_LOCAL_RUNTIME_API=true), with boto3's own
client: the target is loaded through the registry on first use, as SageMaker loads it, then invoked."""

from __future__ import annotations

import tarfile

import clients
import processes
import pytest
from mme_support import MultiModelStack, gated_copy, model

BODY = b'{"instances": [1.0, 2.0]}'
HALF_PLUS_TWO = b'{\n    "predictions": [2.5, 3.0\n    ]\n}'


@pytest.fixture(scope="module")
def runtime_stack(tmp_path_factory):
    root = tmp_path_factory.mktemp("mme-runtime") / "models"
    root.mkdir()
    env = {"SAGEMAKER_LOCAL_RUNTIME_API": "true", "SAGEMAKER_LOCAL_RUNTIME_TIMEOUT_SECONDS": "5"}
    with MultiModelStack(root, env=env) as running:
        yield running


def invoke(stack, target: str | None):
    args = {} if target is None else {"TargetModel": target}
    return clients.runtime_client(stack.port).invoke_endpoint(
        EndpointName="mme", Body=BODY, ContentType="application/json", **args
    )


def error_of(stack, target: str | None) -> dict:
    return clients.client_error(lambda: invoke(stack, target))


def test_a_target_folder_is_loaded_on_first_use_then_invoked(runtime_stack):
    model(runtime_stack.root, "hp2")
    assert invoke(runtime_stack, "hp2")["Body"].read() == HALF_PLUS_TWO
    assert invoke(runtime_stack, "hp2")["Body"].read() == HALF_PLUS_TWO  # loaded once: the second call finds it
    listed = runtime_stack.listed().json()["models"]
    assert [m["modelUrl"] for m in listed if m["modelUrl"].endswith("/hp2")] == [str(runtime_stack.root / "hp2")]
    processes.wait_for_log(runtime_stack, "TargetModel hp2: loading", "target model hp2")


def test_a_target_archive_is_unpacked_once_and_served(runtime_stack, tmp_path):
    source = model(tmp_path, "packed")
    with tarfile.open(runtime_stack.root / "packed.tar.gz", "w:gz") as archive:
        archive.add(source, arcname=".")
    assert invoke(runtime_stack, "packed.tar.gz")["Body"].read() == HALF_PLUS_TWO
    unpacked = list((runtime_stack.root / ".runtime-api-targets").iterdir())
    assert len(unpacked) == 1 and (unpacked[0] / "00000123" / "saved_model.pb").is_file()


@pytest.mark.parametrize(
    "target, message",
    [
        (None, "TargetModel is required: this is a multi-model endpoint (SAGEMAKER_MULTI_MODEL=true)"),
        ("../outside", "TargetModel '../outside' must be a path relative to the model root, without '..'"),
        ("/etc", "TargetModel '/etc' must be a path relative to the model root, without '..'"),
        (
            "x" * 1025,
            f"1 validation error detected: Value '{'x' * 1025}' at 'targetModel' failed to satisfy constraint: "
            "Member must have length less than or equal to 1024",
        ),
    ],
)
def test_a_missing_or_invalid_target_is_a_validation_error(runtime_stack, target, message):
    error = error_of(runtime_stack, target)
    assert (error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]) == ("ValidationError", 400)
    assert error["Error"]["Message"] == message


def test_a_target_that_is_not_there_is_a_validation_error(runtime_stack):
    error = error_of(runtime_stack, "absent.tar.gz")
    assert (error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]) == ("ValidationError", 400)
    assert error["Error"]["Message"] == (
        f"Could not find model data for TargetModel 'absent.tar.gz': {runtime_stack.root / 'absent.tar.gz'} is not a "
        "folder or a .tar.gz archive under the model root"
    )


def test_a_target_still_loading_past_the_timeout_is_model_not_ready_then_served(runtime_stack, gated):
    _, gate = gated_copy(runtime_stack.root, gated, "slow")
    error = error_of(runtime_stack, "slow")
    assert (error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]) == ("ModelNotReadyException", 429)
    assert error["Error"]["Message"] == "Model 'slow' is still loading; retry the request"
    gate.open()
    processes.wait_for(
        lambda: any(m["modelUrl"].endswith("/slow") for m in runtime_stack.listed().json()["models"]),
        what="the load of 'slow' to finish",
    )
    assert invoke(runtime_stack, "slow")["Body"].read() == HALF_PLUS_TWO  # the gated model is y = 0.5 x + 2
