"""Mode 04 end to end: bash 04_pyTorch/run.sh [device]."""

from __future__ import annotations

import json

import pytest
from helpers import ROOT, assert_workload_checks, error_lines, remove_lab_output, run

from common.formats import readers

MODE = ROOT / "04_pyTorch"


@pytest.fixture(scope="module")
def result():
    out = MODE / "prof_out_test"
    proc = run(["bash", "04_pyTorch/run.sh", "0", "--output", str(out)])
    yield proc, out
    remove_lab_output(out)


def test_run_passes_its_checks(result) -> None:
    proc, _ = result
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("=== msprof lab backend: PORTABLE")
    for check in (
        "files present",
        "every step records the same ops (04, 5 active steps)",
        "matmul dominates (04)",
        "op time vs Computing (04)",
        "output matches",
    ):
        assert f"[PASS] {check}" in proc.stdout
    assert "profiling overhead: median step" in proc.stdout


def test_torch_npu_layout_and_step_table(result) -> None:
    _, out = result
    (run_dir,) = out.glob("*_ascend_pt")
    output = run_dir / "ASCEND_PROFILER_OUTPUT"
    steps = readers.read_step_trace_time(output / "step_trace_time.csv")
    assert [s.step for s in steps] == [4, 5, 6, 7, 8]  # wait 1 + warmup 3, then 5 active
    tasks = readers.read_kernel_details(output / "kernel_details.csv")
    assert {t.step_id for t in tasks} == {4, 5, 6, 7, 8}
    for s in steps:
        inside = [t for t in tasks if t.step_id == s.step]
        assert s.computing_us == pytest.approx(sum(t.duration_us for t in inside), rel=1e-3)
        assert s.free_us >= 0
    events = readers.read_trace(output / "trace_view.json")
    names = {e.args.get("name") for e in events if e.name == "process_name"}
    assert {"Python", "Overlap Analysis", "CPU ops (portable)"} <= names
    computing = sum(e.dur_us for e in events if e.name == "Computing" and e.ph == "X")
    assert computing == pytest.approx(sum(s.computing_us for s in steps), rel=1e-3)
    info = json.loads((run_dir / "profiler_info.json").read_text())
    assert info["config"]["common_config"]["schedule"]["active"] == 5


def test_bad_device_id() -> None:
    proc = run(["bash", "04_pyTorch/run.sh", "0;rm -rf /"])
    assert proc.returncode == 2 and len(error_lines(proc.stderr)) == 1 and "Traceback" not in proc.stderr


def test_report_html_and_run_info(result) -> None:
    _, out = result
    assert (out / "report.html").read_text().startswith("<!DOCTYPE html>")
    info = json.loads((out / "run_info.json").read_text())
    assert info["workload"]["name"] == "TinyMLP" and info["workload"]["path"] is None
    assert info["threads"] == 1 and info["train"] is False


# --- the workload plug-in: --workload FILE, --train ---------------------------------------------------
@pytest.fixture
def out_dir():
    path = MODE / "prof_out_test_workload"
    yield path
    remove_lab_output(path)


# The shipped CNN goes through this mode in test_workloads.py, with the same checks.
@pytest.mark.parametrize(("workload", "families"), [("transformer", {"attention", "norm", "matmul"})])
def test_workload_inference(workload: str, families: set[str], out_dir) -> None:
    path = ROOT / "workloads" / f"{workload}.py"
    proc = run(["bash", "04_pyTorch/run.sh", "0", "--workload", str(path), "--output", str(out_dir)])
    assert proc.returncode == 0, proc.stderr
    assert_workload_checks(proc.stdout, "04", workload, families)
    assert json.loads((out_dir / "run_info.json").read_text())["workload"]["path"] == str(path)


def test_workload_training_steps(out_dir) -> None:
    proc = run(
        [
            "bash",
            "04_pyTorch/run.sh",
            "0",
            "--workload",
            str(ROOT / "workloads/cnn.py"),
            "--train",
            "--output",
            str(out_dir),
        ]
    )
    assert proc.returncode == 0, proc.stderr
    for check in (
        "every training step records the same ops (04",
        "op time vs Computing (04)",
        "training losses match an unprofiled run (04)",
    ):
        assert f"[PASS] {check}" in proc.stdout
    output = next(out_dir.glob("*_ascend_pt")) / "ASCEND_PROFILER_OUTPUT"
    ops = {t.op_type for t in readers.read_kernel_details(output / "kernel_details.csv")}
    assert any("backward" in op.lower() for op in ops), ops  # the backward pass was profiled, not only forwards
    info = json.loads((out_dir / "run_info.json").read_text())
    assert info["train"] is True and len(info["losses"]["profiled"]) == 9
    assert not (out_dir / "output.npy").exists()


def test_train_without_a_loss_one_line_nothing_deleted(out_dir) -> None:
    out_dir.mkdir()
    (out_dir / ".msprof_lab").write_text("")
    (out_dir / "keep.txt").write_text("old run")
    proc = run(["bash", "04_pyTorch/run.sh", "0", "--train", "--output", str(out_dir)])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (line,) = error_lines(proc.stderr)
    assert "--train needs a loss" in line and (out_dir / "keep.txt").read_text() == "old run"


def test_bad_workload_file_one_line_nothing_deleted(out_dir, tmp_path) -> None:
    out_dir.mkdir()
    (out_dir / ".msprof_lab").write_text("")
    (out_dir / "keep.txt").write_text("old run")
    proc = run(["bash", "04_pyTorch/run.sh", "0", "--workload", str(tmp_path / "nope.py"), "--output", str(out_dir)])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (line,) = error_lines(proc.stderr)
    assert "does not exist" in line and (out_dir / "keep.txt").read_text() == "old run"
