"""The SageMaker Python SDK (v2) and boto3's own configuration against a local container's runtime API
(SAGEMAKER_LOCAL_RUNTIME_API=true), as a user points them at it: the SDK's Predictor with its JSON, CSV and NPY
serializers, its TensorFlowPredictor (custom attributes, classify and regress), sagemaker-core's Endpoint.invoke, and a
plain boto3 client that only the environment variable AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME points at the container.

No request may leave the machine: every client's requests go through a botocore hook that fails any one whose host is
not 127.0.0.1 (there is no network here, and a call to AWS would hang or fail less clearly), and the environment holds
dummy credentials, a region and no AWS configuration file. The SDK tests skip where the `sagemaker` package (v2) is
not installed."""

from __future__ import annotations

import io
import json
import warnings
from urllib.parse import urlsplit

import boto3
import clients
import numpy as np
import processes
import pytest
import serve_stack
from botocore.exceptions import ClientError
from stack_support import invoke, model_dir

ENDPOINT = "local-endpoint"
CREDENTIALS = {"aws_access_key_id": "local", "aws_secret_access_key": "local"}
NPY = "application/x-npy"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """half_plus_three (y = 0.5 x + 3; version 123; a predict and a regress signature), no script."""
    with serve_stack.Stack(
        model_dir(tmp_path_factory.mktemp("sdk")), env={"SAGEMAKER_LOCAL_RUNTIME_API": "true"}
    ) as stack:
        yield stack


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    """The process environment of a machine without AWS: dummy credentials, a region, no instance metadata, no
    configuration file or profile, no endpoint URL of any service, the SDK's v2 deprecation warning silenced."""
    for name in (
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_SESSION_TOKEN",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_SAGEMAKER",
        "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME",
        "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "local")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "local")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("SAGEMAKER_SUPPRESS_V2_WARNING", "1")
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)  # boto3.client() builds its session from this environment


class LoopbackOnly:
    """A botocore `before-send` hook: records each request's URL and fails any one to a host other than 127.0.0.1."""

    def __init__(self):
        self.urls: list[str] = []

    def __call__(self, request, **_) -> None:
        self.urls.append(request.url)
        if urlsplit(request.url).hostname != "127.0.0.1":
            raise AssertionError(f"a request left the machine: {request.method} {request.url}")


@pytest.fixture
def loopback_only():
    return LoopbackOnly()


@pytest.fixture(scope="module")
def sdk():
    """The `sagemaker` package (v2); its import-time deprecation warning is not this suite's."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import sagemaker  # the test extra installs it: a missing SDK fails here, it is not skipped
        import sagemaker.tensorflow  # noqa: F401 (the submodule, for sdk.tensorflow)
    return sagemaker


@pytest.fixture
def session(sdk, stack, loopback_only):
    """The SDK's Session as a user builds it for a local container: a boto3 session with dummy credentials, the
    runtime client pointed at the container, and a SageMaker client that no test calls."""
    boto_session = boto3.Session(region_name="us-east-1", **CREDENTIALS)
    boto_session.events.register("before-send", loopback_only)  # the clients the SDK makes from it
    runtime = clients.runtime_client(stack.port)
    runtime.meta.events.register("before-send", loopback_only)
    return sdk.session.Session(
        boto_session=boto_session, sagemaker_runtime_client=runtime, sagemaker_client=boto_session.client("sagemaker")
    )


def predictor(sdk, session, serializer, deserializer):
    return sdk.predictor.Predictor(
        ENDPOINT, sagemaker_session=session, serializer=serializer, deserializer=deserializer
    )


def model_error(session, call) -> dict:
    """The parsed response of the ModelError a call must raise: the runtime client's own exception class."""
    with pytest.raises(session.sagemaker_runtime_client.exceptions.ModelError) as raised:
        call()
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 424
    return raised.value.response


# ----- the SDK's Predictor -----


@pytest.mark.parametrize("data", [[1.0, 2.0, 5.0], {"instances": [1.0, 2.0, 5.0]}])
def test_json_serializer_and_deserializer(sdk, session, loopback_only, data):
    json_predictor = predictor(sdk, session, sdk.serializers.JSONSerializer(), sdk.deserializers.JSONDeserializer())
    expected = [[3.5, 4.0, 5.5]] if isinstance(data, list) else [3.5, 4.0, 5.5]  # a bare list is one instance
    assert json_predictor.predict(data) == {"predictions": expected}
    assert loopback_only.urls == [
        f"{session.sagemaker_runtime_client.meta.endpoint_url}/endpoints/{ENDPOINT}/invocations"
    ]


def test_csv_serializer_and_deserializer(sdk, session):
    csv_predictor = predictor(sdk, session, sdk.serializers.CSVSerializer(), sdk.deserializers.CSVDeserializer())
    assert csv_predictor.predict([[1.0], [2.0], [5.0]]) == [["3.5"], ["4.0"], ["5.5"]]  # a row an instance
    assert csv_predictor.predict([1.0, 2.0, 5.0]) == [["3.5", "4.0", "5.5"]]  # one row: one instance


def test_numpy_serializer_and_deserializer(sdk, session):
    npy_predictor = predictor(sdk, session, sdk.serializers.NumpySerializer(), sdk.deserializers.NumpyDeserializer())
    answer = npy_predictor.predict(np.array([[1.0], [2.0], [5.0]], dtype=np.float32))
    assert isinstance(answer, np.ndarray)
    assert answer.shape == (3, 1) and answer.tolist() == [[3.5], [4.0], [5.5]]


def test_numpy_serializer_with_a_json_answer(sdk, session):
    mixed = predictor(sdk, session, sdk.serializers.NumpySerializer(), sdk.deserializers.JSONDeserializer())
    assert mixed.predict(np.array([1.0, 2.0, 5.0])) == {"predictions": [3.5, 4.0, 5.5]}


def test_a_model_error_raises_botocores_model_error_with_the_containers_answer(sdk, session, stack):
    bad = {"instances": ["a"]}
    container = invoke(stack, json.dumps(bad))
    assert container.status == 400
    json_predictor = predictor(sdk, session, sdk.serializers.JSONSerializer(), sdk.deserializers.JSONDeserializer())
    error = model_error(session, lambda: json_predictor.predict(bad))
    assert (error["Error"]["Code"], error["OriginalStatusCode"], error["OriginalMessage"]) == (
        "ModelError",
        400,
        container.text,
    )
    assert error["LogStreamArn"] == (
        f"arn:aws:logs:local:000000000000:log-group:/aws/sagemaker/Endpoints/{ENDPOINT}:"
        f"log-stream:AllTraffic/serve-{stack.proc.pid}"
    )


def test_predict_passes_custom_attributes_and_the_inference_id(sdk, session, stack):
    raw = predictor(sdk, session, sdk.serializers.JSONSerializer(), sdk.deserializers.BytesDeserializer())
    body = raw.predict([1.0], custom_attributes="tfs-model-version=123", inference_id="sdk-inference-1")
    assert body == invoke(stack, "[1.0]", attributes="tfs-model-version=123").body
    processes.wait_for_log(stack, f"InvokeEndpoint {ENDPOINT}, inference id sdk-inference-1")


# ----- the SDK's TensorFlowPredictor -----


def test_tensorflow_predictor_predicts(sdk, session):
    tfs = sdk.tensorflow.TensorFlowPredictor(ENDPOINT, sagemaker_session=session)
    assert tfs.predict({"instances": [1.0, 2.0, 5.0]}) == {"predictions": [3.5, 4.0, 5.5]}


def test_tensorflow_predictor_names_the_model_and_its_version(sdk, session):
    named = sdk.tensorflow.TensorFlowPredictor(
        ENDPOINT, sagemaker_session=session, model_name="model", model_version="123"
    )
    assert named.predict({"instances": [1.0, 2.0]}) == {"predictions": [3.5, 4.0]}


def test_tensorflow_predictor_of_a_model_the_container_lacks_is_a_model_error(sdk, session, stack):
    container = invoke(stack, '{"instances": [1.0]}', attributes="tfs-model-name=missing")
    assert container.status == 404
    missing = sdk.tensorflow.TensorFlowPredictor(ENDPOINT, sagemaker_session=session, model_name="missing")
    error = model_error(session, lambda: missing.predict({"instances": [1.0]}))
    assert (error["OriginalStatusCode"], error["OriginalMessage"]) == (404, container.text)
    assert error["Error"]["Message"].startswith(
        f'Received client error (404) from primary with message "{container.text}". See arn:aws:logs:local:'
    )


def test_tensorflow_predictor_regresses(sdk, session):
    tfs = sdk.tensorflow.TensorFlowPredictor(ENDPOINT, sagemaker_session=session)
    examples = {"signature_name": "tensorflow/serving/regress", "examples": [{"x": 1.0}, {"x": 2.0}]}
    assert tfs.regress(examples) == {"results": [3.5, 4.0]}


def test_tensorflow_predictor_classify_on_a_model_without_a_classification_signature_is_a_model_error(
    sdk, session, stack
):
    examples = {"signature_name": "tensorflow/serving/regress", "examples": [{"x": 1.0}]}
    container = invoke(stack, json.dumps(examples), attributes="tfs-method=classify")
    assert container.status == 400 and "Expected classification signature outputs" in container.text
    tfs = sdk.tensorflow.TensorFlowPredictor(ENDPOINT, sagemaker_session=session)
    error = model_error(session, lambda: tfs.classify(examples))
    assert (error["OriginalStatusCode"], error["OriginalMessage"]) == (400, container.text)


# ----- sagemaker-core's Endpoint (the v3 SDK's resource layer; v2 brings its 1.x release) -----


def test_sagemaker_core_endpoint_invoke_with_the_endpoint_url_variable(sdk, stack, monkeypatch, loopback_only):
    """Endpoint.invoke takes no client or endpoint URL, only a boto3 session: AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME
    points it at the container. The Endpoint is built from its name alone (no DescribeEndpoint)."""
    from sagemaker_core.main import resources, utils

    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", stack.url)
    monkeypatch.setattr(utils.SingletonMeta, "_instances", {})  # its clients are made once a process, cached
    boto_session = boto3.Session(region_name="us-east-1", **CREDENTIALS)
    boto_session.events.register("before-send", loopback_only)
    endpoint = resources.Endpoint(endpoint_name=ENDPOINT)
    # a str body: sagemaker-core 1.x cannot serialize bytes (TypeError: vars() argument must have __dict__), 2.x can
    answer = endpoint.invoke(
        body="1.0\n2.0\n5.0", content_type="text/csv", accept="text/csv", session=boto_session, region="us-east-1"
    )
    assert (answer.body.read(), answer.content_type, answer.invoked_production_variant) == (
        b"3.5\n4.0\n5.5",
        "text/csv",
        "AllTraffic",
    )
    with pytest.raises(ClientError) as raised:
        endpoint.invoke(body='{"instances": ["a"]}', content_type="application/json")
    assert (raised.value.response["Error"]["Code"], raised.value.response["OriginalStatusCode"]) == ("ModelError", 400)
    assert loopback_only.urls == [f"{stack.url}/endpoints/{ENDPOINT}/invocations"] * 2


# ----- boto3 alone, pointed at the container by the environment -----


def test_the_endpoint_url_variable_points_a_plain_boto3_client_at_the_container(stack, monkeypatch, loopback_only):
    """No code change at all: boto3 honours the service's own endpoint variable (AWS_ENDPOINT_URL_<SERVICE ID>)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", f"http://127.0.0.1:{stack.port}")
    runtime = boto3.client("sagemaker-runtime", region_name="us-east-1")
    runtime.meta.events.register("before-send", loopback_only)
    answer = runtime.invoke_endpoint(
        EndpointName=ENDPOINT, Body=b'{"instances": [1.0, 2.0, 5.0]}', ContentType="application/json", Accept=NPY
    )
    assert (answer["ContentType"], answer["InvokedProductionVariant"]) == (NPY, "AllTraffic")
    assert np.load(io.BytesIO(answer["Body"].read()), allow_pickle=False).tolist() == [3.5, 4.0, 5.5]
    assert loopback_only.urls == [f"http://127.0.0.1:{stack.port}/endpoints/{ENDPOINT}/invocations"]


def test_the_endpoint_url_variable_points_the_sdks_default_session_at_the_container(
    sdk, stack, monkeypatch, loopback_only
):
    """The SDK with no change either: its own Session() makes its runtime client with boto3, which honours the
    variable."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", stack.url)
    default = boto3.Session()  # boto3's default session, from the environment, watched
    default.events.register("before-send", loopback_only)
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", default)
    tfs = sdk.tensorflow.TensorFlowPredictor(ENDPOINT)  # Session() inside
    assert tfs.predict({"instances": [1.0, 2.0, 5.0]}) == {"predictions": [3.5, 4.0, 5.5]}
    assert loopback_only.urls == [f"{stack.url}/endpoints/{ENDPOINT}/invocations"]
