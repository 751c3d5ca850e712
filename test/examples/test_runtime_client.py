"""runtime_client: the client example run as a user runs it, against half_plus_three served as
scripts/serve-example.sh serves it (SAGEMAKER_LOCAL_RUNTIME_API on, an asynchronous output folder)."""

import os
import subprocess
import sys

import pytest
from examples_support import EXAMPLES
from serve_stack import Stack

CLIENT = EXAMPLES / "runtime_client" / "client.py"
BOTO3_LINES = [
    "boto3, JSON: {'predictions': [3.5, 4.0, 5.5]} from variant AllTraffic",
    "boto3, CSV: ['3.5', '4.0', '5.5']",
    "boto3, a bad request: ModelError, the container answered 400",
    "boto3, asynchronous: {'predictions': [3.5, 4.0, 5.5]}",
]
SDK_LINES = [
    "SDK Predictor, JSON: {'predictions': [3.5, 4.0, 5.5]}",
    "SDK Predictor, NPY: [3.5, 4.0, 5.5]",
]


@pytest.fixture(scope="module")
def stack(packaged, tmp_path_factory):
    env = {
        "SAGEMAKER_LOCAL_RUNTIME_API": "true",
        "SAGEMAKER_LOCAL_ASYNC_OUTPUT_PATH": str(tmp_path_factory.mktemp("async-output")),
    }
    with Stack(packaged("half_plus_three").model_dir, env=env) as stack:
        yield stack


def test_the_client_prints_the_predictions(stack, tmp_path):
    # A machine without AWS: no configuration file, no instance metadata (the client passes its own credentials)
    none = str(tmp_path / "none")
    env = {
        **os.environ,
        "AWS_CONFIG_FILE": none,
        "AWS_SHARED_CREDENTIALS_FILE": none,
        "AWS_EC2_METADATA_DISABLED": "true",
        "SAGEMAKER_SUPPRESS_V2_WARNING": "1",
    }
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME"):
        env.pop(name, None)
    result = subprocess.run([sys.executable, CLIENT, stack.url], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    sdk = SDK_LINES  # the test extra installs the SDK
    # the SDK prints where it looked for its configuration files, on standard output
    printed = [line for line in result.stdout.splitlines() if not line.startswith("sagemaker.config INFO - ")]
    assert printed == BOTO3_LINES + sdk
