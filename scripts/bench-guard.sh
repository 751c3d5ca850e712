#!/usr/bin/env bash
# The speed guard for changes on the request path (CONTRIBUTING, "Before you stop"): this tree against BASE_REV in
# about 60 s, side by side on the stand-in model server, in alternating rounds: the no-script route and the
# pass-through pair at c8, 3 rounds of 4 s each. Prints each ratio (the median of its rounds) and exits 1 on a loss
# beyond 10%; refuses to run on a busy machine, whose figures would measure the neighbour.
#   scripts/bench-guard.sh BASE_REV
# GUARD_ROUNDS, GUARD_SECONDS and GUARD_LOSS (0.10) change the rounds, their length and the loss allowed.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -ne 1 ]; then
    echo "usage: scripts/bench-guard.sh BASE_REV   (a commit to compare this tree with, e.g. origin/main or fa3611f)" >&2
    exit 2
fi
base=$1
git rev-parse --verify --quiet "$base^{commit}" >/dev/null || { echo "bench-guard: $base is not a commit here" >&2; exit 2; }
cores=$(nproc)
load=$(cut -d' ' -f1 /proc/loadavg)
if awk -v load="$load" -v cores="$cores" 'BEGIN { exit !(load > 0.5 * cores) }'; then
    echo "bench-guard: the machine is busy (load average $load on $cores cores, over 0.5 per core): its figures" \
         "would measure the neighbour. Stop the tests, builds or fuzzing running beside it, and run it again." >&2
    exit 3
fi
scripts/install.sh
exec .venv/bin/python scripts/benchmark_proxy.py --before "$base" --targets "no script,pair" --concurrency 8 \
    --rounds "${GUARD_ROUNDS:-3}" --duration "${GUARD_SECONDS:-4}" --guard "${GUARD_LOSS:-0.10}"
