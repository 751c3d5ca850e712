#!/bin/sh
# The Dockerfile's first step: makes sure the base image gives sagemaker-tfs a Python it supports (>= 3.10) with
# venv, and fails the build at once, with one message, on a base that cannot (tensorflow/serving:2.19.0 and older
# are Ubuntu 20.04: Python 3.8).
#   scripts/check-base-python.sh            checks python3 on PATH (PYTHON=... checks another interpreter)
#   scripts/check-base-python.sh --install  the same; a base without a usable python3 gets python3, python3-venv
#                                           and nginx from its own apt, when apt's python3 is new enough
# POSIX sh: the base may have no bash.
set -eu
minimum=3.10
python=${PYTHON:-python3}
bases="tensorflow/serving:2.20.0 or newer (GPU: tensorflow/serving:2.20.0-gpu), or a base with Python 3.10 to 3.13"

too_old() {  # too_old VERSION: true when VERSION (3.8.10, 3.10.6-1~22.04, ...) is below the minimum
    major=${1%%.*}; rest=${1#*.}; minor=${rest%%[!0-9]*}
    [ "$major" -lt 3 ] || { [ "$major" -eq 3 ] && [ "$minor" -lt 10 ]; }
}

fail() {  # fail VERSION WHERE
    echo "cannot build: the base image's Python is $1 ($2); sagemaker-tfs needs Python >= $minimum: use $bases" >&2
    exit 1
}

if command -v "$python" >/dev/null 2>&1; then
    version=$("$python" -c 'import platform; print(platform.python_version())')
    too_old "$version" && fail "$version" "$(command -v "$python")"
    if "$python" -c 'import ensurepip, venv' >/dev/null 2>&1; then
        echo "base python: $(command -v "$python") $version, with venv: used as it is"
        exit 0
    fi
fi
if [ "${1:-}" != --install ]; then
    echo "cannot build: the base image has no python3 >= $minimum with venv; use $bases" >&2
    exit 1
fi
apt-get update -qq
candidate=$(apt-cache policy python3 | sed -n 's/^ *Candidate: *\([0-9][^ ]*\).*/\1/p')
[ -n "$candidate" ] || { echo "cannot build: the base image has no python3 and its apt offers none; use $bases" >&2
                         exit 1; }
too_old "$candidate" && fail "$candidate" "python3 from the base's apt"
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    python3 python3-venv nginx ca-certificates >/dev/null
rm -rf /var/lib/apt/lists/*
echo "base python: $(command -v python3) $("$python" -c 'import platform; print(platform.python_version())') \
from the base's apt"
