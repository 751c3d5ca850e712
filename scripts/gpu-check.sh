#!/usr/bin/env bash
# The GPU check a maintainer runs on a machine with NVIDIA GPUs (docs/gpu.md, "The GPU check"):
#   scripts/gpu-check.sh [WHEEL_FOLDER]
# Serves a small PyTorch model through `serve` with default settings (an inference toolkit script whose model_fn
# loads it onto cuda:{gpu_id}), checks that there is one worker per GPU, that every answer was computed on its
# worker's GPU and matches the same model run on the CPU, and prints the GPU memory each worker holds. Exits 1,
# saying why, when something does not hold (at once when nvidia-smi does not work). Needs no network:
#   - PYTHON (default python3) is a Python 3.10 to 3.13 with PyTorch built for CUDA, or WHEEL_FOLDER holds a
#     torch wheel;
#   - the repo is installed, from this checkout, into a virtual environment in a temporary folder that sees
#     PYTHON's packages, with `pip --no-index --find-links WHEEL_FOLDER`: the folder holds the wheels of the
#     repo's dependencies that PYTHON lacks (scripts/wheelhouse.sh makes a folder of them all), and a
#     setuptools wheel (77 or newer) if PYTHON's is older;
#   - nginx: the installed one, else the .deb packages in WHEEL_FOLDER (`apt-get download nginx` on a machine of
#     the same distribution), unpacked into the temporary folder.
# Takes a minute or two; it stops after 5 minutes in any case.
set -euo pipefail
cd "$(dirname "$0")/.."
wheels=${1:-}
python=${PYTHON:-python3}
fail() { echo "gpu-check: $*" >&2; exit 1; }
started=$SECONDS

command -v nvidia-smi >/dev/null || fail "nvidia-smi is not on PATH: run the check on a machine with an NVIDIA GPU and its driver"
listing=$(timeout 60 nvidia-smi -L 2>&1) || fail "nvidia-smi -L does not work here: ${listing:-no output, or no answer within 60 s}"
grep -q '^GPU ' <<<"$listing" || fail "nvidia-smi -L lists no GPU: $listing"
echo "gpu-check: nvidia-smi -L:"; sed 's/^/    /' <<<"$listing"
[ -z "$wheels" ] || [ -d "$wheels" ] || fail "$wheels is not a folder"

work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$python" -m venv --system-site-packages "$work/venv" || fail "$python cannot make a virtual environment"
venv_python="$work/venv/bin/python"
pip=("$venv_python" -m pip install -q --disable-pip-version-check --no-index --no-build-isolation)
[ -z "$wheels" ] || pip+=(--find-links "$wheels")
if ! "$venv_python" -c 'import torch' 2>/dev/null; then
    [ -n "$wheels" ] || fail "$python has no PyTorch: set PYTHON to a Python with PyTorch, or give a wheel folder with a torch wheel"
    "${pip[@]}" torch || fail "torch does not install from $wheels"
fi
"$venv_python" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' \
    || fail "PyTorch ($("$venv_python" -c 'import torch; print(torch.__version__)')) sees no GPU: it needs a CUDA build that this driver runs"
# the repo's build backend (pyproject.toml: setuptools>=77)
"$venv_python" -c 'import setuptools, sys; sys.exit(int(setuptools.__version__.split(".")[0]) < 77)' 2>/dev/null \
    || "${pip[@]}" 'setuptools>=77' \
    || fail "no setuptools 77 or newer to build the repo with: put a setuptools wheel in the wheel folder"
mkdir "$work/src"
tar -c --exclude='*.egg-info' --exclude=__pycache__ pyproject.toml setup.py README.md LICENSE NOTICE container \
    | tar -x -C "$work/src"
"${pip[@]}" "$work/src" || fail "the repo does not install: the wheel folder lacks some of its dependencies (pip says which above)"

if ! command -v nginx >/dev/null; then
    debs=("${wheels:-/nonexistent}"/*.deb)
    [ -e "${debs[0]}" ] || fail "nginx is not installed and the wheel folder holds no nginx .deb (apt-get download nginx)"
    for deb in "${debs[@]}"; do dpkg -x "$deb" "$work/root"; done
    export PATH="$work/root/usr/sbin:$PATH"
    command -v nginx >/dev/null || fail "the .deb packages of the wheel folder hold no nginx"
fi

left=$((300 - (SECONDS - started)))
[ "$left" -gt 30 ] || fail "installing took $((SECONDS - started)) s: no time left to serve within 5 minutes"
timeout --signal=TERM --kill-after=10 "$left" "$venv_python" scripts/gpu_check.py --work "$work" \
    || fail "the check failed or ran out of its 5 minutes (above: what it saw)"
echo "gpu-check: done in $((SECONDS - started)) s"
