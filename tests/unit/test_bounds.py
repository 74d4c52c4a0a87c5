"""Bottleneck analysis as pure functions: work from shapes, lower bounds, pipes, the run hint."""

from __future__ import annotations

import pytest

from common.analyze.bounds import op as bounds
from common.analyze.bounds.op import Peaks
from common.analyze.bounds.step import StepSummary
from common.formats.records import Task

PEAKS = Peaks("test", flops_per_s=1e12, bytes_per_s=1e11, source="test figures")


def _task(op: str, shapes: str | None, dtypes: str | None, out: str | None = None, dur: float = 10.0, **pmu) -> Task:
    return Task(
        op,
        op,
        "CPU",
        0.0,
        dur,
        input_shapes=shapes,
        input_dtypes=dtypes,
        output_shapes=out,
        output_dtypes=None if out is None else "FLOAT",
        pmu=pmu,
    )


def test_addmm_work_from_logical_shapes() -> None:
    work = bounds.op_work(_task("aten::addmm", "1024;32,1024;1024,1024", "FLOAT;FLOAT;FLOAT"))
    assert work.flops == 2 * 32 * 1024 * 1024
    assert work.bytes == 4 * (1024 + 32 * 1024 + 1024 * 1024 + 32 * 1024)


def test_gemm_with_a_folded_weight_uses_the_output_shape() -> None:
    work = bounds.op_work(_task("Gemm", "32,1024;1024", "FLOAT;FLOAT", out="32,1024"))
    assert work.flops == 2 * 32 * 1024 * 1024 and work.bytes == 4 * (32 * 1024 + 1024 * 1024 + 32 * 1024 + 1024)


@pytest.mark.parametrize(
    ("task", "reason"),
    [
        (_task("MatMulV2", None, None), "no Input Shapes in the profile"),
        (_task("MatMulV2", "N/A", "N/A"), "no Input Shapes in the profile"),
        (_task("aten::mm", "32,1024;512,64", "FLOAT;FLOAT"), "shapes disagree"),
        (_task("MatMulV2", "81920,4096;8192,512", "DT_BF16;DT_BF16", out="4096,512"), "shapes disagree"),
        (_task("FlashAttentionScore", "4,2;4,2,8", "DT_BF16;DT_BF16"), "query, key, value not among the shapes"),
        (_task("aten::mkldnn_convolution", "4,3,32,32;16,3,3,3", "FLOAT;FLOAT"), "no Output Shapes: stride and"),
        (_task("aten::gelu", "32,1024", "WEIRD"), "no or unknown Input Data Types"),
    ],
)
def test_no_bound_is_guessed(task: Task, reason: str) -> None:
    work = bounds.op_work(task)
    assert isinstance(work, str) and work.startswith(reason)
    (row,) = bounds.op_bounds([task], PEAKS)
    assert row.lower_bound_us is None and row.achieved is None and row.bound is None


def test_lower_bound_roofline_and_achieved_fraction() -> None:
    gemm = _task("aten::mm", "1024,1024;1024,1024", "FLOAT;FLOAT", dur=4000.0)
    gelu = _task("aten::gelu", "1024,1024", "FLOAT", dur=200.0)
    rows = {r.op_type: r for r in bounds.op_bounds([gemm, gelu], PEAKS)}
    mm = rows["aten::mm"]
    assert mm.compute_us == pytest.approx(2 * 1024**3 / 1e12 * 1e6)
    assert mm.memory_us == pytest.approx(3 * 4 * 1024**2 / 1e11 * 1e6)
    assert mm.bound == "compute" and mm.achieved == pytest.approx(mm.compute_us / 4000.0)
    assert rows["aten::gelu"].bound == "memory" and rows["aten::gelu"].lower_bound_us == pytest.approx(
        8 * 1024**2 / 1e5
    )
    (no_peaks,) = bounds.op_bounds([gelu], None)
    assert no_peaks.reason == "no device peaks for this data" and no_peaks.lower_bound_us is None


def test_device_peak_table_lookup() -> None:
    for name in ("Ascend910B1", "910B2", "ascend910b3", "Ascend910B4", "Ascend310P3"):
        assert bounds.device_peaks(name) is not None, name
    b3 = bounds.device_peaks("Ascend910B3")
    assert b3.flops_per_s == pytest.approx(20 * 8192 * 1.8e9) and b3.bytes_per_s == 1.6e12
    assert bounds.device_peaks("Ascend999") is None


def test_pipe_verdicts_state_thresholds() -> None:
    scalar = _task(
        "Kernel", None, None, aiv_vec_ratio=0.04, aiv_scalar_ratio=0.65, aiv_mte2_ratio=0.33, aiv_mte3_ratio=0.0
    )
    mte = _task("MatMulV2", None, None, aic_mac_ratio=0.5, aic_scalar_ratio=0.2, aic_mte2_ratio=0.95)
    verdicts = {v.op_type: v for v in bounds.pipe_verdicts([scalar, mte, _task("NoPmu", None, None)])}
    assert set(verdicts) == {"Kernel", "MatMulV2"}
    assert verdicts["Kernel"].pipe == "aiv_scalar" and "no pipe >= 0.8" in verdicts["Kernel"].text
    assert "compute pipes at 0.04 < 0.5" in verdicts["Kernel"].text
    assert verdicts["MatMulV2"].pipe == "aic_mte2" and "limited by data movement (MTE2" in verdicts["MatMulV2"].text


def test_run_hint_is_a_hypothesis_with_evidence() -> None:
    host = bounds.run_hint(StepSummary(5, 2250.0, 35.0, 2215.0), 7, 5.0)
    assert host[0].startswith("hypothesis: host-bound") and "batch more" in host[1] and "graph mode" in host[1]
    assert host[2].startswith("evidence: Computing 35.0 us : Free 2215.0 us per step (1.6% computing, threshold 50%)")
    device = bounds.run_hint(StepSummary(5, 4000.0, 3800.0, 200.0), None, None)
    assert device[0].startswith("hypothesis: device-bound")


def test_a_bound_above_the_peak_is_called_not_tight() -> None:
    fast = _task("aten::gelu", "1024,1024", "FLOAT", dur=1.0)  # 8 MB in 1 us: faster than 1e11 B/s
    (row,) = bounds.op_bounds([fast], PEAKS)
    assert row.achieved > 1 and row.verdict.startswith("memory; faster than the peak")
    (slow,) = bounds.op_bounds([_task("aten::gelu", "1024,1024", "FLOAT", dur=1e6)], PEAKS)
    assert slow.verdict == "memory"
    assert bounds.op_bounds([_task("X", None, None)], PEAKS)[0].verdict == "unavailable: no Input Shapes in the profile"


def test_arguments_that_are_not_tensors_move_no_bytes() -> None:
    """torch records a LayerNorm's normalized_shape as ScalarList with an empty shape: 0 bytes, not 'unknown'."""
    assert bounds.dtype_sizes("FLOAT;SCALARLIST;FLOAT;FLOAT", 4) == [4, 0, 4, 4]
    assert bounds.dtype_sizes("float;Scalar;None", 3) == [4, 0, 0]
    assert bounds.dtype_sizes("FLOAT;COMPLEX64", 2) is None  # a dtype the table does not know stays unknown


def test_wide_bound_table_cells_wrap_and_are_never_cut() -> None:
    """The bounds table's Input Shapes and Bound cells wrap (at spaces, then after each ; of a shape list)."""
    from common.render.html import table
    from common.render.text import render_table

    shapes = "4096,2,512;4096,2,512;4096,2,512;4096,2,512;4096,4096;2,4,4096,8;2,4,4096,8;;4096,2,512;"
    reason = "unavailable: shapes disagree: hidden 511 (q), 512 (k), 512 (v) over 3 heads"
    header = ["OP Type", "Input Shapes", "Count", "Bound"]
    rows = [["FlashAttentionScoreGrad", shapes, 4, reason]]
    text = render_table(header, rows, max_width=70, wrap=("Input Shapes", "Bound"))
    lines = text.splitlines()
    assert max(map(len, lines)) <= 70 and "…" not in text
    body = lines[2:]
    shape_col = lines[1].split("  ")[1]  # the dashes under Input Shapes
    start = lines[0].index("Input Shapes")
    cells = [line[start : start + len(shape_col)].strip() for line in body]
    assert "".join(cells) == shapes and all(c.endswith(";") for c in cells[:-1] if c)  # whole shapes per line
    assert " ".join(line[lines[0].index("Bound") :].strip() for line in body).split() == reason.split()
    cut = render_table(header, rows, max_width=70)  # a column not in wrap is still cut
    assert "…" in cut
    markup = table(header, rows, wrap=("Input Shapes",))
    assert '<td class="w">4096,2,512;<wbr>4096,2,512;<wbr>' in markup and "td.w" not in markup
