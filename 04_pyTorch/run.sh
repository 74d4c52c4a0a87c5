#!/usr/bin/env bash
# Mode 04: torch_npu.profiler (portable: torch.profiler) with a schedule. Usage: bash 04_pyTorch/run.sh [device]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export KINETO_LOG_LEVEL="${KINETO_LOG_LEVEL:-5}"  # before torch loads: the profiler's own logging stays quiet
export PYTHONPATH="$(dirname "$here")${PYTHONPATH:+:$PYTHONPATH}"
source "$(dirname "$here")/common/lab_python.sh" pytorch  # sets PYTHON: $PYTHON, else the lab's .nox environment
exec "$PYTHON" -m common.modes.pytorch "$@"
