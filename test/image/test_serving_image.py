"""The serving image's Python environment, without Docker: `scripts/install.sh` with INSTALL_PROFILE=image (what
the Dockerfile runs) into a clean virtual environment of CPython 3.10, the lowest we support (the Python of the
tensorflow/serving:2.20.0 bases), then the full stack from it. test_container.py builds and runs the image itself.

The image has no TensorFlow: its model server is the base image's tensorflow_model_server. Here that binary is
stood in for by a `tensorflow_model_server` on PATH that runs the embedded model server of the test's own (full)
environment, with the same flags; everything else (serve, gunicorn, the Falcon app, handler scripts) runs in
the image's environment, which cannot import TensorFlow.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import clients
import image_support
import model_dirs
import paths
import ports
import processes
import pytest
import sagemaker_tfs
import serve_stack

# Packages the image must not hold: TensorFlow and what only the embedded model server or s3 jobs need.
ABSENT = [
    "tensorflow",
    "tensorflow-cpu",
    "keras",
    "numpy",
    "uvloop",
    "ai-edge-litert",
    "boto3",
]  # httptools: the app worker's parser
LOWEST_PYTHON = Path("/root/.pyenv/versions/3.10.13/bin/python3")  # pyenv's, on this kind of machine
IMAGE_SIZE_LIMIT = 120 * 2**20  # about 60 MB today; the full environment is about 2.7 GB

IMPORT_CHECK = textwrap.dedent("""
    import importlib.metadata, importlib.util, json, sys
    import sagemaker_tfs.codecs, sagemaker_tfs.app.routes, sagemaker_tfs.serve
    app_imports = sorted({name.split(".")[0] for name in sys.modules} & {"tensorflow", "numpy"})
    from tensorflow_serving.apis import (classification_pb2, model_service_pb2_grpc, predict_pb2,
                                         prediction_service_pb2_grpc, regression_pb2)
    from tensorflow_serving.config import model_server_config_pb2
    from tensorflow.core.framework import tensor_pb2
    import tensorflow
    installed = []
    for name in json.loads(sys.argv[1]):
        try:
            importlib.metadata.distribution(name)
            installed.append(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    print(json.dumps({
        "app_imports": app_imports,
        "installed": installed,
        "tensorflow_file": getattr(tensorflow, "__file__", None),
        "tensorflow_python": importlib.util.find_spec("tensorflow.python") is not None,
        "tensorflow_serving_api": importlib.metadata.version("tensorflow-serving-api"),
        "python": sys.version_info[:2],
    }))
""")

# A gRPC handler as a user writes one for the image: the stubs, context.channel, TensorProto built by hand.
GRPC_HANDLER = """
    import importlib.util
    import json

    from tensorflow.core.framework import types_pb2
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc


    def handler(data, context):
        request = predict_pb2.PredictRequest()
        request.model_spec.name = context.model_name or "model"
        x = request.inputs["x"]
        x.dtype = types_pb2.DT_FLOAT
        instances = json.loads(data.read())["instances"]
        x.tensor_shape.dim.add(size=len(instances))
        x.float_val.extend(instances)
        stub = prediction_service_pb2_grpc.PredictionServiceStub(context.channel)
        response = stub.Predict(request, timeout=context.timeout)
        return {"predictions": list(response.outputs["y"].float_val), "version": response.model_spec.version.value,
                "tensorflow_python": importlib.util.find_spec("tensorflow.python") is not None}
"""


def clean_env(**extra: str) -> dict[str, str]:
    """Our environment without what points Python at the test's own environment or source tree."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    return {**env, **extra}


@pytest.fixture(scope="module")
def image_bin(tmp_path_factory) -> Path:
    venv = tmp_path_factory.mktemp("image") / "venv"
    subprocess.run([LOWEST_PYTHON, "-m", "venv", venv], check=True, timeout=120)
    result = subprocess.run(
        [paths.REPO / "scripts" / "install.sh"],
        capture_output=True,
        text=True,
        timeout=240,
        env=clean_env(INSTALL_PROFILE="image", INSTALL_VENV=str(venv)),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return venv / "bin"


@pytest.fixture(scope="module")
def model_server_on_path(tmp_path_factory) -> Path:
    """A folder holding `tensorflow_model_server`: the embedded model server of this (full) environment."""
    folder = tmp_path_factory.mktemp("tfs-bin")
    container = Path(sagemaker_tfs.__file__).resolve().parent.parent
    wrapper = folder / "tensorflow_model_server"
    wrapper.write_text(
        f"#!/bin/sh\nPYTHONPATH='{container}' exec '{sys.executable}' -m sagemaker_tfs.model_server \"$@\"\n"
    )
    wrapper.chmod(0o755)
    return folder


def size_of(folder: Path) -> int:
    return sum(os.lstat(os.path.join(root, name)).st_size for root, _, names in os.walk(folder) for name in names)


def test_the_image_environment_holds_no_tensorflow(image_bin):
    result = subprocess.run(
        [image_bin / "python", "-c", IMPORT_CHECK, json.dumps(ABSENT)],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
        cwd=image_bin,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "app_imports": [],  # serve, the app and the codecs import neither TensorFlow nor numpy
        "installed": [],
        "tensorflow_file": None,  # `tensorflow` is only the namespace of tensorflow-protos/'s modules
        "tensorflow_python": False,  # TensorFlow itself is not there
        "tensorflow_serving_api": importlib.metadata.version("tensorflow-serving-api"),  # the model-server extra's
        "python": [3, 10],
    }
    assert not (image_bin / "tfs-model-server").exists()  # no entry point that needs TensorFlow
    assert size_of(image_bin.parent) < IMAGE_SIZE_LIMIT


def test_serve_without_a_model_server_stops_at_once(image_bin, tmp_path):
    model = model_dirs.copy_model(paths.HALF_PLUS_THREE, tmp_path, "model")
    result = subprocess.run(
        [image_bin / "serve"],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(
            PATH="/usr/sbin:/usr/bin:/sbin:/bin",
            SAGEMAKER_MODEL_DIR=str(model),
            SAGEMAKER_BIND_TO_PORT=str(ports.free_port()),
            SAGEMAKER_RUNTIME_DIR=str(tmp_path / "runtime"),
        ),
    )
    assert result.returncode == 1
    errors = [line.split(" serve: ", 1)[1] for line in result.stderr.splitlines() if " ERROR serve: " in line]
    assert errors == [
        "cannot start: no model server: tensorflow_model_server is not on PATH and the embedded model server is not "
        "installed (missing tensorflow, uvloop, pysimdjson, ai-edge-litert); install TensorFlow Serving, or the "
        "model-server extra (pip install '.[model-server]', as scripts/install.sh does)"
    ]


def test_the_stack_serves_from_the_image_environment(image_bin, model_server_on_path, tmp_path):
    env = clean_env(PATH=f"{model_server_on_path}:{os.environ['PATH']}")
    plain = model_dirs.copy_model(paths.HALF_PLUS_THREE, tmp_path / "plain", "model")
    grpc = model_dirs.write_code(model_dirs.copy_model(paths.HALF_PLUS_THREE, tmp_path / "grpc", "model"), GRPC_HANDLER)
    with (
        serve_stack.Stack(plain, env=env, serve=image_bin / "serve").start(wait=False) as default_stack,
        serve_stack.Stack(grpc, env=env, serve=image_bin / "serve").start(wait=False) as grpc_stack,
    ):
        for stack in (default_stack, grpc_stack):
            stack.wait_until(stack.ready, timeout=180, what="answering /ping with 200")
            processes.wait_for_log(stack, f"starting model server 0: {model_server_on_path}/tensorflow_model_server ")

        body = '{"instances": [1.0, 2.0, 5.0]}'
        answer = clients.http_call(
            default_stack.port, "POST", "/invocations", body, {"Content-Type": "application/json"}
        )
        assert (answer.status, answer.content_type) == (200, "application/json")
        assert answer.text == '{\n    "predictions": [3.5, 4.0, 5.5\n    ]\n}'
        answer = clients.http_call(
            default_stack.port, "POST", "/invocations", "1\n2\n", {"Content-Type": "text/csv", "Accept": "text/csv"}
        )
        assert (answer.status, answer.content_type, answer.text) == (200, "text/csv", "3.5\n4.0")

        answer = clients.http_call(grpc_stack.port, "POST", "/invocations", body, {"Content-Type": "application/json"})
        assert (answer.status, answer.content_type) == (200, "application/json")
        assert answer.json() == {"predictions": [3.5, 4.0, 5.5], "version": 123, "tensorflow_python": False}


def test_requirements_go_to_the_runtime_folder_when_the_environment_is_read_only(
    image_bin, model_server_on_path, tmp_path
):
    # the image's environment mounted read-only (as in a container run with --read-only, or by a user who may not
    # write it), in a mount namespace of serve's own
    venv = image_bin.parent
    serve = tmp_path / "serve-read-only"
    serve.write_text(
        '#!/bin/sh\nexec unshare --mount --propagation private sh -c \'mount --bind "$0" "$0" '
        '&& mount -o remount,bind,ro "$0" && exec "$0/bin/serve"\' '
        f"'{venv}'\n"
    )
    serve.chmod(0o755)
    model = image_support.write_code_with_requirements(model_dirs.copy_model(paths.HALF_PLUS_THREE, tmp_path, "model"))
    env = clean_env(PATH=f"{model_server_on_path}:{os.environ['PATH']}")
    with serve_stack.Stack(model, env=env, serve=serve) as stack:
        answer = clients.http_call(
            stack.port, "POST", "/invocations", '{"instances": [1.0, 2.0, 5.0]}', {"Content-Type": "application/json"}
        )
        assert (answer.status, answer.json()) == (
            200,
            {
                "predictions": [3.5, 4.0, 5.5],
                "extra": "extra 1.0",
                "extra_file": f"{stack.runtime_dir}/python-packages/{image_support.PACKAGE}/__init__.py",
            },
        )
    assert list(venv.glob(f"lib/python3*/site-packages/{image_support.PACKAGE}*")) == []
