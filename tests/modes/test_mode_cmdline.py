"""Mode 01 end to end, as a user runs it: bash 01_cmdline/run.sh [device] [-- program]."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from helpers import ROOT, error_lines, msprof_output, run

from common.formats import readers
from common.formats.schema import OP_SUMMARY

MODE = ROOT / "01_cmdline"


@pytest.fixture
def out_dir():
    """A lab output folder inside 01_cmdline/, removed afterwards (it carries the lab marker)."""
    path = MODE / "prof_out_test"
    yield path
    if (path / ".msprof_lab").is_file():
        shutil.rmtree(path)


def test_default_program_profiles_and_checks(out_dir: Path) -> None:
    result = run(["bash", "01_cmdline/run.sh", "0", "--output", str(out_dir)])
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("=== msprof lab backend: PORTABLE")
    for check in ("files present", "op counts per forward (01, 23 forwards)", "matmul dominates (01)", "output matches"):
        assert f"[PASS] {check}" in result.stdout
    output = msprof_output(out_dir)
    (summary,) = output.glob("op_summary_*.csv")
    assert summary.read_text().splitlines()[0].split(",") == OP_SUMMARY
    tasks = readers.read_op_summary(summary)
    assert sum(t.op_type == "aten::addmm" for t in tasks) == 4 * 23
    assert {t.task_type for t in tasks} == {"CPU"}  # never an NPU core name on the portable backend
    info = json.loads((out_dir / "run_info.json").read_text())
    assert info["backend"] == "portable" and info["completed"] is True and info["forwards"] == 23
    assert (out_dir / "report.md").read_text().startswith("# msprof lab report")


def test_second_run_replaces_only_its_own_output(out_dir: Path) -> None:
    assert run(["bash", "01_cmdline/run.sh", "--output", str(out_dir), "--", "python3", "tests/apps/other_model.py"]).returncode == 0
    first = {p.name for p in out_dir.glob("PROF_*")}
    assert run(["bash", "01_cmdline/run.sh", "--output", str(out_dir), "--", "python3", "tests/apps/other_model.py"]).returncode == 0
    assert first.isdisjoint({p.name for p in out_dir.glob("PROF_*")})


def test_unchanged_foreign_program_and_its_child_are_profiled(out_dir: Path) -> None:
    app = ROOT / "tests/apps/other_model.py"
    before = hashlib.sha256(app.read_bytes()).hexdigest()
    result = run(["bash", "01_cmdline/run.sh", "0", "--output", str(out_dir), "--", "python3", str(app), "--child"])
    assert result.returncode == 0, result.stderr
    assert hashlib.sha256(app.read_bytes()).hexdigest() == before
    outputs = sorted(out_dir.glob("PROF_*/mindstudio_profiler_output"))
    assert len(outputs) == 2  # one PROF_* per process, as msprof does
    for output in outputs:
        ops = {t.op_type for t in readers.read_op_summary(next(output.glob("op_summary_*.csv")))}
        assert {"aten::addmm", "aten::relu"} <= ops and any("conv" in op for op in ops)
    assert "op counts per forward" not in result.stdout  # expected counts are only known for the lab's model


def test_crashing_program_status_propagates_and_data_is_kept(out_dir: Path) -> None:
    result = run(["bash", "01_cmdline/run.sh", "--output", str(out_dir), "--", "python3", "tests/apps/other_model.py", "--crash"])
    assert result.returncode == 1
    assert "deliberate failure" in result.stderr
    assert any("exited with code 1" in line and "marked incomplete" in line for line in error_lines(result.stderr))
    info = json.loads((out_dir / "run_info.json").read_text())
    assert info["completed"] is False and info["exit_code"] == 1
    assert readers.read_op_summary(next(out_dir.glob("PROF_*/mindstudio_profiler_output/op_summary_*.csv")))


@pytest.mark.parametrize("device", ["abc", "-1", "0;rm -rf /", "99999"])
def test_bad_device_id_one_line_nothing_deleted(device: str, out_dir: Path) -> None:
    out_dir.mkdir()
    (out_dir / ".msprof_lab").write_text("")
    (out_dir / "keep.txt").write_text("x")
    result = run(["bash", "01_cmdline/run.sh", device, "--output", str(out_dir)])
    assert result.returncode == 2
    assert len(error_lines(result.stderr)) == 1 and "not an integer in 0..63" in result.stderr
    assert "Traceback" not in result.stderr and (out_dir / "keep.txt").exists()


def test_existing_foreign_directory_is_refused(out_dir: Path) -> None:
    out_dir.mkdir()
    (out_dir / "mine.txt").write_text("not the lab's")
    try:
        result = run(["bash", "01_cmdline/run.sh", "--output", str(out_dir)])
        assert result.returncode == 2 and "was not made by msprof lab" in result.stderr
        assert (out_dir / "mine.txt").read_text() == "not the lab's"
    finally:
        shutil.rmtree(out_dir)


def test_missing_program_and_outside_output() -> None:
    result = run(["bash", "01_cmdline/run.sh", "0", "--", "python3", "no/such/app.py"])
    assert result.returncode == 2 and error_lines(result.stderr) == ["Error: program no/such/app.py does not exist — check the path of the script to profile"]
    result = run(["bash", "01_cmdline/run.sh", "0", "--output", "/tmp"])
    assert result.returncode == 2 and "is not inside" in result.stderr


def test_program_killed_before_writing_says_nothing_was_saved(out_dir: Path) -> None:
    code = "import os, signal, torch; torch.ones(1); os.kill(os.getpid(), signal.SIGKILL)"
    result = run(["bash", "01_cmdline/run.sh", "--output", str(out_dir), "--", "python3", "-c", code])
    assert result.returncode == 128 + 9
    (line,) = error_lines(result.stderr)
    assert "killed by signal SIGKILL" in line and "no profile could be saved" in line
    assert json.loads((out_dir / "run_info.json").read_text())["completed"] is False
