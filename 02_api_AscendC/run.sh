#!/usr/bin/env bash
# Run add_custom 20 times after a warm-up, verify every element, profile, report.
#   bash run.sh [device] [--timeout S]     device: NPU id, default 0 (the portable twin runs on the host)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export PYTHONPATH="$(dirname "$here")${PYTHONPATH:+:$PYTHONPATH}"
source "$(dirname "$here")/common/lab_python.sh" ascendc  # sets PYTHON: $PYTHON, else the lab's .nox environment
exec "$PYTHON" -m common.modes.ascendc run --device "${1:-0}" "${@:2}"
