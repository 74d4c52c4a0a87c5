"""Step verdicts with communication: compute-, host-, communication-bound and mixed, each with its numbers.

The capture is a real 2-rank torch_npu training step (tests/fixtures/npu/msinsight_torch_npu) in
which un-overlapped communication is ~74% of the step; the expected figures are read from its
step_trace_time.csv here with the csv module, independently of the lab's readers."""

from __future__ import annotations

import csv
import statistics

import pytest
from helpers import FIXTURES, ROOT, cluster_text, dir_report

from common.analyze.bounds import step as step_bound
from common.analyze.cluster import cluster_report
from common.formats.cluster import load_cluster
from common.formats.records import StepTime

CAPTURE = FIXTURES / "npu" / "msinsight_torch_npu" / "text_level1"


def _csv_steps(rank: int) -> list[dict[str, float]]:
    path = CAPTURE / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
    with path.open(newline="") as f:
        return [{k: float(v) if v.strip() else None for k, v in row.items()} for row in csv.DictReader(f)]


def _expected_line(rows: list[dict[str, float]]) -> str:
    c = statistics.fmean(r["Computing"] for r in rows)
    n = statistics.fmean(r["Communication(Not Overlapped)"] for r in rows)
    f = statistics.fmean(r["Free"] for r in rows)
    t = c + n + f
    return (
        f"communication-bound: Computing {c:.1f} us ({100 * c / t:.1f}%), Communication(Not Overlapped) "
        f"{n:.1f} us ({100 * n / t:.1f}%), Free {f:.1f} us ({100 * f / t:.1f}%) of the {t:.1f} us step"
    )


def _step(
    computing: float, comm: float, free: float, overlapped: float = 0.0, preparing: float | None = None
) -> StepTime:
    return StepTime(1, computing, comm, overlapped, comm + overlapped, free, computing + comm + free, 0.0, preparing)


# --- the rule ------------------------------------------------------------------------------------
def test_one_device_keeps_its_computing_vs_free_verdict() -> None:
    host = step_bound.step_verdict(step_bound.summarize_steps([_step(10, 0, 90)]))
    assert host.kind == "host-bound"
    assert host.text == (
        "host-bound: Computing 10.0 us vs Free 90.0 us per step (Computing = 10.0% of the step; "
        "host-bound below 50%; median of 1 step)"
    )
    busy = step_bound.step_verdict(step_bound.summarize_steps([_step(90, 0, 10)]))
    assert busy.kind == "compute-bound" and busy.text.startswith("compute-bound: Computing 90.0 us vs Free 10.0 us")
    tie = step_bound.step_verdict(step_bound.summarize_steps([_step(50, 0, 50)]))
    assert tie.kind == "compute-bound"  # at exactly 50% Computing the old rule said compute-bound too


def test_communication_holding_half_the_step_is_communication_bound() -> None:
    summary = step_bound.summarize_steps([_step(20, 60, 20, overlapped=5), _step(20, 40, 40, overlapped=5)])
    verdict = step_bound.step_verdict(summary)
    assert (verdict.kind, verdict.parts) == ("communication-bound", ("communication",))
    assert verdict.shares["communication"] == pytest.approx(0.5)
    assert "Communication(Not Overlapped) 50.0 us (50.0%)" in verdict.text and "at least 50%" in verdict.text
    lines = step_bound.advice(summary, verdict)
    assert lines[0].startswith("hypothesis: communication-bound")
    assert "bucket_cap_mb" in lines[1] and "slow rank" in lines[1] and "fewer, larger collectives" in lines[1]
    assert "Overlapped 5.0 us of 55.0 us communication (9.1% hidden under computing; low" in lines[2]


def test_no_dominant_part_is_mixed_and_names_the_parts_above_a_quarter() -> None:
    summary = step_bound.summarize_steps([_step(40, 35, 25)])
    verdict = step_bound.step_verdict(summary)
    assert verdict.kind == "mixed" and verdict.parts == ("computing", "communication", "free")
    assert verdict.text.startswith(
        "mixed (Computing + Communication(Not Overlapped) + Free): Computing 40.0 us (40.0%)"
    )
    two = step_bound.step_verdict(step_bound.summarize_steps([_step(45, 40, 15)]))
    assert two.parts == ("computing", "communication")  # Free at 15% is under MIXED_PART_SHARE
    advice = step_bound.advice(step_bound.summarize_steps([_step(45, 40, 15)]), two)
    assert [line.split(":")[0] for line in advice[1:3]] == ["try (Computing)", "try (Communication(Not Overlapped))"]


def test_host_bound_beside_some_communication() -> None:
    verdict = step_bound.step_verdict(step_bound.summarize_steps([_step(10, 30, 60)]))
    assert verdict.kind == "host-bound" and "Free 60.0 us (60.0%)" in verdict.text


def test_large_preparing_is_named_with_its_threshold() -> None:
    summary = step_bound.summarize_steps([_step(10, 80, 10, preparing=20)])
    assert step_bound.preparing_note(summary)[0].startswith("note: Preparing 20.0 us per step")
    assert step_bound.preparing_note(step_bound.summarize_steps([_step(10, 80, 10, preparing=5)])) == []


# --- the real capture ------------------------------------------------------------------------------
def test_report_on_the_2_rank_capture_says_communication_bound_with_its_numbers() -> None:
    text, markdown, *_ = dir_report(CAPTURE, bottlenecks=False)
    for rank in (0, 1):
        rows = _csv_steps(rank)
        line = _expected_line(rows)
        assert line in text and line in markdown
        r = rows[0]
        total = r["Computing"] + r["Communication(Not Overlapped)"] + r["Free"]
        table_row = (
            f"{int(r['Step'])}  {r['Computing']:,.1f}  {r['Communication(Not Overlapped)']:,.1f}  "
            f"{r['Overlapped']:,.1f}  {r['Free']:,.1f}  {r['Preparing']:,.1f}  {total:,.1f}"
        )
        squeezed = [" ".join(row.split()) for row in text.splitlines()]
        assert any(
            row.startswith(" ".join(table_row.split())) and row.endswith("communication-bound") for row in squeezed
        ), table_row
        hidden = 100 * r["Overlapped"] / r["Communication"]
        assert f"({hidden:.1f}% hidden under computing; low" in text
    assert "hypothesis: communication-bound" in text and "bucket_cap_mb" in text
    assert "hypothesis: host-bound" not in text


def test_html_draws_the_communication_part_of_each_step() -> None:
    page = dir_report(CAPTURE)[2]
    r = _csv_steps(0)[0]
    assert page.count('data-part="communication"') == 2  # one step on each of the two ranks
    assert f"<title>Communication(Not Overlapped) {r['Communication(Not Overlapped)']:,.1f} us</title>" in page
    assert _expected_line(_csv_steps(1)) in page


def test_cluster_view_gives_the_verdict_over_every_ranks_steps() -> None:
    text = cluster_text(cluster_report(load_cluster(CAPTURE)))
    assert _expected_line(_csv_steps(0) + _csv_steps(1)) in text
    assert text.count("communication-bound") >= 5  # the verdict, its hypothesis, 2 step rows, 2 rank rows


def test_what_each_part_means_is_in_the_docs() -> None:
    doc = (ROOT / "docs" / "bottlenecks.md").read_text()
    assert "communication-bound" in doc and "mixed" in doc
    assert f"{100 * step_bound.DOMINANT_SHARE:.0f}%" in doc and f"{100 * step_bound.MIXED_PART_SHARE:.0f}%" in doc


def test_one_device_bars_have_no_communication_part() -> None:
    from common.render.html import step_bars

    svg = step_bars("steps", [("step 1", 80.0, 20.0), ("step 2", 70.0, 30.0)])  # the cross-mode view's tuples
    assert svg.count('data-part="computing"') == 2 and 'data-part="communication"' not in svg
    assert "Communication" not in svg


def test_the_verdict_is_over_the_median_step_and_an_outlier_step_is_named() -> None:
    """One first step at 5x the others (a host stall) neither decides the verdict nor hides: it is named."""
    steps = [StepTime(i, 900, 0, 0, 0, 100, 1000, 0, None) for i in range(2, 6)]
    steps.insert(0, StepTime(1, 900, 0, 0, 0, 4100, 5000, 0, None))
    verdict = step_bound.step_verdict(step_bound.summarize_steps(steps))
    assert verdict.kind == "compute-bound"  # the mean step would be 900 vs 900: a coin toss
    assert verdict.text.endswith(
        "; step 1 (5,000.0 us) over 1.5x the 1,000.0 us median step: named here, not averaged in"
    )
