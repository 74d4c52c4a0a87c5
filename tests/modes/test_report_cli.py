"""python -m common report, driven as a user would, on real captures and damaged ones."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import error_lines, msprof_output, run


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
        (lambda p: p.write_text(p.read_text().splitlines()[0] + "\n0,4294967295,0,1716,k,k\n"), "fields where the header has"),
        (lambda p: p.write_text(p.read_text().replace("Task Duration(us)", "Duration")), "column 'Task Duration(us)' missing"),
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
