#!/usr/bin/env bash
# Profile each variant's offline model and print the report:
#   bash run.sh [device] [variant|all] [--acl-prof] [--workload FILE] [--threads N]
# npu: pyACL under msprof (or acl.prof with --acl-prof); anywhere else: ONNX Runtime's profiler.
set -euo pipefail
MODE_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export PYTHONPATH="$(dirname "$MODE_DIR")${PYTHONPATH:+:$PYTHONPATH}"  # keep CANN's pyACL (set_env.sh) importable
source "$(dirname "$MODE_DIR")/common/lab_python.sh" pyacl  # sets PYTHON: $PYTHON, else the lab's .nox environment
exec "$PYTHON" -m common.modes.pyacl "$@"
