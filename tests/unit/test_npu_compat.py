"""The NPU path on the versions and chips CANN 8.x users have, checked without an NPU.

torch 2.1-2.4 (what CANN 8.0.x pairs with) and the SoC names npu-smi and SOC_VERSION give.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import load_lesson

export_onnx = load_lesson("03_api_pyAcl/src/export_onnx.py")  # the lesson: the export, torch.onnx.export

from common.backend import is_atlas_a2_a3  # noqa: E402


def test_export_runs_on_torch_2_4_which_has_no_dynamo_argument(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = torch.onnx.export
    seen: dict = {}

    # torch 2.4's signature, parameter for parameter (torch/onnx/utils.py, v2.4.0): no `dynamo`,
    # so a call that passes it fails with "unexpected keyword argument 'dynamo'" as it does there.
    def export_2_4(
        model,
        args,
        f,
        export_params=True,
        verbose=False,
        training=None,
        input_names=None,
        output_names=None,
        operator_export_type=None,
        opset_version=None,
        do_constant_folding=True,
        dynamic_axes=None,
        keep_initializers_as_inputs=None,
        custom_opsets=None,
        export_modules_as_functions=False,
        autograd_inlining=True,
    ):
        seen.update(input_names=input_names, output_names=output_names, opset_version=opset_version)
        real(
            model,
            args,
            f,
            input_names=input_names,
            output_names=output_names,
            opset_version=opset_version,
            dynamo=False,
        )

    monkeypatch.setattr(torch.onnx, "export", export_2_4)
    model, inputs, _ = export_onnx.load_model(None)
    path = tmp_path / "tiny_mlp.onnx"
    assert export_onnx.export(model, inputs, path) == (["x"], ["y"], "torchscript") and path.is_file()
    assert seen == {"input_names": ["x"], "output_names": ["y"], "opset_version": export_onnx.OPSET["torchscript"]}


def test_export_uses_the_dynamo_exporter_where_torch_has_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list = []

    def export_2_9(
        model, args=(), f=None, *, input_names=None, output_names=None, opset_version=None, dynamo=True, verbose=None
    ):  # torch >= 2.9: dynamo by default
        seen.append((dynamo, opset_version))

    monkeypatch.setattr(torch.onnx, "export", export_2_9)
    model, inputs, _ = export_onnx.load_model(None)
    assert export_onnx.export(model, inputs, tmp_path / "m.onnx")[2] == "dynamo"
    assert seen == [(True, 18)]  # opset 18: the dynamo exporter's lowest, the newest ATC accepts


def test_a_model_torch_export_cannot_capture_falls_back_to_the_tracer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    seen: list = []

    def export_2_9(
        model, args=(), f=None, *, input_names=None, output_names=None, opset_version=None, dynamo=True, verbose=None
    ):
        seen.append((dynamo, opset_version))
        if dynamo:  # as torch.export says it of a branch on a tensor's value, the reason chained under its own
            try:
                raise ValueError("Could not guard on data-dependent expression u0 > 4")
            except ValueError as cause:
                raise RuntimeError("Failed to export the model with torch.export.\nstep 1/3") from cause

    monkeypatch.setattr(torch.onnx, "export", export_2_9)
    model, inputs, _ = export_onnx.load_model(None)
    assert export_onnx.export(model, inputs, tmp_path / "m.onnx")[2] == "torchscript"
    assert seen == [(True, 18), (False, 17)]
    assert "(ValueError: Could not guard on data-dependent expression u0 > 4); the TorchScript tracer" in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize(
    ("soc", "a2_a3"),
    [
        # Atlas A2 and A3 by their full names (torch_npu NpuVariables.cpp socVersionMap) ...
        *[
            (name, True)
            for name in (
                "Ascend910B1",
                "Ascend910B2",
                "Ascend910B2C",
                "Ascend910B3",
                "Ascend910B4",
                "Ascend910B4-1",
                "Ascend910_9391",
                "Ascend910_9362",
            )
        ],
        # ... and not the legacy Atlas training chips a prefix "Ascend910B" would also take, nor inference chips.
        *[
            (name, False)
            for name in (
                "Ascend910B",
                "Ascend910ProB",
                "Ascend910A",
                "Ascend310P3",
                "Ascend310B1",
                "Ascend910B5",
                "Ascend910B4-2",
                "",
                None,
            )
        ],
    ],
)
def test_atlas_a2_a3_are_matched_by_their_names(soc: str | None, a2_a3: bool) -> None:
    assert is_atlas_a2_a3(soc) is a2_a3


def test_unsourced_figures_are_labelled_estimates() -> None:
    from common.analyze.bounds.op import DEVICE_PEAKS

    assert DEVICE_PEAKS and all(p.source.startswith("estimate (no published source)") for p in DEVICE_PEAKS.values())
    from common.modes.ascendc import kernel_report

    assert not hasattr(kernel_report, "REFERENCE_910B3")
    table = kernel_report.kernel_table([], "npu", "op_summary", {"block_dim": 8, "block_length": 1024})
    assert "ratio (910B3 estimate)" in table and "an estimate, not measured here" in table


def test_the_npu_group_keeps_numpy_below_2_for_torch_before_2_3() -> None:
    import tomllib

    from helpers import ROOT

    groups = tomllib.loads((ROOT / "pyproject.toml").read_text())["dependency-groups"]
    assert "numpy<2" in groups["npu"]  # torch 2.1 / 2.2 (CANN 8.0.x pairs with 2.1) need numpy 1.x
    assert "numpy<2" not in groups["portable"]  # the portable torch (2.13) takes numpy 2


def test_a_graph_atc_cannot_take_is_refused_naming_the_op() -> None:
    """ATC's ONNX parser takes opsets 9-18 (docs/npu_reference.md, ATC-ONNX): opset 20's one Gelu op, or an op of
    another domain, is named; a graph of opset 18 ops passes."""
    from onnx import TensorProto, helper

    from common.modes.pyacl.export import atc_refusal

    def graph(node, opsets):
        io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in ("x", "y")]
        return helper.make_model(
            helper.make_graph([node], "g", io[:1], io[1:]), opset_imports=[helper.make_opsetid(d, v) for d, v in opsets]
        )

    assert atc_refusal(graph(helper.make_node("Erf", ["x"], ["y"], name="/model/act/Erf"), [("", 18)])) is None
    gelu = atc_refusal(graph(helper.make_node("Gelu", ["x"], ["y"], name="/model/act/Gelu"), [("", 20)]))
    assert gelu == "op Gelu (node /model/act/Gelu) is defined in no ONNX opset up to 18, the newest ATC accepts"
    fused = atc_refusal(
        graph(helper.make_node("FastGelu", ["x"], ["y"], domain="com.microsoft"), [("", 18), ("com.microsoft", 1)])
    )
    assert fused == "op com.microsoft::FastGelu is outside the standard ONNX domain ATC's parser reads"
    assert atc_refusal(graph(helper.make_node("Erf", ["x"], ["y"]), [("", 19)])) == (
        "the graph is ONNX opset 19; ATC accepts opsets 9-18"
    )
