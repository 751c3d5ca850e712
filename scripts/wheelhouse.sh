#!/usr/bin/env bash
# Builds the wheelhouse the Dockerfile installs from with --no-index, so that the image build needs no network:
#   scripts/wheelhouse.sh [folder]     (default: build/wheelhouse; scripts/build-image.sh runs it)
# It holds every package of scripts/image-constraints.txt as a binary wheel for CPython 3.10 to 3.13 on this
# machine's architecture (glibc up to 2.35: Ubuntu 22.04, the tensorflow/serving:2.20.0 bases), plus our two
# packages (the repo root and tensorflow-protos/) built here. The downloads are kept per constraints file, in
# build/wheels-<hash>, so a rebuild only downloads when the pins change.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/wheelhouse}
python=${PYTHON:-python3}  # any Python with pip: the repo's .venv when there is one
[ -n "${PYTHON:-}" ] || [ ! -x .venv/bin/python ] || python=.venv/bin/python
arch=$(uname -m)
constraints=scripts/image-constraints.txt
cache="build/wheels-$(sha256sum "$constraints" | cut -c1-16)"
pip=("$python" -m pip --disable-pip-version-check -q)

if [ ! -f "$cache/.complete" ]; then
    rm -rf "$cache"; mkdir -p "$cache"
    platforms=(--platform "manylinux2014_$arch")
    for minor in $(seq 17 35); do platforms+=(--platform "manylinux_2_${minor}_$arch"); done
    requirements=$(grep -v -e '^#' -e '^$' "$constraints")
    for version in 3.10 3.11 3.12 3.13; do
        # shellcheck disable=SC2086
        "${pip[@]}" download --no-deps --only-binary=:all: --python-version "$version" --implementation cp \
            "${platforms[@]}" --dest "$cache" $requirements
    done
    touch "$cache/.complete"
fi

rm -rf "$out"; mkdir -p "$out"
cp "$cache"/*.whl "$out"/
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
tar -c --exclude='*.egg-info' --exclude=__pycache__ pyproject.toml setup.py README.md LICENSE NOTICE container \
    tensorflow-protos \
    | tar -x -C "$src"
# the commit the wheel names (setup.py): the copy has no .git
commit=$("$python" container/sagemaker_tfs/shared/build_info.py)
SAGEMAKER_TFS_BUILD_COMMIT=$commit "${pip[@]}" wheel --no-deps --wheel-dir "$out" "$src" "$src/tensorflow-protos"
echo "wheelhouse: $(ls "$out" | wc -l) wheels in $out" >&2
