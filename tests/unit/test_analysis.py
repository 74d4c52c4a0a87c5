"""Pure analysis functions: one family table for NPU and portable names, counts, verdicts."""

from __future__ import annotations

import pytest

from common.analyze import checks, families, step_bound
from common.formats.intervals import gaps, merge, union_us
from common.formats.records import OpStat, StepTime, Task


@pytest.mark.parametrize(
    ("op_type", "family"),
    [
        ("MatMulV2", "matmul"), ("MatMulV3", "matmul"), ("BatchMatMul", "matmul"), ("aten::addmm", "matmul"),
        ("Gemm", "matmul"), ("Gelu", "activation"), ("aten::gelu", "activation"), ("Cast", "cast"),
        ("DSARandomNormal", "init"), ("aten::uniform_", "init"), ("aten::randn", "init"), ("MemcpyAsync", "memcpy"),
        ("Add", "elementwise"), ("FlashAttentionScore", "attention"),
    ],
)
def test_op_family(op_type: str, family: str) -> None:
    assert families.op_family(op_type) == family


def _task(op: str, start: float, dur: float, step: int | None = None) -> Task:
    return Task(op, op, "CPU", start, dur, step_id=step)


def test_check_counts_passes_and_fails() -> None:
    tasks = [_task("aten::addmm", i, 1) for i in range(8)] + [_task("aten::gelu", i, 1) for i in range(6)]
    assert checks.check_counts(tasks, 2, {"matmul": 4, "activation": 3}, "t").ok
    bad = checks.check_counts(tasks[1:], 2, {"matmul": 4, "activation": 3}, "t")
    assert not bad.ok and "matmul 7 (want 4 x 2 = 8)" in bad.detail


def test_top_family_excludes_init() -> None:
    stats = [OpStat("aten::uniform_", "CPU", 1, 500, 500, 500, 500, 50), OpStat("aten::addmm", "CPU", 4, 300, 1, 1, 1, 30),
             OpStat("aten::gelu", "CPU", 3, 200, 1, 1, 1, 20)]
    verdict = checks.check_top_family(stats, "matmul", "t")
    assert verdict.ok and "matmul 60.0%" in verdict.detail
    assert not checks.check_top_family(stats, "activation", "t").ok


def test_sum_vs_computing() -> None:
    tasks = [_task("a", 0, 10, 1), _task("b", 20, 10, 2)]
    steps = [StepTime(1, 10, 0, 0, 0, 5, 15, 0, 0), StepTime(2, 10, 0, 0, 0, 5, 15, 0, 0)]
    assert checks.check_sum_vs_computing(tasks, steps, "t").ok
    steps_off = [StepTime(1, 20, 0, 0, 0, 5, 25, 0, 0), StepTime(2, 20, 0, 0, 0, 5, 25, 0, 0)]
    assert not checks.check_sum_vs_computing(tasks, steps_off, "t").ok


def test_bound_verdict_names_its_numbers() -> None:
    host = step_bound.summarize_steps([StepTime(1, 10, 0, 0, 0, 90, 100, 0, 0)])
    assert step_bound.bound_verdict(host).startswith("host-bound: Computing 10.0 us vs Free 90.0 us")
    busy = step_bound.summarize_steps([StepTime(1, 90, 0, 0, 0, 10, 100, 0, 0)])
    assert step_bound.bound_verdict(busy).startswith("compute-bound")


def test_intervals() -> None:
    assert merge([(5, 7), (0, 2), (1, 3)]) == [(0, 3), (5, 7)]
    assert union_us([(0, 2), (1, 3), (5, 7)]) == 5
    assert gaps([(1, 2), (4, 5)], 0, 6) == [(0, 1), (2, 4), (5, 6)]
