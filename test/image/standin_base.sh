#!/usr/bin/env bash
# The stand-in base image of test_container.py, used only by that test (no registry of images is reachable
# here): Debian 12 (mmdebstrap, from Debian's mirror) with nginx, and pyenv's CPython 3.10, the Python of the
# tensorflow/serving:2.20.0 bases, copied to the same path and first on PATH as python3. It has no
# tensorflow_model_server: the test mounts one (the embedded model server of its own environment).
#   test/image/standin_base.sh PYTHON_HOME OUT.tar      (PYTHON_HOME: e.g. /root/.pyenv/versions/3.10.13)
set -euo pipefail
python_home=$1
out=$2
libs=libssl3,libffi8,zlib1g,libbz2-1.0,liblzma5,libsqlite3-0,libreadline8,libncursesw6,libuuid1,libgdbm6,libexpat1
# /root 0755: the test's --user 1000 reaches the Pythons mounted under it
copy="mkdir -p \"\$1$python_home\" && chmod 0755 \"\$1/root\" \
&& tar -C '$python_home' --exclude=./lib/python3.10/test -c . | tar -C \"\$1$python_home\" -x \
&& ln -s '$python_home/bin/python3' \"\$1/usr/local/bin/python3\""
mmdebstrap --quiet --format=tar --variant=minbase --include="nginx,ca-certificates,libstdc++6,$libs" \
    --customize-hook="$copy" bookworm "$out.part" http://deb.debian.org/debian
mv "$out.part" "$out"
