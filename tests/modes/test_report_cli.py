"""The lab's command lines driven as a user would: ``python -m common report`` on real captures and damaged
ones, with bounds; ``python -m common.bench make``."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest
from helpers import FIXTURES, error_lines, msprof_output, run


def report(path: Path):
    return run([sys.executable, "-m", "common", "report", str(path)])


def test_report_on_real_msprof_capture(npu_fixtures: Path) -> None:
    proc = report(npu_fixtures / "cann85_minimal")
    assert proc.returncode == 0, proc.stderr
    assert "backend: unknown (no run_info.json" in proc.stdout
    assert "sanitized_kernel  MIX_AIC" in proc.stdout
    assert (npu_fixtures / "cann85_minimal" / "report.md").read_text().startswith("# msprof lab report")


def test_report_on_real_kernel_details(npu_fixtures: Path) -> None:
    proc = report(npu_fixtures / "torch_npu_kernel_details")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    top = next(i for i, line in enumerate(lines) if line.startswith("OP Type"))
    assert lines[top + 2].split()[:3] == ["MatMulV3", "AI_CORE", "8"]  # the largest total first
    assert any(line.split()[:2] == ["matmul", "48.433"] for line in lines)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda p: p.write_text(""), "file is empty"),
        (
            lambda p: p.write_text(p.read_text().splitlines()[0] + "\n0,4294967295,0,1716,k,k\n"),
            "fields where the header has",
        ),
        (
            lambda p: p.write_text(p.read_text().replace("Task Duration(us)", "Duration")),
            "column 'Task Duration(us)' missing",
        ),
    ],
    ids=["empty", "truncated", "wrong-header"],
)
def test_damaged_files_give_one_line(npu_fixtures: Path, damage, message: str) -> None:
    output = msprof_output(npu_fixtures / "cann85_minimal")
    target = next(output.glob("op_summary_*.csv"))
    damage(target)
    proc = report(npu_fixtures / "cann85_minimal")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (line,) = error_lines(proc.stderr)
    assert str(target) in line and message in line


def test_missing_and_empty_directories(tmp_path: Path) -> None:
    proc = report(tmp_path / "nope")
    assert proc.returncode == 2 and "no such directory" in proc.stderr
    proc = report(tmp_path)
    assert proc.returncode == 2 and "no msprof or torch_npu output found" in proc.stderr


def test_usage_error_is_one_line() -> None:
    proc = run([sys.executable, "-m", "common", "frobnicate"])
    assert proc.returncode == 2 and len(error_lines(proc.stderr)) == 1


def test_report_on_damaged_dataset_is_one_error_line(tmp_path: Path) -> None:
    for damage in ("truncated_mid_row", "non_utf8", "nan_duration", "duplicated_header"):
        folder = tmp_path / damage / "PROF_000001_20260101000000000_DAMAGEDFIXTURE00" / "mindstudio_profiler_output"
        folder.mkdir(parents=True)
        shutil.copy(FIXTURES / "damaged" / f"op_summary__{damage}.csv", folder / "op_summary_20260101000000.csv")
        proc = run([sys.executable, "-m", "common", "report", str(tmp_path / damage)])
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        (line,) = error_lines(proc.stderr)
        assert "op_summary_20260101000000.csv:" in line


# --- bottleneck analysis: peaks, bounds and pipes in the report -----------------------------------
def test_report_on_npu_capture_without_shapes_says_unavailable(npu_fixtures) -> None:
    proc = run([sys.executable, "-m", "common", "report", str(npu_fixtures / "cann85_minimal")])
    assert proc.returncode == 0, proc.stderr
    assert "peaks: none (NPU data without a SoC name: pass --soc Ascend910B3" in proc.stdout
    assert "unavailable: no Input Shapes in the profile" in proc.stdout
    assert "aiv_scalar 0.99 >= 0.8: limited by scalar" in proc.stdout
    assert (npu_fixtures / "cann85_minimal" / "report.html").is_file()


def test_report_with_soc_bounds_npu_ops(npu_fixtures) -> None:
    proc = run(
        [
            sys.executable,
            "-m",
            "common",
            "report",
            str(npu_fixtures / "torch_npu_kernel_details"),
            "--soc",
            "Ascend910B3",
        ]
    )
    assert proc.returncode == 0, proc.stderr
    # The table's figures have no published source: the report says they are estimates.
    assert (
        "peaks: estimate (no published source): 20 cube cores x 8192 FLOP/cycle x 1.8 GHz, 1600 GB/s memory"
        in proc.stdout
    )
    add = next(li for li in proc.stdout.splitlines() if li.startswith("Add ") and "512,2,4096" in li)
    assert add.rstrip().endswith("memory")
    bad = run(
        [sys.executable, "-m", "common", "report", str(npu_fixtures / "torch_npu_kernel_details"), "--soc", "Ascend999"]
    )
    assert bad.returncode == 0 and "peaks: none (Ascend999 is not in the peak table" in bad.stdout
    assert error_lines(bad.stderr) == []


# --- python -m common.bench -------------------------------------------------------------------------
def test_bench_make_small_and_bad_arguments(tmp_path: Path) -> None:
    proc = run(
        [
            sys.executable,
            "-m",
            "common.bench",
            "make",
            "--rows",
            "30",
            "--events",
            "3000",
            "--tasks",
            "200",
            "--ranks",
            "2",
            "--out",
            str(tmp_path),
        ]
    )
    assert proc.returncode == 0, proc.stderr
    assert len(list(tmp_path.rglob("op_summary_*.csv"))) == 1 and (tmp_path / "trace_view_3000").is_dir()
    assert len(list((tmp_path / "db_200").rglob("*.db"))) == 1
    assert len(list((tmp_path / "cluster_2").rglob("*_ascend_pt"))) == 2
    proc = run([sys.executable, "-m", "common.bench", "make", "--what", "nonsense", "--out", str(tmp_path)])
    assert proc.returncode == 2 and len(error_lines(proc.stderr)) == 1 and "Traceback" not in proc.stderr


# --- integrity: report prints the checks and exits 1 when the files of an export disagree ------------------
def test_report_exits_1_when_op_statistic_was_tampered_with(npu_fixtures: Path) -> None:
    capture = npu_fixtures / "msinsight_torch_npu" / "text_level1"
    proc = report(capture)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("[PASS] op_statistic agrees with kernel_details") == 2
    assert proc.stdout.count("[PASS] step table agrees with the Overlap Analysis") == 2
    stat = capture / "rank1_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "op_statistic.csv"
    stat.write_text(
        "".join(line for line in stat.read_text().splitlines(keepends=True) if not line.startswith("Conv2D,"))
    )
    proc = report(capture)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    (failed,) = [line for line in proc.stdout.splitlines() if line.startswith("[FAIL]")]
    assert failed.startswith("[FAIL] op_statistic agrees with kernel_details (rank1_ascend_pt/ASCEND_PROFILER_OUTPUT)")
    assert "Conv2D (AI_CORE): op_statistic.csv has no row, kernel_details.csv has 5 tasks" in failed
    assert "1 integrity check(s) FAILED" in proc.stderr
    assert "[FAIL] op_statistic agrees" in (capture / "report.md").read_text()
    page = (capture / "report.html").read_text()
    first = re.search(r"<h2>(.*?)</h2>", page).group(1)  # a failed integrity check leads the page
    assert first.startswith("Integrity") and "Conv2D (AI_CORE): op_statistic.csv has no row" in page


def test_report_names_the_msprof_file_pattern(tmp_path: Path, npu_fixtures: Path) -> None:
    src = next((npu_fixtures / "cann85_minimal").glob("PROF_*/mindstudio_profiler_output/op_summary_*.csv"))
    (tmp_path / "mine").mkdir()
    shutil.copy(src, tmp_path / "mine" / "op_summary_2026.csv")
    proc = report(tmp_path / "mine")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (line,) = error_lines(proc.stderr)
    assert "op_summary_2026.csv" in line and "<name>_<14-digit timestamp>.csv" in line


def test_compare_says_which_side_lacks_which_file(npu_fixtures: Path, tmp_path: Path) -> None:
    base, cand = tmp_path / "base", tmp_path / "cand"
    shutil.copytree(npu_fixtures / "cann85_minimal", base)
    shutil.copytree(npu_fixtures / "cann85_minimal", cand)
    next(cand.glob("PROF_*/mindstudio_profiler_output/op_summary_*.csv")).unlink()
    proc = run([sys.executable, "-m", "common", "compare", str(base), str(cand)])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (line,) = error_lines(proc.stderr)
    assert line.startswith(f"Error: the candidate {cand} has no per-op times: ") and "no op_summary file" in line
