#!/usr/bin/env bash
# Mode 04, dynamic profiling: a training job started with PROF_CONFIG_PATH, profiled on demand (NPU: torch_npu's watcher; portable: the lesson's).
# Usage: bash 04_pyTorch/run_dynamic.sh [device] [--workload FILE]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export KINETO_LOG_LEVEL="${KINETO_LOG_LEVEL:-5}"
export PYTHONPATH="$(dirname "$here")${PYTHONPATH:+:$PYTHONPATH}"
source "$(dirname "$here")/common/lab_python.sh" pytorch  # sets PYTHON: $PYTHON, else the lab's .nox environment
exec "$PYTHON" -m common.modes.pytorch.dynamic "$@"
