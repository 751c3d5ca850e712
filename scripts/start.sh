#!/usr/bin/env bash
# Start the container with a model folder mounted as /opt/ml/model (needs a Docker engine):
#   scripts/start.sh MODEL_DIR [PORT] [IMAGE]
# SAGEMAKER_* variables set in this shell are passed to the container. Stop it with scripts/stop.sh [PORT].
set -euo pipefail
model_dir=$(cd "${1:?usage: $0 MODEL_DIR [PORT] [IMAGE]}" && pwd)
port=${2:-8080}
image=${3:-sagemaker-tfs:cpu}
env_args=()
while IFS='=' read -r name _; do env_args+=(-e "$name"); done < <(env | grep '^SAGEMAKER_' || true)
docker run -d --rm --name "sagemaker-tfs-${port}" -p "${port}:8080" \
    -v "${model_dir}:/opt/ml/model:ro" "${env_args[@]}" "$image" serve
echo "started sagemaker-tfs-${port}; waiting for /ping"
for _ in $(seq 1 120); do
    if curl -fsS "http://localhost:${port}/ping" >/dev/null 2>&1; then echo "ready on http://localhost:${port}"; exit 0; fi
    sleep 1
done
echo "not ready after 120 s; docker logs sagemaker-tfs-${port}:" >&2
docker logs "sagemaker-tfs-${port}" >&2 || true
exit 1
