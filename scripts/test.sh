#!/usr/bin/env bash
# The test command: sets up what it needs (scripts/install.sh), then runs the whole suite with pytest, in two
# processes (pytest-xdist; most of a stack test is waiting, so two share the cores well; test/conftest.py keeps the
# tests of a shared fixture in one). A process that crashes fails its test and ends the run, rather than being
# replaced (--max-worker-restart=0: a replacement can wait forever for work its group no longer has). Extra
# arguments go to pytest (e.g. scripts/test.sh test/unit -k csv, or -n 0 for one process).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh
exec .venv/bin/python -m pytest -n "${TEST_PROCESSES:-2}" --max-worker-restart=0 "$@"
