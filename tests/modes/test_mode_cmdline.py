"""Mode 01 end to end, as a user runs it: bash 01_cmdline/run.sh [device] [-- program]."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import ROOT, assert_workload_checks, error_lines, msprof_output, remove_lab_output, run

from common.formats import readers
from common.formats.schema import OP_SUMMARY

MODE = ROOT / "01_cmdline"


@pytest.fixture
def out_dir():
    """A lab output folder inside 01_cmdline/, removed afterwards (it carries the lab marker)."""
    path = MODE / "prof_out_test"
    yield path
    remove_lab_output(path)


def test_default_program_profiles_and_checks(out_dir: Path) -> None:
    result = run(["bash", "01_cmdline/run.sh", "0", "--output", str(out_dir)])
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("=== msprof lab backend: PORTABLE")
    for check in (
        "files present",
        "every forward records the same ops (01, 23 forwards)",
        "matmul dominates (01)",
        "output matches",
    ):
        assert f"[PASS] {check}" in result.stdout
    output = msprof_output(out_dir)
    (summary,) = output.glob("op_summary_*.csv")
    assert summary.read_text().splitlines()[0].split(",") == OP_SUMMARY
    tasks = readers.read_op_summary(summary)
    assert sum(t.op_type == "aten::addmm" for t in tasks) == 4 * 23
    assert {t.task_type for t in tasks} == {"CPU"}  # never an NPU core name on the portable backend
    info = json.loads((out_dir / "run_info.json").read_text())
    assert info["backend"] == "portable" and info["completed"] is True and info["forwards"] == 23
    # model.py marks every forward with a range, written as msprof_tx: 23 ranges, each holding one forward
    (tx,) = output.glob("msprof_tx_*.csv")
    ranges = [r for r in readers.read_msprof_tx(tx) if r.message == "msprof_lab.forward"]
    assert len(ranges) == 23 and all(r.device_start_us is None for r in ranges)  # a CPU has no device stream
    assert (out_dir / "report.md").read_text().startswith("# msprof lab report")
    # what the README says to read: the Task Wait Time between a forward's tasks, the hypothesis, what to try
    forwards = result.stdout.split("-- Forwards: ")[1].split("\n-- ")[0]
    assert re.search(r"^hypothesis: (host|device)-bound", forwards, re.MULTILINE) and "\ntry: " in forwards
    assert re.search(
        r"evidence: per forward \(median of 20\): op time [\d,.]+ us, Task Wait Time between its tasks", forwards
    )


def test_second_run_replaces_only_its_own_output(out_dir: Path) -> None:
    assert (
        run(
            ["bash", "01_cmdline/run.sh", "--output", str(out_dir), "--", "python3", "tests/apps/other_model.py"]
        ).returncode
        == 0
    )
    first = {p.name for p in out_dir.glob("PROF_*")}
    assert (
        run(
            ["bash", "01_cmdline/run.sh", "--output", str(out_dir), "--", "python3", "tests/apps/other_model.py"]
        ).returncode
        == 0
    )
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
    assert "records the same ops" not in result.stdout  # forwards are marked only by the lab's model.py
    # the run names what it ran: the program, not the lab's default workload
    assert f"program: python3 {app} --child (profiled whole: no workload of the lab's)" in result.stdout
    assert "workload: TinyMLP" not in result.stdout
    info = json.loads((out_dir / "run_info.json").read_text())
    assert info["workload"] is None and info["program"] == ["python3", str(app), "--child"]


def test_crashing_program_status_propagates_and_data_is_kept(out_dir: Path) -> None:
    result = run(
        ["bash", "01_cmdline/run.sh", "--output", str(out_dir), "--", "python3", "tests/apps/other_model.py", "--crash"]
    )
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
    assert result.returncode == 2 and error_lines(result.stderr) == [
        "Error: program no/such/app.py does not exist — check the path of the script to profile"
    ]
    result = run(["bash", "01_cmdline/run.sh", "0", "--output", "/tmp"])
    assert result.returncode == 2 and "is not inside" in result.stderr


def test_program_killed_before_writing_says_nothing_was_saved(out_dir: Path) -> None:
    code = "import os, signal, torch; torch.ones(1); os.kill(os.getpid(), signal.SIGKILL)"
    result = run(["bash", "01_cmdline/run.sh", "--output", str(out_dir), "--", "python3", "-c", code])
    assert result.returncode == 128 + 9
    (line,) = error_lines(result.stderr)
    assert "killed by signal SIGKILL" in line and "no profile could be saved" in line
    assert json.loads((out_dir / "run_info.json").read_text())["completed"] is False


# --- the workload plug-in: --workload FILE ---------------------------------------------------------
# The shipped CNN goes through this mode in test_workloads.py, with the same checks.
@pytest.mark.parametrize(("workload", "families"), [("transformer", {"attention", "norm", "matmul"})])
def test_workload_files_profile_and_check(workload: str, families: set[str], out_dir: Path) -> None:
    path = ROOT / "workloads" / f"{workload}.py"
    result = run(["bash", "01_cmdline/run.sh", "0", "--workload", str(path), "--output", str(out_dir)])
    assert result.returncode == 0, result.stderr
    assert_workload_checks(result.stdout, "01", workload, families)
    info = json.loads((out_dir / "run_info.json").read_text())
    assert (
        info["workload"]["path"] == str(path)
        and info["workload"]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
        and info["threads"] == 1
    )
    assert "--model" in info["command"] and (out_dir / "report.html").read_text().startswith("<!DOCTYPE html>")


def test_bad_workload_file_one_line_nothing_deleted(out_dir: Path, tmp_path: Path) -> None:
    out_dir.mkdir()
    (out_dir / ".msprof_lab").write_text("")
    (out_dir / "keep.txt").write_text("old run")
    bad = tmp_path / "typo.py"
    bad.write_text("def build_model(:\n")
    result = run(["bash", "01_cmdline/run.sh", "0", "--workload", str(bad), "--output", str(out_dir)])
    assert result.returncode == 2 and "Traceback" not in result.stderr
    (line,) = error_lines(result.stderr)
    assert "syntax error at line 1" in line and (out_dir / "keep.txt").read_text() == "old run"


def _without_lab_python() -> dict[str, str]:
    """The environment of a user's shell: no $PYTHON, a PATH without the lab's environment."""
    return {"PYTHON": "", "PATH": "/usr/local/bin:/usr/bin:/bin"}


def test_own_program_command_as_written_finds_the_lab_environment(out_dir: Path, tmp_path: Path) -> None:
    prog = tmp_path / "prog.py"
    prog.write_text(
        "import torch\nm = torch.nn.Linear(8, 8)\nfor _ in range(3):\n    m(torch.ones(2, 8))\nprint('prog ran')\n"
    )
    env = _without_lab_python()
    if not (ROOT / ".nox" / "lab-portable" / ".lab-stamp").is_file():
        pytest.skip("the lab environment .nox/lab-portable is not built in this checkout")
    result = run(["bash", "01_cmdline/run.sh", "0", "--output", str(out_dir), "--", "python3", str(prog)], **env)
    assert result.returncode == 0, result.stderr
    assert "prog ran" in result.stdout and "Traceback" not in result.stderr
    assert "[PASS] files present" in result.stdout


def test_own_program_without_a_lab_environment_says_how_to_build_it(tmp_path: Path) -> None:
    from helpers import copy_lab

    lab = copy_lab(tmp_path / "lab")  # a checkout where nox never ran: no .nox/
    result = subprocess.run(
        ["bash", str(lab / "01_cmdline/run.sh"), "0", "--", "python3", "prog.py"],
        cwd=tmp_path,
        env={**os.environ, "PYTHON": "", "PATH": "/usr/local/bin:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr and result.stdout == ""
    (line,) = error_lines(result.stderr)
    assert "python3 -m pip install nox && nox -s cmdline" in line
