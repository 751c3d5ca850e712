#!/usr/bin/env bash
# Builds the container image:  scripts/build-image.sh [cpu|gpu] [tag]
# First the wheelhouse (scripts/wheelhouse.sh; the build installs from it, without network), then the Dockerfile
# with `docker` when a Docker engine answers, else with `podman` (with runc: crun fails on some hosts' cgroups).
#   BASE_IMAGE=...  another base (default tensorflow/serving:2.20.0, or its -gpu); also --base-image IMAGE
#   TFS_VERSION=... the TensorFlow Serving release of the default bases (2.20.0 or newer: Python >= 3.10)
#   CONTAINERS_STORAGE_CONF, PODMAN_ARGS: podman's storage and extra global options (test/image uses both)
#   SOURCE_URL=...  the org.opencontainers.image.source label (default: the git remote `origin`)
set -euo pipefail
cd "$(dirname "$0")/.."
base=${BASE_IMAGE:-}
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --base-image) base=$2; shift 2 ;;
        -*) echo "usage: $0 [--base-image IMAGE] [cpu|gpu] [tag]" >&2; exit 2 ;;
        *) args+=("$1"); shift ;;
    esac
done
kind=${args[0]:-cpu}
tfs_version=${TFS_VERSION:-2.20.0}
case "$kind" in
    cpu) base=${base:-tensorflow/serving:${tfs_version}} ;;
    gpu) base=${base:-tensorflow/serving:${tfs_version}-gpu} ;;
    *) echo "usage: $0 [--base-image IMAGE] [cpu|gpu] [tag]" >&2; exit 2 ;;
esac
tag=${args[1]:-sagemaker-tfs:${kind}}

scripts/wheelhouse.sh build/wheelhouse
# What the install step installs, for the build's layer cache, which does not look into mounted files: the
# sources, the pins and the scripts (not the wheels' bytes: a wheel built again differs in its timestamps only)
sources=$(tar -c --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --exclude=__pycache__ \
    --exclude='*.egg-info' pyproject.toml setup.py README.md LICENSE NOTICE container tensorflow-protos scripts \
    | sha256sum | cut -c1-16)
# The image's OCI labels: the version (pyproject.toml's, the one source), the commit and where the code lives
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml)
revision=$(python3 container/sagemaker_tfs/shared/build_info.py)  # the commit the wheel names too
source_url=${SOURCE_URL:-$(git remote get-url origin 2>/dev/null || echo unknown)}
build_args=(--build-arg "BASE_IMAGE=${base}" --build-arg WHEELHOUSE=build/wheelhouse
            --build-arg "SOURCES_DIGEST=${sources}" --build-arg "VERSION=${version}"
            --build-arg "REVISION=${revision}" --build-arg "SOURCE_URL=${source_url}" -t "$tag" .)
if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
    DOCKER_BUILDKIT=1 docker build "${build_args[@]}"
elif command -v podman >/dev/null 2>&1; then
    # runc, and the limits given explicitly: podman's defaults fail on some hosts (crun on their cgroups, runc on
    # limits above what a container may set: this shell's hard limits, at most 65536 files and 32768 processes)
    limit() { local v; v=$(ulimit -H "$1"); if [ "$v" = unlimited ] || [ "$v" -gt "$2" ]; then v=$2; fi; echo "$v"; }
    nofile=$(limit -n 65536) nproc=$(limit -u 32768)
    # shellcheck disable=SC2086
    podman ${PODMAN_ARGS:-} build --runtime runc --ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc" \
        "${build_args[@]}"
else
    echo "build-image: neither a Docker engine (docker info) nor podman: install one" >&2
    exit 1
fi
echo "built $tag from $base"
