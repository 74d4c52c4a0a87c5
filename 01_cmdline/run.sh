#!/usr/bin/env bash
# Mode 01: profile an unchanged program. Usage: bash 01_cmdline/run.sh [device] [-- program args...]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export PYTHONPATH="$(dirname "$here")${PYTHONPATH:+:$PYTHONPATH}"
source "$(dirname "$here")/common/lab_python.sh" cmdline  # sets PYTHON: $PYTHON, else the lab's .nox environment
exec "$PYTHON" "$here/src/profile_app.py" "$@"
