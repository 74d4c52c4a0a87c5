"""Work models (common.analyze.work_models) against independent counts: torch's FLOP counter formulas, hand
counts for one shape, real capture rows (the NPU fixtures; portable captures of small models made here)."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.flop_counter import conv_flop_count, sdpa_backward_flop_count, sdpa_flop_count

from common.analyze.bounds import op as bounds
from common.analyze.families import op_family
from common.collect import torch_ops
from common.collect.output_shapes import output_shapes
from common.formats.datasets import find_datasets
from common.formats.records import Task
from common.collect.flop_count import count_flops

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "npu"


def _task(op: str, shapes: str, dtypes: str, out: str | None = None, out_dtypes: str | None = None) -> Task:
    n_out = len(out.split(";")) if out else 0
    return Task(
        op,
        op,
        "AI_CORE",
        0.0,
        10.0,
        input_shapes=shapes,
        input_dtypes=dtypes,
        output_shapes=out,
        output_dtypes=out_dtypes or (";".join(["FLOAT"] * n_out) if out else None),
    )


def _csv(*shapes) -> str:
    return ";".join(",".join(map(str, s)) for s in shapes)


def _work(task: Task) -> bounds.Work:
    work = bounds.op_work(task)
    assert not isinstance(work, str), work
    return work


# --- convolution: torch's conv_flop_count on the same shapes ------------------------------------------
@pytest.mark.parametrize(
    ("x", "w", "stride", "padding", "groups"),
    [
        ((4, 16, 16, 16), (32, 16, 3, 3), 2, 1, 1),  # strided 3x3
        ((4, 32, 16, 16), (32, 1, 3, 3), 1, 1, 32),  # depthwise
        ((4, 24, 8, 8), (48, 6, 3, 3), 2, 1, 4),  # grouped
        ((2, 1, 4000), (64, 1, 10), 5, 0, 1),  # 1-D audio front end
        ((1, 4, 6, 10, 10), (8, 4, 3, 3, 3), 1, 1, 1),  # 3-D
    ],
)
def test_conv_matches_torchs_formula(x, w, stride, padding, groups) -> None:
    conv = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}[len(x)]
    out = conv(torch.zeros(x), torch.zeros(w), stride=stride, padding=padding, groups=groups).shape
    work = _work(_task("aten::mkldnn_convolution", _csv(x, w), "FLOAT;FLOAT", _csv(out)))
    assert work.flops == conv_flop_count(list(x), list(w), list(out))
    assert work.bytes == 4 * (math.prod(x) + math.prod(w) + math.prod(out))


def test_transposed_conv_matches_torchs_formula_and_a_hand_count() -> None:
    x, w = (2, 48, 8, 8), (48, 24, 2, 2)  # ConvTranspose2d(48, 24, 2, stride=2)
    out = F.conv_transpose2d(torch.zeros(x), torch.zeros(w), stride=2).shape
    for op in ("aten::_convolution", "aten::conv_transpose2d"):
        work = _work(_task(op, _csv(x, w, (24,)), "FLOAT;FLOAT;FLOAT", _csv(out)))
        assert work.flops == conv_flop_count(list(x), list(w), list(out), transposed=True)
        assert work.flops == 2 * 2 * 8 * 8 * 48 * 24 * 2 * 2  # every input position x every weight, x2


def test_conv_without_output_shapes_says_why() -> None:
    work = bounds.op_work(
        _task("aten::mkldnn_convolution", "4,3,32,32;16,3,3,3;;;", "FLOAT;FLOAT;SCALARLIST;SCALARLIST;SCALARLIST")
    )
    assert work == "no Output Shapes: stride and padding unknown"
    folded = bounds.op_work(_task("Conv", "1,3,32,32", "FLOAT", "1,16,32,32"))  # ONNX: weight an initializer
    assert folded.startswith("weights folded into the op")


def test_npu_conv_rows_of_a_real_capture() -> None:
    """AlexNet on a 910B (torch_npu Level1): 5HD activations, FRACTAL_Z weights, channels padded to C0 = 8."""
    ds = next(iter(find_datasets(FIXTURES / "msinsight_torch_npu" / "text_level1" / "rank0_ascend_pt")))
    rows = {(t.op_type, t.input_shapes): t for t in ds.tasks}
    conv1 = _work(rows[("Conv2D", "32,1,224,224,8;121,4,16,8;64")])
    # by hand: N x Cout x Ho x Wo x (Cin padded to 8 x 11 x 11) x 2; torch's formula on the logical shapes
    assert conv1.flops == 2 * 32 * 64 * 55 * 55 * (8 * 11 * 11)
    assert conv1.flops == conv_flop_count([32, 8, 224, 224], [64, 8, 11, 11], [32, 64, 55, 55])
    # the gradients of the 5th conv (256 -> 256, 3x3 on 13x13) cost what its forward does, each
    forward = _work(rows[("Conv2D", "32,32,13,13,8;288,16,16,8;256")]).flops
    assert forward == 2 * 32 * 256 * 13 * 13 * 256 * 9
    assert _work(rows[("Conv2DBackpropInput", "4;288,16,16,8;32,32,13,13,8")]).flops == forward
    assert _work(rows[("Conv2DBackpropFilter", "32,32,13,13,8;4;32,32,13,13,8")]).flops == forward
    pool = _work(rows[("MaxPoolWithArgmaxV1", "32,4,55,55,16")])
    assert pool.flops == 32 * 4 * 27 * 27 * 16  # >= 1 per output element
    # argmax is UINT16 in the pooling gradient: a dtype bounds knows
    assert not isinstance(
        bounds.op_work(rows[("MaxPoolGradWithArgmaxV1", "32,16,13,13,16;32,16,6,6,16;32,256,9,9,4,16")]), str
    )


# --- attention: torch's sdpa formulas -----------------------------------------------------------------
def test_npu_flash_attention_rows_of_a_real_capture() -> None:
    """FlashAttentionScore in SBH layout (S 4096, B 2, hidden 512); the softmax stats [2, 4, 4096, 8] give 4 heads."""
    ds = next(iter(find_datasets(FIXTURES / "torch_npu_kernel_details")))
    rows = {(t.op_type, t.input_shapes): t for t in ds.tasks}
    fwd = _work(rows[("FlashAttentionScore", "4096,2,512;4096,2,512;4096,2,512;;;;4096,4096;;;;;")])
    assert fwd.flops == sdpa_flop_count((2, 4, 4096, 128), (2, 4, 4096, 128), (2, 4, 4096, 128))
    assert fwd.flops == 4 * 2 * 4 * 4096 * 4096 * 128  # QK^T and PV, 2 FLOPs per multiply-add
    grad = next(t for (op, _), t in rows.items() if op == "FlashAttentionScoreGrad")
    dims = (2, 4, 4096, 128)
    assert _work(grad).flops == sdpa_backward_flop_count(dims, dims, dims, dims)
    odd = rows[("FlashAttentionScore", "4096,2,511;4096,2,512;4096,2,512;;;;4096,4096;;;;;")]
    assert bounds.op_work(odd).startswith("shapes disagree")


def test_sdpa_with_grouped_kv_heads_matches_torch() -> None:
    q, kv = (2, 8, 32, 16), (2, 2, 48, 16)
    work = _work(_task("aten::_scaled_dot_product_flash_attention_for_cpu", _csv(q, kv, kv), "FLOAT;FLOAT;FLOAT"))
    assert work.flops == sdpa_flop_count(q, kv, kv)


# --- portable captures of small models: the collector's rows against count_flops / hand counts -------------
def _capture(model: nn.Module, *x: torch.Tensor) -> list[Task]:
    model.eval()
    with (
        torch.no_grad(),
        torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof,
    ):
        model(*x)
    start = prof.profiler.kineto_results.trace_start_ns() / 1000.0
    return torch_ops.tasks_from_nodes(torch_ops.nodes_from_events(prof.events()), start)


def _flops_by_family(tasks: list[Task]) -> Counter:
    total: Counter = Counter()
    for t in tasks:
        work = bounds.op_work(t)
        if not isinstance(work, str):
            total[op_family(t.op_type)] += work.flops
    return total


class _UNetBits(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.down = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.depthwise = nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.audio = nn.Conv1d(8, 4, 5, stride=3)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x):
        y = self.up(self.depthwise(self.down(x)))
        return self.audio(self.pool(y).flatten(2))


def test_portable_conv_rows_count_what_torchs_counter_counts() -> None:
    model, x = _UNetBits(), torch.randn(2, 8, 16, 16)
    tasks = _capture(model, x)
    convs = [t for t in tasks if op_family(t.op_type) == "conv"]
    assert len(convs) == 4 and all(t.output_shapes for t in convs)  # the collector derived every output
    assert _flops_by_family(tasks)["conv"] == count_flops(model, (x,)).per_family["conv"]
    pool = next(t for t in tasks if op_family(t.op_type) == "pool")
    assert pool.output_shapes.split(";")[0] == "2,8,8,8"


def test_portable_attention_rows_count_what_torchs_counter_counts() -> None:
    class Sdpa(nn.Module):
        def forward(self, q, k, v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    q = torch.randn(2, 4, 32, 16)
    assert (
        _flops_by_family(_capture(Sdpa(), q, q, q))["attention"]
        == count_flops(Sdpa(), (q, q, q)).per_family["attention"]
    )
    encoder = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(64, 4, 128, batch_first=True), 2, enable_nested_tensor=False
    )
    x = torch.randn(2, 16, 64)
    tasks = _capture(encoder, x)
    assert any(t.op_type == "aten::_transformer_encoder_layer_fwd" for t in tasks)  # the fused fast path
    assert _flops_by_family(tasks)["attention"] == count_flops(encoder.eval(), (x,)).per_family["attention"]
    mha = nn.MultiheadAttention(32, 4, batch_first=True).eval()
    y = torch.randn(3, 10, 32)
    tasks = _capture(mha, y, y, y)
    assert any(t.op_type == "aten::_native_multi_head_attention" for t in tasks)
    assert _flops_by_family(tasks)["attention"] == count_flops(mha, (y, y, y)).per_family["attention"]


def test_portable_lstm_rows_match_a_hand_count() -> None:
    """torch's counter has no LSTM formula: 2 x T x B x 4H x (I + H) per layer, counted by hand here."""
    lstm, x = nn.LSTM(32, 64, num_layers=2), torch.randn(20, 4, 32)
    layers = [t for t in _capture(lstm, x) if op_family(t.op_type) == "recurrent"]
    assert [t.op_type for t in layers] == ["aten::mkldnn_rnn_layer"] * 2
    assert [_work(t).flops for t in layers] == [2 * 20 * 4 * 4 * 64 * (32 + 64), 2 * 20 * 4 * 4 * 64 * (64 + 64)]


def test_portable_gru_row_matches_torchs_decomposed_count() -> None:
    """aten::gru is one task on the CPU (its weights a tensor list without shapes); its output gives D = 2."""
    gru, x = nn.GRU(24, 48, batch_first=True, bidirectional=True), torch.randn(4, 16, 24)
    (task,) = [t for t in _capture(gru, x) if op_family(t.op_type) == "recurrent"]
    assert task.op_type == "aten::gru" and task.output_shapes.startswith("4,16,96")
    assert _work(task).flops == count_flops(gru, (x,)).per_family["matmul"]  # counted there as its matmuls
    assert _work(task).flops == 2 * (2 * 4 * 16 * 3 * 48 * (24 + 48))
    # without the output (an older capture) the directions are unknown: the smaller reading, still a bound
    older = _work(_task("aten::gru", task.input_shapes, task.input_dtypes))
    assert older.flops <= _work(task).flops and "directions unknown" in older.how


def test_npu_and_onnx_recurrent_shapes() -> None:
    dynamic = _work(_task("DynamicRNN", "20,4,32;96,256;256", "FLOAT16;FLOAT16;FLOAT16", "20,4,64"))
    assert dynamic.flops == 2 * 20 * 4 * 96 * 256  # one fused [I + H, 4H] weight
    gru = _work(_task("DynamicGRUV2", "20,4,32;32,192;64,192;192;192", "FLOAT16;FLOAT16;FLOAT16;FLOAT16;FLOAT16"))
    assert gru.flops == 2 * 20 * 4 * 3 * 64 * (32 + 64)
    folded = _work(_task("LSTM", "20,4,32", "FLOAT", "20,2,4,64;2,4,64;2,4,64"))  # ONNX, W and R initializers
    assert folded.flops == 2 * 20 * 4 * 2 * 4 * 64 * (32 + 64)


def test_norm_embedding_and_pool_models() -> None:
    ln = _work(_task("aten::native_layer_norm", "2,65,64;;64;64", "FLOAT;SCALARLIST;FLOAT;FLOAT"))
    assert ln.flops == 5 * 2 * 65 * 64 and ln.bytes == 4 * (2 * 2 * 65 * 64 + 2 * 64)
    bn = _work(_task("aten::native_batch_norm", "4,16,8,8;16;16;16;16", "FLOAT;FLOAT;FLOAT;FLOAT;FLOAT"))
    assert bn.flops == 2 * 4 * 16 * 8 * 8
    emb = _work(_task("aten::embedding", "1000,64;4,24", "FLOAT;INT64"))
    assert emb.flops == 0 and emb.bytes == 96 * 8 + 2 * 96 * 64 * 4  # the 96 rows picked, not the table
    pool = _work(
        _task(
            "aten::max_pool2d_with_indices",
            "4,16,32,32;;;;",
            "FLOAT;SCALARLIST;SCALARLIST;SCALARLIST;SCALARLIST",
            "4,16,16,16;4,16,16,16",
            "FLOAT;INT64",
        )
    )
    assert pool.flops == 4 * 16 * 16 * 16 and pool.bytes == 4 * 4 * 16 * 32 * 32 + (4 + 8) * 4 * 16 * 16 * 16
    resize = _work(_task("Resize", "1,4,8,8;0;4", "FLOAT;FLOAT;FLOAT", "1,4,16,16"))  # ONNX: X, roi, scales
    assert resize.flops == 4 * 16 * 16 and resize.bytes == 4 * (4 * 8 * 8 + 4 + 4 * 16 * 16)


def test_ops_without_a_model_say_why_in_a_short_cell() -> None:
    cases = [
        (_task("aten::index_select", "1000,64;96", "FLOAT;INT64"), "indexing: bytes depend on the index values"),
        (_task("ReduceSum", "32,1000;1", "FLOAT;INT64", "1,1000"), "reduce: inputs of different sizes"),
        (_task("aten::lstm", "4,20,32;;", "FLOAT;TENSORLIST;TENSORLIST"), "recurrent weights not in the shapes"),
    ]
    for task, reason in cases:
        (row,) = bounds.op_bounds([task], bounds.Peaks("t", 1e12, 1e11, "t"))
        assert row.reason.startswith(reason) and len(row.verdict) <= 80, row.verdict
        assert "no work model" not in row.verdict


def test_collector_output_shapes_use_torchs_shape_functions() -> None:
    x, w = [4, 16, 17, 17], [32, 16, 3, 3]
    got = output_shapes(
        "aten::mkldnn_convolution",
        [x, w, [], [], [], []],
        ["float", "float", "", "ScalarList", "ScalarList", "ScalarList", "Scalar"][:6] + ["Scalar"],
        [None, None, None, [1, 1], [2, 2], [1, 1], 1],
    )
    assert got == (",".join(map(str, F.conv2d(torch.zeros(x), torch.zeros(w), stride=2, padding=1).shape)), "FLOAT")
    assert output_shapes("aten::addmm", [[3], [2, 4], [4, 3]], ["float"] * 3, [None] * 3) is None  # not needed
