"""Pure analysis functions: one family table for NPU and portable names, counts, verdicts."""

from __future__ import annotations

import pytest

from common.analyze import checks, families, grouping
from common.analyze.bounds import step as step_bound
from common.formats.intervals import gaps, merge, union_us
from common.formats.records import OpStat, StepTime, Task


@pytest.mark.parametrize(
    ("op_type", "family"),
    [
        ("MatMulV2", "matmul"),
        ("MatMulV3", "matmul"),
        ("BatchMatMul", "matmul"),
        ("aten::addmm", "matmul"),
        ("Gemm", "matmul"),
        ("Gelu", "activation"),
        ("aten::gelu", "activation"),
        ("Cast", "cast"),
        ("DSARandomNormal", "init"),
        ("aten::uniform_", "init"),
        ("aten::randn", "init"),
        ("MemcpyAsync", "memcpy"),
        ("Add", "elementwise"),
        ("FlashAttentionScore", "attention"),
    ],
)
def test_op_family(op_type: str, family: str) -> None:
    assert families.op_family(op_type) == family


def _task(op: str, start: float, dur: float, step: int | None = None) -> Task:
    return Task(op, op, "CPU", start, dur, step_id=step)


def _forward(start: float, ops: list[str]) -> list:
    return [_task(op, start + i, 1) for i, op in enumerate(ops)]


def test_every_forward_is_compared_with_the_first_the_tool_recorded() -> None:
    ops = ["aten::addmm", "aten::gelu", "aten::addmm"]
    tasks = _forward(0, ops) + _forward(10, ops) + _forward(20, ops)
    windows = [(0, 10), (10, 20), (20, 30)]
    same = checks.check_same_records(grouping.records_in(tasks, windows), 3, "t")
    assert same.ok and "3 forwards, each 3 ops (matmul 2, activation 1)" in same.detail
    # the third forward runs two more ops (noise from the 3rd call on): extra ops fail, named with their family
    noisy = tasks[:6] + _forward(20, [*ops, "aten::randn_like", "aten::add"])
    bad = checks.check_same_records(grouping.records_in(noisy, windows), 3, "t")
    assert not bad.ok and "forward 3: extra aten::add x1 (elementwise), aten::randn_like x1 (init)" in bad.detail
    # an op missing from a forward fails the same way
    short = checks.check_same_records(grouping.records_in(tasks[:-1], windows), 3, "t")
    assert not short.ok and "missing aten::addmm x1 (matmul)" in short.detail
    # so does a forward too many or too few, and a first forward with nothing in it
    assert not checks.check_same_records(grouping.records_in(tasks, windows[:2]), 3, "t").ok
    assert not checks.check_same_records(grouping.records_in(tasks, [(40, 50)] * 3), 3, "t").ok
    assert not checks.check_same_records([], None, "t").ok


def test_warm_up_forwards_may_differ_and_are_said() -> None:
    """An NPU converts weights to its private formats on the first call: warm-up forwards may hold more."""
    ops = ["aten::addmm", "aten::gelu"]
    first = _forward(0, [*ops, "TransData"])  # one-off work in the first warm-up forward
    tasks = first + _forward(10, ops) + _forward(20, ops) + _forward(30, ops)
    records = grouping.records_in(tasks, [(0, 10), (10, 20), (20, 30), (30, 40)])
    verdict = checks.check_same_records(records, 4, "t", warmup=1)
    assert (
        verdict.ok and "each 2 ops (activation 1, matmul 1) as the first measured (after 1 warm-up)" in verdict.detail
    )
    assert (
        "warm-up forwards differ (not failed: a first call may do one-off work): forward 1: extra TransData x1"
        in verdict.detail
    )
    assert not checks.check_same_records(records, 4, "t").ok  # without warm-up, the first forward is the reference


def test_steps_are_grouped_by_step_id() -> None:
    tasks = [_task("aten::mm", i, 1, step) for i, step in enumerate([None, 2, 2, 3, 3])]
    assert [sum(r.values()) for r in grouping.records_by_step(tasks)] == [2, 2]  # a warm-up step has no Step Id


def test_top_family_excludes_init() -> None:
    stats = [
        OpStat("aten::uniform_", "CPU", 1, 500, 500, 500, 500, 50),
        OpStat("aten::addmm", "CPU", 4, 300, 1, 1, 1, 30),
        OpStat("aten::gelu", "CPU", 3, 200, 1, 1, 1, 20),
    ]
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
