"""The cluster view: a capture without a schedule (empty Step), the "differ by at most" figures, and the
cross-check against what msprof-analyze really wrote (tests/fixtures/msprof_analyze_cluster)."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest
from helpers import FIXTURES, cluster_text

from common.analyze.cluster import cluster_report
from common.analyze.slow_rank import RankSummary, find_slow_rank, median_gap, step_gap
from common.collect.msprof_analyze import compare_with_msprof_analyze
from common.errors import LabError
from common.formats.cluster import load_cluster
from common.formats.records import StepTime

CAPTURE = FIXTURES / "npu" / "msinsight_torch_npu" / "text_level1"
MSA = FIXTURES / "msprof_analyze_cluster"


def _no_schedule_copy(tmp_path: Path) -> Path:
    """The capture as torch_npu writes it without a schedule: one row per rank, Step empty."""
    root = tmp_path / "no_schedule"
    shutil.copytree(CAPTURE, root, ignore=shutil.ignore_patterns("trace_view.json", "*memory*", "*mem.csv"))
    for path in root.rglob("step_trace_time.csv"):
        path.chmod(0o644)
        with path.open(newline="") as f:
            rows = list(csv.reader(f))
        for row in rows[1:]:
            row[0] = ""
        with path.open("w", newline="") as f:
            csv.writer(f, lineterminator="\n").writerows(rows)
    return root


def _summary(rank: int, computing: float, free: float, comm: float, step: float = 1000.0) -> RankSummary:
    return RankSummary(rank, computing, comm, comm, free, step)


def _row(step: int | None, computing: float, free: float) -> StepTime:
    return StepTime(step, computing, 0.0, 0.0, 0.0, free, computing + free, 0.0, None)


# --- an empty Step -------------------------------------------------------------------------------
def test_a_capture_without_a_schedule_loads_and_renders(tmp_path: Path) -> None:
    view = load_cluster(_no_schedule_copy(tmp_path))
    assert {r: [s.step for s in rows] for r, rows in view.steps.items()} == {0: [None], 1: [None]}
    text = cluster_text(cluster_report(view))
    assert text.count("communication-bound") >= 5


def test_cross_check_matches_msprof_analyzes_rows_with_an_empty_step(tmp_path: Path) -> None:
    view = load_cluster(_no_schedule_copy(tmp_path))
    verdict = compare_with_msprof_analyze(view.steps, MSA / "no_step.csv")
    assert verdict.ok, verdict.detail
    assert verdict.detail.startswith(
        "2 rank-steps x Computing, Communication(Not Overlapped), Overlapped, "
        "Communication, Free, Stage, Bubble, Preparing (16 values)"
    )


def test_cross_check_with_steps_and_what_makes_it_fail(tmp_path: Path) -> None:
    view = load_cluster(CAPTURE)
    assert compare_with_msprof_analyze(view.steps, MSA / "with_step.csv").ok
    # the view without a schedule does not match rows that have one, and says which pairs differ
    lone = compare_with_msprof_analyze(load_cluster(_no_schedule_copy(tmp_path)).steps, MSA / "with_step.csv")
    assert not lone.ok and "only ours [(0, None), (1, None)], only theirs [(0, 50), (1, 50)]" in lone.detail
    with (MSA / "with_step.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    header = list(rows[0])

    def variant(name: str, edit) -> Path:
        changed = [dict(r) for r in rows]
        edit(changed)
        path = tmp_path / name
        with path.open("w", newline="") as f:
            writer = csv.DictWriter(f, header, lineterminator="\n")
            writer.writeheader()
            writer.writerows(changed)
        return path

    twice = compare_with_msprof_analyze(view.steps, variant("twice.csv", lambda rs: rs.append(dict(rs[0]))))
    assert not twice.ok and "rank 0 step 50 written twice" in twice.detail
    off = compare_with_msprof_analyze(view.steps, variant("off.csv", lambda rs: rs[1].update({"Stage": "131913.5"})))
    assert not off.ok and "largest difference 1.0000 us (rank 1 step 50 Stage)" in off.detail
    nan = compare_with_msprof_analyze(view.steps, variant("nan.csv", lambda rs: rs[0].update({"Free": "nan"})))
    assert not nan.ok and "Free: msprof-analyze wrote 'nan'" in nan.detail
    stage = compare_with_msprof_analyze(
        view.steps, variant("stage.csv", lambda rs: rs.append({**rs[0], "Type": "stage", "Index": "(0, 1)"}))
    )
    assert stage.ok and "rows of other types not compared: {'stage': 1}" in stage.detail


# --- "differ by at most" --------------------------------------------------------------------------
def test_the_spread_is_largest_minus_smallest_not_the_excess_over_the_median() -> None:
    summaries = [_summary(0, 60, 40, 900), _summary(1, 100, 50, 850), _summary(2, 110, 50, 840)]
    gap = median_gap(summaries)
    assert (gap.us, gap.high, gap.low) == (60.0, 2, 0)  # 160 - 100, where 160 - median(100, 150) is only 35
    slow = find_slow_rank(summaries)
    assert slow.rank is None
    assert slow.text.startswith(
        "no slow rank: median Computing + Free differ by at most 60.0 us between ranks "
        "(rank 2 vs rank 0); rank 2 exceeds the other ranks' median by 35.0 us"
    )


def test_the_largest_gap_within_one_step_is_named() -> None:
    steps = {0: [_row(1, 100, 10), _row(2, 100, 10)], 1: [_row(1, 150, 20), _row(2, 60, 10)]}
    gap = step_gap(steps)
    assert (gap.us, gap.high, gap.low, gap.step) == (60.0, 1, 0, 1)  # step 1: 170 - 110
    summaries = [_summary(0, 100, 10, 0, 110), _summary(1, 105, 15, 0, 120)]
    text = find_slow_rank(summaries, steps).text
    assert "differ by at most 10.0 us between ranks (rank 1 vs rank 0)" in text  # the median steps: 120 - 110
    assert text.endswith("within one step they differ by at most 60.0 us (step 1: rank 1 vs rank 0)")


def test_the_real_capture_spread_equals_the_csvs() -> None:
    own = {}
    for rank in (0, 1):
        path = CAPTURE / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
        with path.open(newline="") as f:
            (row,) = list(csv.DictReader(f))
        own[rank] = float(row["Computing"]) + float(row["Free"])
    text = cluster_text(cluster_report(load_cluster(CAPTURE)))
    assert f"differ by at most {abs(own[1] - own[0]):,.1f} us between ranks (rank 1 vs rank 0)" in text


@pytest.mark.parametrize("step", ["", "50", "50.0"])
def test_step_cells_msprof_analyze_writes(step: str, tmp_path: Path) -> None:
    path = tmp_path / "c.csv"
    path.write_text(f"Step,Type,Index,Computing,Communication(Not Overlapped),Free\n{step},rank,0,1.0,2.0,3.0\n")
    want = None if not step else 50
    steps = {0: [StepTime(want, 1.0, 2.0, 0.0, 2.0, 3.0, 6.0, 0.0, None)]}
    verdict = compare_with_msprof_analyze(steps, path)
    assert verdict.ok and "(3 values)" in verdict.detail


def test_a_rank_profiled_twice_is_named_by_its_folders(tmp_path: Path) -> None:
    """Two exports of rank 0 in different sub-folders: the error tells them apart."""
    for level in ("text_level0", "text_level1"):
        shutil.copytree(FIXTURES / "npu" / "msinsight_torch_npu" / level, tmp_path / level)
    with pytest.raises(LabError) as err:
        load_cluster(tmp_path)
    assert "rank 0 has 2 profiles (text_level0/rank0_ascend_pt, text_level1/rank0_ascend_pt)" in err.value.what
