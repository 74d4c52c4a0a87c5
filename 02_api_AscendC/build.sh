#!/usr/bin/env bash
# Build add_custom: bash build.sh [--device N]. RUN_MODE comes from the machine (npu with CANN + an NPU,
# portable otherwise); override with RUN_MODE=portable|npu bash build.sh. The npu build is for the SoC
# of logical device N (default 0); SOC_VERSION=Ascend910B3 skips detection.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export PYTHONPATH="$(dirname "$here")${PYTHONPATH:+:$PYTHONPATH}"
source "$(dirname "$here")/common/lab_python.sh" ascendc  # sets PYTHON: $PYTHON, else the lab's .nox environment
exec "$PYTHON" -m common.modes.ascendc build "$@"
