#!/usr/bin/env bash
# Mode 04 · DDP: torchrun + DistributedDataParallel, one profile per rank, then the cluster view.
# The lesson is src/ddp_with_profiler.py; common/modes/pytorch/ddp.py starts it under torchrun and checks the run.
# Usage: bash 04_pyTorch/run_ddp.sh [nproc] [device_list] [--slow-rank R] [--output DIR] ...
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export PYTHONPATH="$(dirname "$here")${PYTHONPATH:+:$PYTHONPATH}"
source "$(dirname "$here")/common/lab_python.sh" ddp  # sets PYTHON: $PYTHON, else the lab's .nox environment
exec "$PYTHON" -m common.modes.pytorch.ddp "$@"
