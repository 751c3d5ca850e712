#!/usr/bin/env bash
# The main job: serve an example model with the full stack (model server, gunicorn + Falcon app, nginx).
#   scripts/serve-example.sh [EXAMPLE] [PORT]      (default: half_plus_three on port 8080)
# Sets up .venv (scripts/install.sh), builds the example's SavedModel, packages it into model.tar.gz with
# its code/ folder, unpacks it as SageMaker would, and runs `serve` in the foreground (Ctrl-C drains and stops).
# Then, from another shell: scripts/send-requests.sh http://localhost:PORT
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh
example=${1:-half_plus_three}
port=${2:-8080}
source_dir="model_examples/$example"
[ -f "$source_dir/build.py" ] || { echo "no example $example (see model_examples/)" >&2; exit 2; }
work="build/$example"
rm -rf "$work" && mkdir -p "$work/model"
.venv/bin/python "$source_dir/build.py" "$work/export"
code_args=()
[ -d "$source_dir/code" ] && code_args=(--code "$source_dir/code")
.venv/bin/sagemaker-tfs package-model build "$work/export" "${code_args[@]}" -o "$work/model.tar.gz"
tar -xzf "$work/model.tar.gz" -C "$work/model"
# SageMaker Runtime's API on the same port (README: Testing your client locally), unless set otherwise: boto3 and the
# SDK call this container as an endpoint (model_examples/runtime_client); InvokeEndpointAsync reads local inputs from
# $work/async-input only, and writes under $work.
export SAGEMAKER_LOCAL_RUNTIME_API=${SAGEMAKER_LOCAL_RUNTIME_API:-true}
export SAGEMAKER_LOCAL_ASYNC_OUTPUT_PATH=${SAGEMAKER_LOCAL_ASYNC_OUTPUT_PATH:-$PWD/$work/async-output}
export SAGEMAKER_LOCAL_ASYNC_INPUT_PATH=${SAGEMAKER_LOCAL_ASYNC_INPUT_PATH:-$PWD/$work/async-input}
mkdir -p "$SAGEMAKER_LOCAL_ASYNC_INPUT_PATH"
echo "serving $work/model on http://localhost:$port (try: scripts/send-requests.sh http://localhost:$port," \
     "or .venv/bin/python model_examples/runtime_client/client.py http://127.0.0.1:$port)"
SAGEMAKER_MODEL_DIR="$PWD/$work/model" SAGEMAKER_BIND_TO_PORT="$port" exec .venv/bin/serve
