"""The NPU path on the versions and chips CANN 8.x users have, checked without an NPU.

torch 2.1-2.4 (what CANN 8.0.x pairs with) and the SoC names npu-smi and SOC_VERSION give.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import load_lesson

export_onnx = load_lesson("03_api_pyAcl/src/export_onnx.py")
import variants  # noqa: E402 (beside export_onnx, on sys.path once it is loaded)

from common.workload import tiny_mlp  # noqa: E402


def test_export_runs_on_torch_2_4_which_has_no_dynamo_argument(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = torch.onnx.export
    seen: dict = {}

    # torch 2.4's signature, parameter for parameter (torch/onnx/utils.py, v2.4.0): no `dynamo`,
    # so a call that passes it fails with "unexpected keyword argument 'dynamo'" as it does there.
    def export_2_4(model, args, f, export_params=True, verbose=False, training=None, input_names=None,
                   output_names=None, operator_export_type=None, opset_version=None, do_constant_folding=True,
                   dynamic_axes=None, keep_initializers_as_inputs=None, custom_opsets=None,
                   export_modules_as_functions=False, autograd_inlining=True):
        seen.update(input_names=input_names, output_names=output_names, opset_version=opset_version)
        real(model, args, f, input_names=input_names, output_names=output_names, opset_version=opset_version,
             dynamo=False)

    monkeypatch.setattr(torch.onnx, "export", export_2_4)
    monkeypatch.setattr(variants, "MODEL_DIR", tmp_path)
    path = export_onnx.export(variants.ModelFiles(tiny_mlp()))
    assert path == tmp_path / "tiny_mlp.onnx" and path.is_file()
    assert seen == {"input_names": ["x"], "output_names": ["y"], "opset_version": export_onnx.OPSET}
    assert "Gemm" in export_onnx.describe(path)


def test_export_turns_the_dynamo_exporter_off_where_torch_has_it() -> None:
    def export_2_9(model, args=(), f=None, *, input_names=None, dynamo=True):  # torch >= 2.9: dynamo by default
        return None

    def export_2_4(model, args, f, export_params=True, input_names=None):
        return None

    assert export_onnx.exporter_choice(export_2_9) == {"dynamo": False}
    assert export_onnx.exporter_choice(export_2_4) == {}
