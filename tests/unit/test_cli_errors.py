"""Every refusal names its real cause, and terminal tables fit 120 columns (Markdown keeps every character)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from helpers import FIXTURES, dir_report

from common.analyze.compare import compare
from common.formats.run_ops import load_side
from common.modes.reports import directory_report
from common.errors import LabError
from common.formats.datasets import find_datasets
from common.render.text import ELLIPSIS, MAX_WIDTH, render_markdown_table, render_table

NPU = FIXTURES / "npu"
DB_OUT = NPU / "msinsight_torch_npu" / "db_level1" / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"


def msprof_copy(tmp_path: Path, name: str = "cann") -> Path:
    shutil.copytree(NPU / "cann85_minimal", tmp_path / name)
    return tmp_path / name


def test_files_named_unlike_msprof_name_the_pattern(tmp_path: Path) -> None:
    src = next((NPU / "cann85_minimal").glob("PROF_*/mindstudio_profiler_output/op_summary_*.csv"))
    (tmp_path / "out").mkdir()
    shutil.copy(src, tmp_path / "out" / "op_summary.csv")  # the timestamp dropped by hand
    with pytest.raises(LabError) as err:
        find_datasets(tmp_path)
    assert "out/op_summary.csv" in err.value.what
    assert "<name>_<14-digit timestamp>.csv" in err.value.fix and "op_summary_20260101000000.csv" in err.value.fix


def test_only_an_analysis_db_says_it_is_not_the_profile(tmp_path: Path) -> None:
    shutil.copy(DB_OUT / "analysis.db", tmp_path)
    with pytest.raises(LabError) as err:
        find_datasets(tmp_path)
    assert "only database file(s) that are not a profiler export: analysis.db" in err.value.what
    assert "ascend_pytorch_profiler[_<rank>].db" in err.value.fix


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode")
def test_an_unreadable_db_export_says_so(tmp_path: Path) -> None:
    db = tmp_path / "ascend_pytorch_profiler_0.db"
    shutil.copy(DB_OUT / "ascend_pytorch_profiler_0.db", db)
    db.chmod(0)
    try:
        with pytest.raises(LabError) as err:
            directory_report(tmp_path, bottlenecks=False)
    finally:
        db.chmod(0o644)
    assert str(db) in err.value.what and "cannot read" in err.value.what


def test_an_empty_db_export_says_so(tmp_path: Path) -> None:
    (tmp_path / "ascend_pytorch_profiler_0.db").write_bytes(b"")
    with pytest.raises(LabError) as err:
        directory_report(tmp_path, bottlenecks=False)
    assert "ascend_pytorch_profiler_0.db: file is empty (0 bytes)" in err.value.what


@pytest.mark.parametrize("task_file", ["op_summary", "kernel_details"])
def test_a_task_file_with_only_its_header_is_refused(tmp_path: Path, task_file: str) -> None:
    """msprof and torch_npu write a task file only when tasks ran: a header alone is an export cut short."""
    damaged = FIXTURES / "damaged" / f"{task_file}__header_only.csv"
    if task_file == "op_summary":
        target = tmp_path / "PROF_1" / "mindstudio_profiler_output" / "op_summary_20260101000000.csv"
    else:
        target = tmp_path / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    target.parent.mkdir(parents=True)
    shutil.copy(damaged, target)
    with pytest.raises(LabError) as err:
        directory_report(tmp_path, bottlenecks=False)
    assert err.value.what == f"{target}: only the header line, no task rows" and "cut short" in err.value.fix


@pytest.mark.parametrize("side", ["baseline", "candidate"])
def test_compare_names_the_side_that_lacks_op_summary(tmp_path: Path, side: str) -> None:
    base, cand = msprof_copy(tmp_path, "base"), msprof_copy(tmp_path, "cand")
    lacking = base if side == "baseline" else cand
    next(lacking.glob("PROF_*/mindstudio_profiler_output/op_summary_*.csv")).unlink()
    with pytest.raises(LabError) as err:
        compare(load_side(base), load_side(cand), 10.0)
    assert err.value.what.startswith(f"the {side} {lacking} has no per-op times: ")
    assert "mindstudio_profiler_output has no op_summary file (it has op_statistic, api_statistic" in err.value.what
    assert "not the same workload" not in err.value.what


# --- terminal tables --------------------------------------------------------------------------------
SHAPES = "8192,15365;8192,4096;4096,15365;" * 6


def test_long_input_shapes_are_cut_in_the_terminal_only() -> None:
    from common.render.directory import BOUND_HEADER as header

    rows = [["FlashAttentionScoreGrad", SHAPES, 4, 759.61, None, None, None, None, "unavailable: no work model"]]
    text = render_table(header, rows)
    assert max(len(line) for line in text.splitlines()) <= MAX_WIDTH
    lines = text.splitlines()
    body = lines[next(i for i, line in enumerate(lines) if line.startswith("----")) + 1]
    assert ELLIPSIS in body and SHAPES not in body and body.startswith("FlashAttentionScoreGrad ")
    assert "759.610" in body  # numbers are never cut, nor the op's name
    words = " ".join(
        " ".join(line[body.index("unavailable") :] for line in lines if len(line) > body.index("unavailable")).split()
    )
    assert "unavailable: no work model" in words  # a cell of words wraps, whole, onto more lines
    assert SHAPES in render_markdown_table(header, rows)


def test_a_wide_step_table_wraps_its_headers_and_keeps_every_value() -> None:
    from common.render.directory import STEP_HEADER

    row = [
        50,
        8903.431,
        98071.947,
        4036.153,
        25258.144,
        18055.693,
        132233.522,
        6.733,
        74.166,
        19.101,
        "communication-bound",
    ]
    text = render_table(STEP_HEADER, [row])
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= MAX_WIDTH
    assert ELLIPSIS not in text and lines[-1].rstrip().endswith("communication-bound")
    assert lines[-1].split()[:3] == ["50", "8,903.4", "98,071.9"]
    dashes = next(i for i, line in enumerate(lines) if line.startswith("----"))
    assert dashes > 1  # the headers went onto more than one line
    words = " ".join(" ".join(lines[:dashes]).split())
    for word in ("Computing", "Overlapped", "Preparing", "(us)", "(%)"):
        assert word in words


def test_a_narrow_table_is_unchanged() -> None:
    assert render_table(["OP Type", "Count"], [["MatMulV2", 8]]).splitlines() == [
        "OP Type   Count",
        "--------  -----",
        "MatMulV2      8",
    ]


def test_reports_of_every_real_capture_fit_the_terminal(tmp_path: Path) -> None:
    shutil.copytree(NPU, tmp_path / "npu")
    for capture in ("cann85_minimal", "torch_npu_kernel_details", "torch_npu_trace_view", "msinsight_torch_npu"):
        text, *_ = dir_report(tmp_path / "npu" / capture)
        tables = [line for line in text.splitlines() if "  " in line]  # table rows: cells apart by two spaces
        assert tables and max(len(line) for line in tables) <= MAX_WIDTH, capture


def test_a_file_given_for_a_folder_is_named_so_by_every_command(tmp_path: Path) -> None:
    from common.formats.cluster import load_cluster

    file = tmp_path / "op_summary.csv"
    file.write_text("a,b\n")
    for load in (directory_report, load_side, load_cluster):
        with pytest.raises(LabError) as err:
            load(file)
        assert err.value.what == f"{file} is not a directory" and err.value.fix.endswith(", not a file"), load
        with pytest.raises(LabError) as err:
            load(tmp_path / "missing")
        assert err.value.what == f"{tmp_path / 'missing'}: no such directory", load


def test_compare_of_a_folder_with_itself_says_so(tmp_path: Path, capsys) -> None:
    from common.cli import commands

    base = msprof_copy(tmp_path, "base")
    assert commands.main(["compare", str(base), str(base / ".")]) == 0
    assert "note: the baseline and the candidate are the same folder" in capsys.readouterr().out
    assert commands.main(["compare", str(base), str(msprof_copy(tmp_path, "other"))]) == 0
    assert "same folder" not in capsys.readouterr().out


def test_a_timeline_alone_says_its_ops_are_not_available(tmp_path: Path) -> None:
    shutil.copytree(NPU / "torch_npu_trace_view", tmp_path / "tv")
    text, markdown, *_ = dir_report(tmp_path / "tv", bottlenecks=False)
    for report in (text, markdown):
        assert "no op statistics and no task file (op_summary / kernel_details)" in report
        assert "Top ops" not in report and "OP Type" not in report and "-- Steps" in text


def test_compare_of_a_lab_run_with_an_outside_capture_names_each_side(tmp_path: Path) -> None:
    import json

    lab, outside = msprof_copy(tmp_path, "lab"), msprof_copy(tmp_path, "outside")
    (lab / "run_info.json").write_text(
        json.dumps({"mode": "cmdline", "backend": "npu", "completed": True, "forwards": 23})
    )
    for base, cand, counted in ((lab, outside, "baseline"), (outside, lab, "candidate")):
        with pytest.raises(LabError) as err:
            compare(load_side(base), load_side(cand), 10.0)
        assert err.value.what.startswith(f"the {counted} says how many forwards it profiled (a run of the lab)")


def test_ops_only_on_one_side_are_listed_largest_first() -> None:
    from common.analyze.compare import _largest_only

    ops = {("", f"Op{i}", "1,2"): float(i) for i in range(7)}
    assert _largest_only(ops, {("", "Op6", "1,2"): 1.0}) == ("Op5 [1,2], Op4 [1,2], Op3 [1,2], Op2 [1,2] (+2 more)")
    assert _largest_only({}, ops) == "-"
