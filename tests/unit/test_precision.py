"""Per-op precision (python -m common precision): the metrics and the first-divergence rule on known arrays, the
exporter's scope names, and on real models: TinyMLP's fp32 paths name no op, a layer whose outputs exceed fp16's
range is named first by every fp16 path (torch .half() and an ONNX Runtime fp16 graph) and by no fp32 path."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from helpers import ROOT

from common.analyze.precision import FP16, FP32, OpOutput, compare_ops, first_divergence_line, judge, op_metrics
from common.collect import precision as collect
from common.workload import load_workload, tiny_mlp

OVERFLOW = ROOT / "tests" / "apps" / "precision_fp16_overflow.py"


def test_metrics_are_msaccucmps_over_the_values_finite_in_both() -> None:
    ref = np.array([1.0, -2.0, 0.0, 4.0])
    cand = np.array([1.1, -2.0, 0.5, np.inf])
    m = op_metrics(cand, ref)
    c, r = np.array([1.1, -2.0, 0.5]), np.array([1.0, -2.0, 0.0])
    assert m["cosine"] == pytest.approx(c @ r / (np.linalg.norm(c) * np.linalg.norm(r)))
    assert m["max_abs_err"] == pytest.approx(0.5)
    assert m["max_rel_err"] == pytest.approx(0.1)  # the zero reference element has no relative error
    assert m["nonfinite_share"] == 0.25
    assert m["scale"] == 4.0  # the reference's own finite values, the overflowed one included


def test_judge_names_what_leaves_the_tolerance() -> None:
    ok = {"cosine": 1.0, "max_abs_err": 5e-4, "max_rel_err": 0.0, "nonfinite_share": 0.0, "scale": 0.1}
    assert judge(ok, FP32) == ""
    assert "max abs err" in judge({**ok, "max_abs_err": 2e-3}, FP32)  # msprobe's 0.001 below scale 1
    assert judge({**ok, "max_abs_err": 2e-3, "scale": 10.0}, FP32) == ""  # 0.001 x 10 above scale 1
    assert judge({**ok, "max_abs_err": 0.1, "scale": 10.0}, FP16) == ""  # fp16: 2% of the scale
    assert "cosine" in judge({**ok, "cosine": 0.98}, FP16)
    assert "non-finite" in judge({**ok, "nonfinite_share": 0.5}, FP16)
    assert judge({**ok, "nonfinite_share": 0.5}, FP16, reference_nonfinite=0.5) == ""  # as the reference has it
    assert "cosine nan" in judge({**ok, "cosine": math.nan}, FP16)


def test_the_first_op_out_of_tolerance_is_named_with_its_path_and_what_it_computes() -> None:
    ref = {"a": np.ones(4), "b": np.ones(4), "c": np.ones(4)}
    outputs = [
        OpOutput("a", "A()", np.ones(4)),
        OpOutput("b", "Linear(2)", np.full(4, 2.0)),
        OpOutput("c", "C()", np.full(4, 3.0)),
        OpOutput("d", "D()", np.ones(4)),
    ]
    result = compare_ops("cand", "how", FP32, outputs, ref)
    assert [r.ok for r in result.rows] == [True, False, False]
    assert result.first_divergent.path == "b"
    assert first_divergence_line(result).startswith("cand: first divergent op: b (Linear(2)), op 2 of 3: ")
    assert result.unmatched == ["d (D()): no reference op of that path"]


@pytest.mark.parametrize(
    ("name", "path"),
    [
        ("/model/net/net.0/Gemm", "net.0"),
        ("/model/blocks/blocks.0/act/Erf", "blocks.0.act"),
        ("InsertedPrecisionFreeCast_/model/net/net.3/Mul_1_output_0", "net.3"),
        ("/model/net/net.1/Mul_1_output_0", "net.1"),
        ("Gelu_token_0", None),
        ("/model/Add", None),
    ],
)
def test_scope_names_give_module_paths(name: str, path: str | None) -> None:
    assert collect.scope_path(name) == path


def _by_name(work, device: str = "cpu") -> dict:
    reference = collect.reference_outputs(work)
    return {
        name: compare_ops(name, how, FP16 if precision == "fp16" else FP32, outputs, reference)
        for name, how, precision, outputs in collect.torch_candidates(work, device)
    }


def test_tiny_mlp_torch_paths_name_no_divergent_op() -> None:
    results = _by_name(tiny_mlp())
    assert set(results) == {"torch fp32", "torch fp16"}
    fp32 = results["torch fp32"]
    assert [r.path for r in fp32.rows] == [f"net.{i}" for i in range(7)]
    assert fp32.first_divergent is None and all(r.max_abs_err == 0.0 for r in fp32.rows)  # the same CPU forward
    assert results["torch fp16"].first_divergent is None  # TinyMLP's values stay far inside fp16's range
    assert all(0 < r.abs_err_of_scale < FP16.rel for r in results["torch fp16"].rows)


def test_a_layer_beyond_fp16s_range_is_named_by_the_fp16_torch_path_only() -> None:
    results = _by_name(load_workload(OVERFLOW))
    assert results["torch fp32"].first_divergent is None
    first = results["torch fp16"].first_divergent
    assert first is not None and first.path == "amplify"
    assert first.computes.startswith("Linear(in_features=64") and first.nonfinite_share > 0


def _export(model, x, path: Path, exporter: str) -> None:
    """As 03's export_onnx does (the model under a wrapper attribute ``model``), with either exporter: the TorchScript
    one at opset 17, or the dynamo one at opset 18 with its nodes named by module as the lab names them."""
    import onnx
    import torch

    from common.modes.pyacl.export import name_by_module

    class Wrapper(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *inputs):
            return (self.model(*inputs),)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wrapper = Wrapper().train(model.training)  # the export leaves every module in the wrapper's mode
        torch.onnx.export(
            wrapper,
            x,
            str(path),
            opset_version=18 if exporter == "dynamo" else 17,
            input_names=["x"],
            output_names=["y"],
            dynamo=exporter == "dynamo",
            verbose=False,
        )
    if exporter == "dynamo":
        graph = onnx.load(str(path))
        name_by_module(graph)
        onnx.save(graph, str(path))


@pytest.mark.parametrize("exporter", ["torchscript", "dynamo"])
def test_onnx_runtime_fp16_graph_names_the_overflowing_layer_and_its_fp32_graph_none(
    tmp_path: Path, exporter: str
) -> None:
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    work = load_workload(OVERFLOW)
    model, x = work.fp32_copy()
    fp32_file, fp16_file = tmp_path / "fp32.onnx", tmp_path / "fp16.onnx"
    _export(model, x, fp32_file, exporter)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        onnx.save(convert_float_to_float16(onnx.load(str(fp32_file)), keep_io_types=True), str(fp16_file))
    leaves = collect.leaf_modules(work.build_model())
    reference = collect.reference_outputs(work)
    feeds = {"x": x[0].numpy()}
    results = {}
    for name, path, tol in (("fp32", fp32_file, FP32), ("fp16", fp16_file, FP16)):
        outputs, unmatched = collect.onnx_op_outputs(path, feeds, leaves, fp32_file)
        assert [o.path for o in outputs] == ["inp", "act", "amplify", "shrink"], unmatched
        results[name] = compare_ops(name, "onnxruntime", tol, outputs, reference)
    assert results["fp32"].first_divergent is None
    assert results["fp16"].first_divergent.path == "amplify"
    assert "as ONNX Gemm" in results["fp16"].first_divergent.computes


class _Brief(__import__("torch").nn.Module):
    """Linear -> ReLU -> Linear(huge) -> LayerNorm -> Linear: ONNX Runtime fuses the first Linear with the ReLU."""

    def __init__(self) -> None:
        import torch

        super().__init__()
        torch.manual_seed(0)
        self.inp, self.relu, self.big = torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64)
        self.norm, self.out = torch.nn.LayerNorm(64), torch.nn.Linear(64, 8)
        with torch.no_grad():
            self.big.weight.mul_(3000.0)

    def forward(self, x):
        return self.out(self.norm(self.big(self.relu(self.inp(x)))))


class _InPlaceCNN(__import__("torch").nn.Module):
    """Conv -> BatchNorm -> Hardswish(inplace), Conv -> BatchNorm -> ReLU(inplace), a head: mobilenet's pattern."""

    def __init__(self) -> None:
        import torch
        from torch import nn

        super().__init__()
        torch.manual_seed(0)
        self.features = nn.Sequential(
            nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.Hardswish(inplace=True)),
            nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(inplace=True)),
        )
        self.head = nn.Linear(8 * 8 * 8, 4)
        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, nn.BatchNorm2d):  # statistics that move the values: BN's output has negatives
                    m.running_mean.uniform_(-0.5, 0.5)
                    m.running_var.uniform_(0.5, 2.0)
                    m.bias.uniform_(-0.5, 0.5)
        self.eval()

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


def _fused_fp32(model, x, tmp_path: Path, exporter: str) -> tuple[Path, Path]:
    """(the exported graph, ONNX Runtime's optimized copy as 03's fp32 variant builds it: EXTENDED, fusions on)."""
    import onnxruntime as ort

    exported, built = tmp_path / "exported.onnx", tmp_path / "fp32.opt.onnx"
    _export(model, x, exported, exporter)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(built)
    ort.InferenceSession(str(exported), options, providers=["CPUExecutionProvider"])
    return exported, built


def _reference(model, x) -> dict:
    return {op.path: op.array for op in collect.torch_op_outputs(model, x)}


@pytest.mark.parametrize("exporter", ["torchscript", "dynamo"])
def test_a_fused_gemm_relu_is_compared_where_the_fusion_ends_and_the_fp32_graph_names_no_op(
    tmp_path: Path, exporter: str
) -> None:
    import torch

    model, x = _Brief().eval(), (torch.randn(16, 32, generator=torch.Generator().manual_seed(1)),)
    exported, built = _fused_fp32(model, x, tmp_path, exporter)
    outputs, unmatched = collect.onnx_op_outputs(built, {"x": x[0].numpy()}, collect.leaf_modules(model), exported)
    result = compare_ops("03 fp32", "onnxruntime", FP32, outputs, _reference(model, x))
    assert result.first_divergent is None, first_divergence_line(result)
    assert (result.rows[0].path, result.rows[0].computes) == ("inp+relu", "fused as FusedGemm"), unmatched
    assert [r.path for r in result.rows[1:]] == ["big", "norm", "out"]


def test_a_captured_output_is_a_copy_that_an_in_place_op_after_it_cannot_change() -> None:
    import torch

    model, x = _InPlaceCNN(), (torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(1)),)
    ref = _reference(model, x)
    with torch.no_grad():
        bn_out = model.features[0][1](model.features[0][0](x[0]))
    np.testing.assert_array_equal(ref["features.0.1"], bn_out.numpy())  # the BatchNorm's own output ...
    assert (ref["features.0.1"] < -0.375).any()  # ... with the values Hardswish(inplace=True) then rewrote


@pytest.mark.parametrize("exporter", ["torchscript", "dynamo"])
def test_fused_conv_bn_relu_with_in_place_activations_names_no_op_on_the_fp32_graph(
    tmp_path: Path, exporter: str
) -> None:
    import torch

    model, x = _InPlaceCNN(), (torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(1)),)
    exported, built = _fused_fp32(model, x, tmp_path, exporter)
    outputs, unmatched = collect.onnx_op_outputs(built, {"x": x[0].numpy()}, collect.leaf_modules(model), exported)
    result = compare_ops("03 fp32", "onnxruntime", FP32, outputs, _reference(model, x))
    assert result.first_divergent is None, first_divergence_line(result)
    fused = [r for r in result.rows if r.computes == "fused as FusedConv"]
    assert fused and fused[-1].path.endswith("features.1.2"), [r.path for r in result.rows]
    assert "features.1.0" not in [r.path for r in result.rows]  # the conv alone has no output in the fused graph


def test_a_module_fused_into_an_op_no_leaf_module_ends_is_not_compared() -> None:
    """conv's value vanished into an op that writes the block's residual Add (no leaf module's output): the conv is
    not compared, and said so; the fused op is not compared with the conv's reference."""
    producers = {"/model/block/Add_output_0": (3, "FusedConv"), "/model/head/Gemm_output_0": (4, "Gemm")}
    outputs = {"block.conv": "/model/block/conv/Conv_output_0", "head": "/model/head/Gemm_output_0"}
    found, lines = collect.fused_ops(producers, outputs, "the built graph")
    assert found == {"head": (("block.conv",), "/model/head/Gemm_output_0", "Gemm")}
    outputs = {"head": "/model/head/Gemm_output_0", "block.conv": "/model/block/conv/Conv_output_0"}
    found, lines = collect.fused_ops(producers, outputs, "the built graph")
    assert list(found) == ["head"] and lines[0].startswith("block.conv not compared: its output")


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("MSPROF_LAB_WORKLOAD", None)
    return subprocess.run(
        [sys.executable, "-m", "common", "precision", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_names_the_layer_writes_the_report_and_exits_1(tmp_path: Path) -> None:
    out = tmp_path / "precision"
    run = _cli("--workload", str(OVERFLOW), "--torch-only", "--out", str(out))
    assert run.returncode == 1, run.stderr
    assert "-> torch fp32: no divergent op" in run.stdout
    named = "-> torch fp16: first divergent op: amplify (Linear(in_features=64, out_features=64, bias=True))"
    assert named in run.stdout
    assert ".half()" in run.stdout  # the fp16 candidate says how it was made
    page = (out / "report.html").read_text()
    assert 'data-chart="precision-growth"' in page and "amplify" in page
    assert (out / ".msprof_lab").is_file() and (out / "report.txt").read_text().startswith("=== msprof lab")


def test_cli_builds_03s_models_then_names_the_layer_in_fp16_and_no_op_in_fp32(tmp_path: Path) -> None:
    """One command, nothing built before: the overflow workload's 03 variants are built first (as nox -s pyacl
    builds them), then torch's fp16 path names ``amplify``, 03's fp16 variants no earlier op, no fp32 path any op."""
    work = tmp_path / "overflow_fresh.py"  # a workload 03 has never built
    work.write_text(OVERFLOW.read_text())
    run = _cli("--workload", str(work), "--out", str(tmp_path / "p"))
    assert run.returncode == 1, run.stdout[-2000:] + run.stderr[-2000:]
    assert "03_api_pyAcl/build_model.sh all --workload" in run.stdout
    assert "-> torch fp16: first divergent op: amplify (" in run.stdout
    for path in ("03 default", "03 fp16-io"):  # ONNX Runtime's CPU provider has no fp16 Gemm: it casts back to fp32
        said = next(line for line in run.stdout.splitlines() if line.startswith(f"-> {path}: "))
        assert "no divergent op" in said or "first divergent op: amplify (" in said, said  # never an earlier op
    for path in ("torch fp32", "03 fp32"):
        assert f"-> {path}: no divergent op" in run.stdout, path
    again = _cli("--workload", str(work), "--out", str(tmp_path / "p"))  # kept: the build says so, nothing redone
    assert again.returncode == 1 and "up to date" in again.stdout


def test_cli_foreign_out_folder_is_one_line(tmp_path: Path) -> None:
    foreign = tmp_path / "mine"
    foreign.mkdir()
    run = _cli("--torch-only", "--out", str(foreign))
    assert run.returncode == 2 and "was not made by msprof lab" in run.stderr and "Traceback" not in run.stderr


def test_acl_dump_config_and_conversion_argv() -> None:
    config = collect.acl_dump_config("/tmp/dump", "tiny_mlp_default")
    assert config == {
        "dump": {
            "dump_path": "/tmp/dump",
            "dump_list": [{"model_name": "tiny_mlp_default"}],
            "dump_mode": "output",
            "dump_op_switch": "off",
            "dump_data": "tensor",
        }
    }
    layers = collect.acl_dump_config("d", "m", ["Gemm_1"])["dump"]["dump_list"]
    assert layers == [{"model_name": "m", "layer": ["Gemm_1"]}]
    assert collect.msaccucmp_convert_argv("python3", "/x/msaccucmp.py", "in", "out") == [
        "python3",
        "/x/msaccucmp.py",
        "convert",
        "-d",
        "in",
        "-out",
        "out",
        "-t",
        "npy",
    ]


@pytest.mark.parametrize("shape", ["", ".2x2"], ids=["<name>.output.0.npy", "<name>.output.0.<shape>.npy"])
def test_converted_dump_files_map_to_leaf_modules_by_their_onnx_node_names(tmp_path: Path, shape: str) -> None:
    """A dump names each op as ATC built it, "." "/" "\\" and spaces spelt "_"; msaccucmp appends
    ".output.<i>.npy", or ".output.<i>.<shape>.npy" (as CANN 8.0's converter may). The module's last node wins;
    an op no node names (ATC's own Cast) is listed."""
    import onnx
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("Gemm", ["x", "w", "b"], ["/model/net/net.0/Gemm_output_0"], name="/model/net/net.0/Gemm"),
        helper.make_node("Erf", ["/model/net/net.0/Gemm_output_0"], ["e"], name="/model/net/net.1/Erf"),
        helper.make_node("Mul", ["e", "e"], ["y"], name="/model/net/net.1/Mul_1"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])],
    )
    onnx.save(helper.make_model(graph), tmp_path / "m.onnx")
    npy = tmp_path / "npy"
    npy.mkdir()
    stamp = 1700000000000000
    files = {
        "MatMulV2._model_net_net_0_Gemm.3.0.{t}.output.0{s}.npy": 1.0,  # ATC's op type, the node's name
        "Erf._model_net_net_1_Erf.4.0.{t}.output.0{s}.npy": 2.0,
        "Mul._model_net_net_1_Mul_1.5.0.{t}.output.0{s}.npy": 3.0,  # net.1's last node: its output
        "Mul._model_net_net_1_Mul_1.5.0.{t}.input.0{s}.npy": 9.0,  # an input: not an op's output
        "Cast.trans_Cast_7.6.0.{t}.output.0{s}.npy": 4.0,
    }  # inserted by ATC: no node of the model
    for i, (name, value) in enumerate(files.items()):
        np.save(npy / name.format(t=stamp + i, s=shape), np.full((2, 2), value, np.float16))
    leaves = {"net.0": "Linear", "net.1": "GELU"}
    outputs, unmatched = collect.dump_op_outputs(npy, tmp_path / "m.onnx", leaves)
    assert [(o.path, o.computes, float(o.array[0, 0]), o.array.dtype) for o in outputs] == [
        ("net.0", "Linear as the device's MatMulV2", 1.0, np.float32),
        ("net.1", "GELU as the device's Mul", 3.0, np.float32),
    ]
    assert unmatched == [
        ("1 dumped Cast op(s) named by no node of a leaf module (ATC fused or renamed them), e.g. trans_Cast_7")
    ]
    assert collect.dump_name("/model/net/net.0/Gemm") == "_model_net_net_0_Gemm"


@pytest.mark.parametrize("folder_name", ["m", "main_graph"], ids=["the .om's stem", "the model's internal name"])
def test_dump_data_dir_is_the_documented_folder_and_an_empty_dump_is_one_line(tmp_path: Path, folder_name: str) -> None:
    from common.errors import LabError

    with pytest.raises(LabError, match="the ACL dump wrote nothing for model m under"):
        collect.dump_data_dir(tmp_path, "m")
    folder = tmp_path / "20261202050000" / "3" / folder_name / "1" / "0"  # {time}/{device}/{model}/{model_id}/{index}
    folder.mkdir(parents=True)
    assert collect.dump_data_dir(tmp_path, "m") == folder


def test_the_chart_marks_and_names_each_paths_first_divergent_op_and_nothing_for_a_path_without_one() -> None:
    import re

    from common.render.html import report_page
    from common.render.precision import precision_report

    ref = {"a": np.ones(4), "b": np.ones(4), "c": np.ones(4)}
    diverging = compare_ops(
        "torch fp16",
        "how",
        FP16,
        [
            OpOutput("a", "A()", np.ones(4)),
            OpOutput("b", "Linear(2)", np.full(4, 2.0)),
            OpOutput("c", "C()", np.full(4, 3.0)),
        ],
        ref,
    )
    clean = compare_ops("torch fp32", "how", FP32, [OpOutput(p, "X()", np.ones(4)) for p in "abc"], ref)
    html = report_page(precision_report([clean, diverging], ["banner", "reference"]))
    chart = re.search(r"<svg[^>]*data-chart=\"precision-growth\".*?</svg>", html, re.DOTALL).group(0)
    markers = re.findall(r"<g class=\"first-divergent\" data-series=\"([^\"]*)\" data-op=\"([^\"]*)\">(.*?)</g>", chart)
    assert [(series, op) for series, op, _ in markers] == [("torch fp16", "b")]  # b, not the later c; none for fp32
    assert ">first divergent: b</text>" in markers[0][2]


def test_a_variant_says_which_ops_onnx_runtimes_cpu_provider_computed_in_fp32() -> None:
    """ONNX Runtime's CPU provider has no fp16 Gemm: it casts around it (InsertedPrecisionFreeCast_), and the
    variant's description says so, since an overflow inside such an op cannot show on that path here."""
    import onnx
    from onnx import TensorProto, helper

    from common.collect.precision import cpu_fp32_note, cpu_fp32_ops

    nodes = [
        helper.make_node("Cast", ["x"], ["x32"], name="InsertedPrecisionFreeCast_/m/Gemm_input_0", to=1),
        helper.make_node("Gemm", ["x32", "w", "b"], ["y32"], name="/m/Gemm"),
        helper.make_node("Cast", ["y32"], ["y"], name="InsertedPrecisionFreeCast_/m/Gemm_output_0", to=10),
        helper.make_node("Relu", ["y"], ["z"], name="/m/Relu"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, 4])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT16, [2, 4])],
    )
    assert cpu_fp32_ops(graph) == {"Gemm": 1}  # the fp16 Relu after it is not counted, nor the Casts
    note = cpu_fp32_note(cpu_fp32_ops(graph))
    assert "computes 1 ops of it in fp32 (Gemm x1" in note and "not fp16 arithmetic" in note
    plain = helper.make_graph(nodes[1:2], "g", [], [])
    assert cpu_fp32_ops(plain) == {} and cpu_fp32_note({}) == ""
    assert onnx  # the graph helpers come from onnx
