#!/usr/bin/env bash
# Stop the container started by scripts/start.sh: scripts/stop.sh [PORT]   (drains in-flight requests)
set -euo pipefail
docker stop "sagemaker-tfs-${1:-8080}"
