#!/usr/bin/env bash
# Build and check a model.tar.gz: scripts/package.sh EXPORT_DIR [CODE_DIR] [OUTPUT]
#   EXPORT_DIR holds numbered version folders (EXPORT_DIR/1/saved_model.pb); CODE_DIR holds inference.py,
#   requirements.txt, lib/. Check an existing archive with: .venv/bin/sagemaker-tfs package-model check model.tar.gz
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
"$repo/scripts/install.sh"
export_dir=${1:?usage: $0 EXPORT_DIR [CODE_DIR] [OUTPUT]}
args=(package-model build "$export_dir" -o "${3:-model.tar.gz}")
[ -n "${2:-}" ] && args+=(--code "$2")
exec "$repo/.venv/bin/sagemaker-tfs" "${args[@]}"
