#!/usr/bin/env bash
# Build the offline model of each precision variant:
#   bash build_model.sh [default|fp16-io|fp32|all] [--workload FILE] [--device N]
# npu: ATC -> model/npu/*.om, for the SoC of logical device N (default 0; SOC_VERSION overrides);
# anywhere else: ONNX Runtime -> model/portable/*.opt.onnx.
set -euo pipefail
MODE_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export PYTHONPATH="$(dirname "$MODE_DIR")${PYTHONPATH:+:$PYTHONPATH}"  # keep CANN's pyACL (set_env.sh) importable
source "$(dirname "$MODE_DIR")/common/lab_python.sh" pyacl  # sets PYTHON: $PYTHON, else the lab's .nox environment
exec "$PYTHON" -m common.modes.pyacl.build_model "$@"
