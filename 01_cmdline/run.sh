#!/usr/bin/env bash
# Mode 01: profile an unchanged program. Usage: bash 01_cmdline/run.sh [device] [-- program args...]
#
# On an NPU this runs, for device <dev> (the lab's argv, never a shell; common/collect/npu_commands.py):
#   msprof --output=01_cmdline/prof_out --ascendcl=on --runtime-api=on --task-time=on --task-memory=on \
#       --ai-core=on --aic-metrics=PipeUtilization --aicpu=on --msproftx=on \
#       python3 01_cmdline/src/model.py --device npu:<dev> --save-output 01_cmdline/prof_out/output.npy
# then checks what msprof exported. Elsewhere the portable launcher wraps the same program.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export PYTHONPATH="$(dirname "$here")${PYTHONPATH:+:$PYTHONPATH}"
source "$(dirname "$here")/common/lab_python.sh" cmdline  # sets PYTHON: $PYTHON, else the lab's .nox environment
exec "$PYTHON" -m common.modes.cmdline "$@"
