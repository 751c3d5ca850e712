#!/usr/bin/env bash
# Installs sagemaker-tfs on Debian/Ubuntu in one of two profiles, chosen by INSTALL_PROFILE:
#   full (default; a laptop, CI): nginx, wrk, h2load, podman and mmdebstrap from apt, and the package, editable,
#        with every extra (the embedded model server with TensorFlow, s3, test, examples). Idempotent and quick
#        when nothing changed.
#   image (the Dockerfile; test/image runs the same recipe on every test run): nginx, and the proxy and `serve`
#        only, at the versions of scripts/image-constraints.txt: the package's base dependencies,
#        tensorflow-serving-api without its dependencies (it requires tensorflow), and the TensorFlow protos it
#        imports (tensorflow-protos/). No TensorFlow: the base image brings tensorflow_model_server, so the image
#        has no `tfs-model-server` entry point either.
# INSTALL_VENV is the Python environment's folder (default: .venv at the repo root).
# INSTALL_WHEELHOUSE (image profile): a folder made by scripts/wheelhouse.sh; everything is installed from it with
# --no-index, so that no network is needed (the Dockerfile's offline build).
set -euo pipefail
cd "$(dirname "$0")/.."
profile=${INSTALL_PROFILE:-full}
venv=${INSTALL_VENV:-.venv}
case "$profile" in
    # wrk and h2load (nghttp2-client): the benchmarks' clients; podman (with runc, its network stack netavark and
    # iptables) and mmdebstrap (with gpg): test/image/test_container.py builds and runs the image on a stand-in base;
    # pcre2-utils: pcre2test, with which test/unit/test_direct_route_rule.py runs a pattern of nginx's in PCRE2
    full) apt_packages="nginx wrk nghttp2-client podman runc netavark aardvark-dns iptables mmdebstrap gpg pcre2-utils" ;;
    image) apt_packages="nginx" ;;
    *) echo "install: INSTALL_PROFILE=$profile is not valid: must be full or image" >&2; exit 2 ;;
esac

missing=()
for pkg in $apt_packages; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' >/dev/null 2>&1; then
    missing+=(python3-venv)
fi
if [ ${#missing[@]} -gt 0 ]; then
    echo "install: apt-get install ${missing[*]}" >&2
    sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check)

if [ "$profile" = image ]; then
    echo "install: the image profile into $venv" >&2
    constraints=(-c scripts/image-constraints.txt)
    tfs_api=$(grep -o '^tensorflow-serving-api==[^ ]*' scripts/image-constraints.txt)
    if [ -n "${INSTALL_WHEELHOUSE:-}" ]; then
        if ! ls "$INSTALL_WHEELHOUSE"/sagemaker_tfs-*.whl >/dev/null 2>&1; then
            echo "install: INSTALL_WHEELHOUSE=$INSTALL_WHEELHOUSE holds no sagemaker_tfs wheel: make it with" \
                 "scripts/wheelhouse.sh (scripts/build-image.sh does, before building the image)" >&2
            exit 1
        fi
        pip+=(--no-index --find-links "$INSTALL_WHEELHOUSE")
        "${pip[@]}" "${constraints[@]}" --upgrade pip
        "${pip[@]}" "${constraints[@]}" sagemaker-tfs sagemaker-tfs-tensorflow-protos
    else
        "${pip[@]}" "${constraints[@]}" --upgrade pip
        # Built from a copy, so that setuptools leaves no build/ folder (stale files included) in the source tree.
        src=$(mktemp -d)
        trap 'rm -rf "$src"' EXIT
        tar -c --exclude='*.egg-info' --exclude=__pycache__ pyproject.toml setup.py README.md LICENSE NOTICE \
            container tensorflow-protos | tar -x -C "$src"
        # the commit the wheel names (setup.py): the copy has no .git
        commit=$(python3 container/sagemaker_tfs/shared/build_info.py)
        SAGEMAKER_TFS_BUILD_COMMIT=$commit "${pip[@]}" "${constraints[@]}" "$src" "$src/tensorflow-protos"
    fi
    # tensorflow-serving-api requires tensorflow: its protos and stubs only, without its dependencies
    "${pip[@]}" --no-deps "$tfs_api"
    rm -f "$venv/bin/tfs-model-server"  # the embedded model server needs TensorFlow, which the image has not
    exit 0
fi

spec=".[model-server,s3,test,examples]"
stamp="$venv/.install-stamp"
want="$(sha256sum pyproject.toml | cut -d' ' -f1) $spec"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "install: pip install -e '$spec' into $venv" >&2
    "${pip[@]}" --upgrade pip
    "${pip[@]}" -e "$spec"
    echo "$want" > "$stamp"
fi
