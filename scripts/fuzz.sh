#!/usr/bin/env bash
# scripts/fuzz.sh [TARGET] [SECONDS] [RUNS]: a fuzzing campaign of one harness (fuzz/targets/TARGET.py) or, without
# TARGET (or with "all"), of each in turn. Each stops after SECONDS (default 1800) or RUNS executions (default
# 1,000,000; 0 for no limit), whichever comes first; then its corpus in fuzz/corpus/ is minimised with the new
# inputs, replayed, and its coverage measured. Findings are left in build/fuzz/TARGET/ (crash-*, timeout-*,
# oom-*); the exit status is 1 when there is one. docs/operations.md, "Fuzzing".
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh
.venv/bin/python -c 'import atheris, coverage' 2>/dev/null || .venv/bin/python -m pip install -q -e '.[fuzz]'
target=${1:-all}
seconds=${2:-1800}
runs=${3:-1000000}
if [ "$target" = all ]; then
    mapfile -t chosen < <(.venv/bin/python -m fuzz list)
else
    chosen=("$target")
fi
status=0
for name in "${chosen[@]}"; do
    .venv/bin/python -m fuzz campaign "$name" --seconds "$seconds" --runs "$runs" || status=1
done
exit $status
