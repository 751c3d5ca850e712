#!/usr/bin/env bash
# Installs what the container, the tests and the examples need, on Debian/Ubuntu (this machine, CI, the
# Dockerfile): nginx (and wrk for the benchmarks) from apt, and the Python environment in .venv at the repo root.
# Idempotent and quick when nothing changed. INSTALL_EXTRAS selects pip extras ("test,examples" by default;
# the Docker image installs none).
set -euo pipefail
cd "$(dirname "$0")/.."
extras=${INSTALL_EXTRAS-test,examples}
apt_packages=${INSTALL_APT_PACKAGES-nginx wrk}

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

[ -x .venv/bin/python ] || python3 -m venv .venv
spec="."; [ -n "$extras" ] && spec=".[$extras]"
stamp=".venv/.install-stamp"
want="$(sha256sum pyproject.toml | cut -d' ' -f1) $spec"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "install: pip install -e '$spec' into .venv" >&2
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -e "$spec"
    echo "$want" > "$stamp"
fi
