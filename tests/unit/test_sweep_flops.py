"""04's sweep: FLOPs per point from common.collect.flop_count.count_flops, an RNN layer's from its profiled shapes, and no
GFLOP/s figure printed as a silent 0."""

from __future__ import annotations

import torch
from torch import nn

from common.render.sweep import sweep_report
from common.render.text import render_text
from common.formats.records import Task
from common.modes.pytorch import sweep


def _point(batch: int, flops: float, computing_us: float = 100.0, **extra) -> dict:
    return {
        "series": "m",
        "hidden": None,
        "batch": batch,
        "step_us": 200.0,
        "computing_us": computing_us,
        "free_us": 200.0 - computing_us,
        "computing_ratio": computing_us / 200.0,
        "bound": "compute-bound",
        "flops": flops,
        "gflops_per_s": flops / computing_us / 1e3 if flops else None,
        "above_peak": False,
        "flops_from_shapes": [],
        "flops_missing": [],
        **extra,
    }


def test_counted_flops_reuses_count_flops_and_names_what_it_cannot_count() -> None:
    mlp = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8))
    flops, uncounted = sweep.counted_flops(mlp, (torch.randn(4, 16),))
    assert flops == 2 * 4 * 16 * 32 + 2 * 4 * 32 * 8 and uncounted == []
    # an LSTM: torch runs it as one oneDNN layer op (no formula: named, 0 counted) or, when it does not take
    # that path (it did not after a profiler session in one process), as matmuls the counter counts
    flops, uncounted = sweep.counted_flops(nn.LSTM(8, 16), (torch.randn(5, 2, 8),))
    if uncounted:
        assert flops == 0 and uncounted == ["aten::mkldnn_rnn_layer"]
    else:
        assert flops == 2 * 5 * 2 * 4 * 16 * (8 + 16)


def test_counted_flops_passes_on_what_count_flops_could_not_count(monkeypatch) -> None:
    import common.collect.flop_count
    from common.workload import FlopCount

    found = FlopCount({"matmul": 10.0}, {"aten::mkldnn_rnn_layer": 2, "aten::relu": 1})
    monkeypatch.setattr(common.collect.flop_count, "count_flops", lambda model, x: found)
    assert sweep.counted_flops(None, ()) == (10.0, ["aten::mkldnn_rnn_layer"])  # a FLOP family's op only


def test_uncounted_rnn_layers_get_their_flops_from_the_profiled_shapes() -> None:
    layer = Task(
        "aten::mkldnn_rnn_layer",
        "aten::mkldnn_rnn_layer",
        "CPU",
        0.0,
        5.0,
        input_shapes="5,2,8;64,8;64,16;64;64;2,16;2,16;",
        input_dtypes="FLOAT;" * 7 + "SCALARLIST",
    )
    other = Task(
        "aten::addmm", "aten::addmm", "CPU", 0.0, 1.0, input_shapes="4;2,16;16,4", input_dtypes="FLOAT;" * 2 + "FLOAT"
    )
    flops, found, missing = sweep.shape_flops([layer, other, layer], ["aten::mkldnn_rnn_layer"], steps=2)
    assert flops == 2 * 5 * 2 * 64 * (8 + 16) and found == ["aten::mkldnn_rnn_layer"] and missing == []
    _, _, missing = sweep.shape_flops([other], ["aten::mkldnn_rnn_layer"], steps=1)
    assert missing == ["aten::mkldnn_rnn_layer (not in the profile)"]


def test_no_zero_gflops_point_is_printed_without_a_reason() -> None:
    zero = _point(1, 0.0)
    text = render_text(sweep_report([zero], "m, portable", "batch", None, "no peak", 5))
    (row,) = [line for line in text.splitlines() if line.lstrip().startswith("1 ")]
    assert row.endswith("N/A (no FLOPs, see below)")  # not 0.0
    assert "N/A (no FLOPs, see below)" in text and "N/A: no FLOPs counted" in text
    shaped = _point(4, 9.2e6, flops_from_shapes=["aten::mkldnn_rnn_layer"])
    missing = _point(8, 1e6, flops_missing=["aten::lstm (recurrent weights not in the shapes)"])
    text = render_text(sweep_report([shaped, missing], "m, portable", "batch", None, "no peak", 5))
    assert "92.0 (s)" in text and "(s): includes the FLOPs of aten::mkldnn_rnn_layer" in text
    assert ">= 10.0" in text and "not counted: aten::lstm (recurrent weights not in the shapes)" in text


def test_a_point_whose_steps_straddle_the_threshold_is_undecided_and_said_so() -> None:
    from common.render.sweep import turning_points

    points = [
        {"series": "m", "batch": b, "bound": bound}
        for b, bound in ((1, "host-bound"), (4, "undecided"), (16, "compute-bound"))
    ]
    (line,) = turning_points(points, "batch")
    assert line == (
        "m: host-bound up to batch 1, compute-bound from batch 16; undecided at batch 4 (its steps' "
        "Computing shares straddle 50%: too noisy to call)"
    )
