#!/usr/bin/env bash
# The test command: sets up what it needs (scripts/install.sh), then runs the whole suite with pytest.
# Extra arguments go to pytest (e.g. scripts/test.sh test/unit -k csv).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh
exec .venv/bin/python -m pytest "$@"
