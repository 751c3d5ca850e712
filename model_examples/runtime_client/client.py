"""Call a local sagemaker-tfs container as you call a SageMaker endpoint: boto3's `sagemaker-runtime` client and the
SageMaker SDK's Predictor, unchanged but for where they send their requests.

    scripts/serve-example.sh half_plus_three 8080                  # in one shell: the runtime API is on
    python model_examples/runtime_client/client.py [URL]           # in another (default URL: http://127.0.0.1:8080)

Needs boto3; the SDK part runs where the SageMaker SDK v2 is installed (pip install 'sagemaker<3').
"""

import json
import sys
import time
from pathlib import Path

import boto3

ENDPOINT = "my-endpoint"  # any name: the local container is the endpoint
# Any credentials and region will do: the container checks no signature, and no request leaves for AWS.
CREDENTIALS = {"region_name": "us-east-1", "aws_access_key_id": "local", "aws_secret_access_key": "local"}


def with_boto3(url: str):
    # The one change to production code: endpoint_url. Or none at all: AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME=<url>.
    runtime = boto3.client("sagemaker-runtime", endpoint_url=url, **CREDENTIALS)
    answer = runtime.invoke_endpoint(
        EndpointName=ENDPOINT, ContentType="application/json", Body=b'{"instances": [1.0, 2.0, 5.0]}'
    )
    print("boto3, JSON:", json.loads(answer["Body"].read()), "from variant", answer["InvokedProductionVariant"])
    answer = runtime.invoke_endpoint(
        EndpointName=ENDPOINT, ContentType="text/csv", Accept="text/csv", Body=b"1.0\n2.0\n5.0"
    )
    print("boto3, CSV:", answer["Body"].read().decode().splitlines())
    try:
        runtime.invoke_endpoint(EndpointName=ENDPOINT, ContentType="application/json", Body=b'{"instances": ["a"]}')
    except runtime.exceptions.ModelError as error:  # what SageMaker raises when the container answers 4xx or 5xx
        print("boto3, a bad request: ModelError, the container answered", error.response["OriginalStatusCode"])
    return runtime


def asynchronously(runtime):
    # InvokeEndpointAsync takes its input inline (Body, up to 128,000 bytes) or from an InputLocation (s3://, or a
    # file under the container's SAGEMAKER_LOCAL_ASYNC_INPUT_PATH), and writes the answer under the container's
    # SAGEMAKER_LOCAL_ASYNC_OUTPUT_PATH (scripts/serve-example.sh sets it; a folder here, so the client reads a file)
    # or a failure under SAGEMAKER_LOCAL_ASYNC_FAILURE_PATH. A client polls them (or is notified, in SageMaker).
    answer = runtime.invoke_endpoint_async(
        EndpointName=ENDPOINT, ContentType="application/json", Body=b'{"instances": [1.0, 2.0, 5.0]}'
    )
    output, failure = Path(answer["OutputLocation"]), Path(answer["FailureLocation"])
    deadline = time.monotonic() + 30
    while not output.exists() and not failure.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    if output.exists():
        print("boto3, asynchronous:", json.loads(output.read_text()))
    else:
        print("boto3, asynchronous: no output;", failure.read_text() if failure.exists() else "still running")


def with_the_sdk(runtime):
    try:
        import numpy as np
        from sagemaker.deserializers import JSONDeserializer, NumpyDeserializer
        from sagemaker.predictor import Predictor
        from sagemaker.serializers import JSONSerializer, NumpySerializer
        from sagemaker.session import Session
    except ImportError:
        print("SDK: not installed (pip install 'sagemaker<3'), skipped")
        return
    # The SDK's Session takes the runtime client above; its other clients are made but not called.
    session = Session(boto_session=boto3.Session(**CREDENTIALS), sagemaker_runtime_client=runtime)
    predictor = Predictor(
        ENDPOINT, sagemaker_session=session, serializer=JSONSerializer(), deserializer=JSONDeserializer()
    )
    print("SDK Predictor, JSON:", predictor.predict({"instances": [1.0, 2.0, 5.0]}))
    predictor = Predictor(
        ENDPOINT, sagemaker_session=session, serializer=NumpySerializer(), deserializer=NumpyDeserializer()
    )
    print("SDK Predictor, NPY:", predictor.predict(np.array([1.0, 2.0, 5.0])).tolist())


if __name__ == "__main__":
    client = with_boto3(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080")
    asynchronously(client)
    with_the_sdk(client)
