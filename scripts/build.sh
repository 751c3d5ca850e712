#!/usr/bin/env bash
# Build the container image: scripts/build.sh [cpu|gpu] [tag]   (needs a Docker engine)
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:-cpu}
tfs_version=${TFS_VERSION:-2.19.0}
case "$kind" in
    cpu) base="tensorflow/serving:${tfs_version}" ;;
    gpu) base="tensorflow/serving:${tfs_version}-gpu" ;;
    *) echo "usage: $0 [cpu|gpu] [tag]" >&2; exit 2 ;;
esac
tag=${2:-sagemaker-tfs:${kind}}
docker build --build-arg "BASE_IMAGE=${base}" -t "$tag" .
echo "built $tag from $base"
