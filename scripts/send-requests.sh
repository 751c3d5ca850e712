#!/usr/bin/env bash
# Send example requests to a running container: scripts/send-requests.sh [BASE_URL]
# (default http://localhost:8080; the requests suit half_plus_three, y = 0.5 * x + 3)
set -uo pipefail
url=${1:-http://localhost:8080}
show() { echo "\$ $*"; "$@"; echo; echo; }
show curl -sS -w ' [%{http_code}]' "$url/ping"
show curl -sS "$url/invocations" -H 'Content-Type: application/json' -d '{"instances": [1.0, 2.0, 5.0]}'
show curl -sS "$url/invocations" -H 'Content-Type: application/json' -d '[[1.0], [2.0], [5.0]]'
show curl -sS "$url/invocations" -H 'Content-Type: application/jsonlines' -H 'Accept: application/jsonlines' \
    --data-binary $'[1.0, 2.0]\n[5.0, 6.0]\n'
show curl -sS "$url/invocations" -H 'Content-Type: text/csv' -H 'Accept: text/csv' --data-binary $'1.0,2.0,5.0\n3.0,4.0,6.0\n'
show curl -sS "$url/invocations" -H 'Content-Type: application/json' \
    -H 'X-Amzn-SageMaker-Custom-Attributes: tfs-method=predict' -d '{"instances": [[1.0], [2.0]]}'
show curl -sS -w ' [%{http_code}]' "$url/invocations" -H 'Content-Type: application/x-unknown' -d 'x'
