"""FLOPs in one home (common.analyze.flops): an ONNX graph's from its own shapes against the model's from torch's
counter (common.collect.flop_count), never op by op."""

from __future__ import annotations

import numpy as np
from helpers import onnx_graph

from common.analyze import flops
from common.collect.flop_count import count_flops, run_shapes


def test_the_graph_is_compared_with_the_model_by_flops():
    """Never op by op: FLOPs per family group, the graph's from its shapes, the model's from torch's counter."""
    from onnx import helper

    from common.workload import FlopCount

    matmul = onnx_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], [("x", [2, 4])], [("w", [4, 3])])
    assert flops.graph_flops(matmul) == ({"matmul": 2 * 2 * 4 * 3}, {})
    same = flops.flops_verdict(FlopCount({"matmul": 48.0}), *flops.graph_flops(matmul))
    assert same.ok and "matrix products: model 48, graph 48 FLOP per forward (off by 0.00%" in same.detail
    other = flops.flops_verdict(FlopCount({"matmul": 96.0}), *flops.graph_flops(matmul))  # the graph lost half the work
    assert not other.ok and "off by 50.00%" in other.detail and "computes something else" in other.detail
    # an einsum's products, an LSTM without a formula, a shape known only at run time: said, not guessed
    einsum = onnx_graph(
        [helper.make_node("Einsum", ["q", "k"], ["y"], equation="bhqd,bhkd->bhqk")],
        [("q", [2, 3, 5, 4]), ("k", [2, 3, 6, 4])],
    )
    assert flops.graph_flops(einsum)[0] == {"matmul": 2 * 2 * 3 * 5 * 6 * 4}
    lstm = onnx_graph(
        [helper.make_node("LSTM", ["x", "w", "r"], ["y"], hidden_size=8)],
        [("x", [3, 2, 4])],
        [("w", [1, 32, 4]), ("r", [1, 32, 8])],
    )
    assert flops.graph_flops(lstm)[0] == {"recurrent": 2 * 3 * 2 * 32 * (4 + 8)}  # 4 gates x hidden 8
    unknown = onnx_graph(
        [helper.make_node("ConvInteger", ["x", "w"], ["y"])], [("x", [1, 1, 4, 4])], [("w", [1, 1, 2, 2])]
    )
    verdict = flops.flops_verdict(
        FlopCount({"conv": 18.0}, {"aten::miopen_convolution": 1}), *flops.graph_flops(unknown)
    )
    assert not verdict.applicable and "convolutions: not compared" in verdict.detail
    assert (
        "aten::miopen_convolution" in verdict.detail and "the graph's ConvInteger (no formula here)" in verdict.detail
    )
    dynamic = onnx_graph(
        [
            helper.make_node("NonZero", ["x"], ["i"]),
            helper.make_node("Cast", ["i"], ["f"], to=1),
            helper.make_node("MatMul", ["f", "w"], ["y"]),
        ],
        [("x", [4])],
        [("w", [1, 3])],
    )
    assert flops.graph_flops(dynamic)[1] == {"MatMul (shapes known only at run time)": 1}
    # given the graph's input, the shapes it computes at run time are read from a run (ONNX Runtime)
    one_nonzero = {"x": np.array([0.0, 0.0, 5.0, 0.0], dtype=np.float32)}  # NonZero -> [1, 1]
    shapes = flops.graph_shapes(dynamic)
    shapes.update(run_shapes(dynamic, flops.shapes_to_run(dynamic, shapes), one_nonzero))
    assert flops.graph_flops(dynamic, shapes) == ({"matmul": 2 * 1 * 1 * 3}, {})


def test_conv_formulas_equal_torchs_counter(tmp_path):
    """Conv (grouped), ConvTranspose, Gemm and a MatMul of an exported model: the graph's FLOPs from its
    shapes equal torch's FLOP counter on the model, exactly."""
    import onnx
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(4, 8, 3, groups=2)
            self.up = torch.nn.ConvTranspose2d(8, 4, 2, stride=2)
            self.fc = torch.nn.Linear(12, 5)

        def forward(self, x):
            y = self.up(self.conv(x))  # [2, 4, 12, 12]
            return self.fc(y) @ torch.ones(5, 3)

    model, x = Net().eval(), torch.randn(2, 4, 8, 8)
    path = tmp_path / "net.onnx"
    torch.onnx.export(model, (x,), str(path), opset_version=17, dynamo=False)
    verdict = flops.flops_verdict(count_flops(model, (x,)), *flops.graph_flops(onnx.load(str(path))))
    assert verdict.ok and verdict.detail.count("off by 0.00%") == 2, verdict.detail
