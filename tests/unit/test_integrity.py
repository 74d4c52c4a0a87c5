"""Integrity verdicts: the files of one export agree with each other (op_statistic vs its task file,
step_trace_time vs the timeline's Overlap Analysis, text vs database), and a folder exported twice is
read once (the newest export).

Each damaged case starts from a real capture and changes one thing; the expected numbers are read
from the files by the csv module here, not by the lab's readers.
"""

from __future__ import annotations

import csv
import dataclasses
import shutil
from pathlib import Path

import pytest
from helpers import FIXTURES, dir_report

from common.analyze import checks
from common.analyze.checks import integrity
from common.formats import writers
from common.formats.datasets import Dataset, find_datasets
from common.formats.export_facts import integrity_facts

NPU = FIXTURES / "npu"
LEVEL1 = NPU / "msinsight_torch_npu" / "text_level1"
DB = NPU / "msinsight_torch_npu" / "db_level1"
OUT = "ASCEND_PROFILER_OUTPUT"


def verdicts(root: Path) -> list[checks.Verdict]:
    return checks.integrity_verdicts(integrity_facts(find_datasets(root), root))


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8-sig") as f:
        return list(csv.DictReader(f))


def write_rows(path: Path, header: list[str], records: list[dict[str, str]]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, header, lineterminator="\r\n")
        writer.writeheader()
        writer.writerows(records)


@pytest.fixture
def level1(tmp_path: Path) -> Path:
    target = tmp_path / "text_level1"
    shutil.copytree(LEVEL1 / "rank0_ascend_pt", target / "rank0_ascend_pt")
    return target


@pytest.mark.parametrize(
    "capture", ["cann85_minimal", "msinsight_torch_npu/text_level1", "msinsight_torch_npu/db_level1"]
)
def test_shared_captures_pass(tmp_path: Path, capture: str) -> None:
    root = tmp_path / "c"
    shutil.copytree(NPU / capture, root)
    found = verdicts(root)
    assert found and all(v.ok for v in found), [v for v in found if not v.ok]


def test_op_statistic_rows_deleted_fail_naming_the_op_and_both_numbers(level1: Path) -> None:
    path = level1 / "rank0_ascend_pt" / OUT / "op_statistic.csv"
    records = rows(path)
    kept = [r for r in records if r["OP Type"] != "MaxPoolWithArgmaxV1"]
    assert len(kept) == len(records) - 1
    write_rows(path, list(records[0]), kept)
    kernels = [r for r in rows(path.parent / "kernel_details.csv") if r["Type"] == "MaxPoolWithArgmaxV1"]
    total = sum(float(r["Duration(us)"]) for r in kernels)
    (failed,) = [v for v in verdicts(level1) if not v.ok]
    assert failed.name.startswith("op_statistic agrees with kernel_details")
    assert (
        f"MaxPoolWithArgmaxV1 (AI_VECTOR_CORE): op_statistic.csv has no row, kernel_details.csv has "
        f"{len(kernels)} tasks, {total:,.3f} us"
    ) in failed.detail


def test_half_written_kernel_details_fails(level1: Path) -> None:
    """The last 20 rows cut (at a row boundary, so every remaining row parses): counts no longer add up."""
    path = level1 / "rank0_ascend_pt" / OUT / "kernel_details.csv"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-20]))
    cut = {}
    for r in rows(path):
        cut[r["Type"]] = cut.get(r["Type"], 0) + 1
    stats = {r["OP Type"]: int(r["Count"]) for r in rows(path.parent / "op_statistic.csv")}
    short = sorted(op for op, count in stats.items() if cut.get(op, 0) != count)
    assert short  # the cut removed compute rows
    (failed,) = [v for v in verdicts(level1) if not v.ok]
    assert "kernel_details" in failed.name and f"{len(short)} OP Type(s) disagree" in failed.detail
    first = short[0]
    assert f"{first} (" in failed.detail and f"op_statistic.csv {stats[first]} tasks" in failed.detail


@pytest.mark.parametrize(("delta", "ok"), [(0.004, True), (0.05, False)])
def test_op_statistic_tolerance_is_rounding_only(level1: Path, delta: float, ok: bool) -> None:
    """One task of 17.7 us: 0.004 us off is printing (within 0.01 + 0.001 us), 0.05 us is not."""
    path = level1 / "rank0_ascend_pt" / OUT / "op_statistic.csv"
    records = rows(path)
    row = next(r for r in records if r["OP Type"] == "AdaptiveAvgPool3d")
    assert row["Count"] == "1"
    row["Total Time(us)"] = f"{float(row['Total Time(us)']) + delta:.3f}"
    write_rows(path, list(records[0]), records)
    (verdict,) = [v for v in verdicts(level1) if v.name.startswith("op_statistic")]
    assert verdict.ok is ok, verdict.detail


def test_step_table_edited_fails_against_the_timeline(level1: Path) -> None:
    path = level1 / "rank0_ascend_pt" / OUT / "step_trace_time.csv"
    records = rows(path)
    free = float(records[0]["Free"])
    records[0]["Free"] = f"{free + 100:.3f}"
    write_rows(path, list(records[0]), records)
    (failed,) = [v for v in verdicts(level1) if not v.ok]
    assert failed.name.startswith("step table agrees with the Overlap Analysis")
    assert (
        f"step 50 Free: step_trace_time.csv {free + 100:,.3f} us, trace_view.json Overlap Analysis {free:,.3f} us"
    ) in failed.detail


def test_report_prints_integrity_and_returns_it_beside_a_modes_checks(level1: Path) -> None:
    path = level1 / "rank0_ascend_pt" / OUT / "op_statistic.csv"
    records = rows(path)
    write_rows(path, list(records[0]), [r for r in records if r["OP Type"] != "Relu"])
    text, markdown, _, integrity = dir_report(level1, bottlenecks=False)
    assert "-- Integrity (the files of each export agree with each other) --" in text
    assert "[FAIL] op_statistic agrees with kernel_details" in text and "Relu (AI_VECTOR_CORE)" in markdown
    assert [v.ok for v in integrity].count(False) == 1
    mine = [checks.Verdict("a mode's own check", True, "held")]
    text, _, page, returned = dir_report(level1, mine, bottlenecks=False)
    assert mine == [checks.Verdict("a mode's own check", True, "held")]  # the caller's list is left as it was
    assert "[PASS] a mode's own check" in text and any(not v.ok for v in returned)  # the run's exit counts it
    assert page.count("op_statistic agrees with kernel_details") == len(  # shown once, not computed again
        [v for v in returned if v.name.startswith("op_statistic agrees with kernel_details")]
    )


# --- text and database exports of one capture --------------------------------------------------------
def test_text_and_db_of_different_runs_fail(tmp_path: Path) -> None:
    """The db_level1 database beside the text_level1 export of rank 0: the README says they are different runs."""
    out = tmp_path / "rank0_ascend_pt" / OUT
    shutil.copytree(LEVEL1 / "rank0_ascend_pt" / OUT, out)
    shutil.copy(DB / "rank0_ascend_pt" / OUT / "ascend_pytorch_profiler_0.db", out)
    failed = [v for v in verdicts(tmp_path) if not v.ok]
    tasks = next(v for v in failed if v.name.startswith("text and database exports agree"))
    assert "kernel_details: tasks per OP Type" not in tasks.name and "tasks per OP Type" in tasks.name
    # the first op (by name) both exports ran, with both numbers: the same count, another time
    text_total = sum(
        float(r["Duration(us)"]) for r in rows(out / "kernel_details.csv") if r["Type"] == "AdaptiveAvgPool3d"
    )
    assert tasks.detail.startswith(
        f"AdaptiveAvgPool3d: kernel_details 1 tasks, {text_total:,.3f} us; ascend_pytorch_profiler_0.db 1 tasks, "
    )


def test_text_written_from_the_db_agrees_with_it(tmp_path: Path) -> None:
    """A text export made from the database's own rows (the lab's writers) matches it: the check passes."""
    out = tmp_path / "rank0_ascend_pt" / OUT
    out.mkdir(parents=True)
    shutil.copy(DB / "rank0_ascend_pt" / OUT / "ascend_pytorch_profiler_0.db", out)
    shutil.copy(DB / "rank0_ascend_pt" / OUT / "analysis.db", out)
    db = Dataset("torch_npu_db", out, db=out / "ascend_pytorch_profiler_0.db")
    writers.write_kernel_details(out / "kernel_details.csv", db.tasks)
    writers.write_step_trace_time(out / "step_trace_time.csv", db.steps)
    found = [v for v in verdicts(tmp_path) if v.name.startswith("text and database exports agree")]
    assert len(found) == 2 and all(v.ok for v in found), found


@pytest.mark.parametrize(("shift_us", "ok"), [(0.187, True), (0.25, False)])
def test_step_rows_of_the_two_exports_agree_within_their_rounding(tmp_path: Path, shift_us: float, ok: bool) -> None:
    """The text export sums the timeline's events, each rounded to 0.001 us on its own; the database holds ns.

    Not a capture as recorded: the text side is written from the real database's rows (as above), then its
    step 50 Computing is shifted by the rounding the text export may carry, 0.001 us for each of the step's
    187 Computing events (0.187 us). A millionth of the 132 ms step (0.132 us) failed it before; the
    per-event bound (0.001 us x 191 tasks of the step) holds it, and 0.25 us is still a disagreement.
    """
    out = tmp_path / "rank0_ascend_pt" / OUT
    out.mkdir(parents=True)
    for name in ("ascend_pytorch_profiler_0.db", "analysis.db"):
        shutil.copy(DB / "rank0_ascend_pt" / OUT / name, out)
    db = Dataset("torch_npu_db", out, db=out / "ascend_pytorch_profiler_0.db")
    writers.write_kernel_details(out / "kernel_details.csv", db.tasks)
    (step,) = db.steps
    assert sum(1 for t in db.tasks if t.task_type != "HCCL") == 187 and len(db.tasks) == 191
    writers.write_step_trace_time(
        out / "step_trace_time.csv", [dataclasses.replace(step, computing_us=step.computing_us + shift_us)]
    )
    (table,) = [
        v
        for v in verdicts(tmp_path)
        if v.name.endswith("exports agree (rank0_ascend_pt/ASCEND_PROFILER_OUTPUT): step table")
    ]
    assert table.ok is ok, table.detail
    if ok:
        assert "0.001 us per task of the step" in table.detail
    assert step.computing_us * integrity.STEP_TABLE_REL < 0.187 <= integrity.EXPORT_ROUNDING_US_PER_EVENT * 191


# --- a folder exported twice ---------------------------------------------------------------------------
def msprof_copy(tmp_path: Path) -> Path:
    root = tmp_path / "cann"
    shutil.copytree(NPU / "cann85_minimal", root)
    return next(root.glob("PROF_*/mindstudio_profiler_output"))


def test_two_exports_in_one_folder_read_the_newest_once(tmp_path: Path) -> None:
    out = msprof_copy(tmp_path)
    for old in out.glob("*_20260101000000.*"):  # a re-export a day later: same files, a newer stamp
        shutil.copy(old, out / old.name.replace("20260101000000", "20260102000000"))
    (ds,) = find_datasets(out.parent.parent)
    assert [p.name for p in ds.files("op_summary")] == ["op_summary_20260102000000.csv"]
    assert ds.task_count == 2  # not 4: the older export is not counted again
    assert len(ds.superseded) == 5 and "older export(s) 20260101000000" in ds.source
    assert "newest export (20260102000000)" in ds.source


def test_slices_of_one_export_are_all_read(tmp_path: Path) -> None:
    out = msprof_copy(tmp_path)
    summary = out / "op_summary_20260101000000.csv"
    header, *body = summary.read_text().splitlines(keepends=True)
    (out / "op_summary_slice_0_20260101000000.csv").write_text(header + body[0])
    (out / "op_summary_slice_1_20260101000000.csv").write_text(header + "".join(body[1:]))
    summary.unlink()
    (ds,) = find_datasets(out.parent.parent)
    assert len(ds.files("op_summary")) == 2 and ds.task_count == len(body) and not ds.superseded
    assert all(v.ok for v in verdicts(out.parent.parent))


def test_older_export_with_other_numbers_is_not_mixed_in(tmp_path: Path) -> None:
    """An older export whose op_summary differs: the newest files agree with each other, so integrity passes."""
    out = msprof_copy(tmp_path)
    for new in list(out.glob("*_20260101000000.*")):
        shutil.copy(new, out / new.name.replace("20260101000000", "20251231000000"))
    old = out / "op_summary_20251231000000.csv"
    header, *body = old.read_text().splitlines(keepends=True)
    old.write_text(header + body[0])
    assert all(v.ok for v in verdicts(out.parent.parent))
