"""Mode 04 end to end: bash 04_pyTorch/run.sh [device]."""

from __future__ import annotations

import json
import shutil

import pytest
from helpers import ROOT, error_lines, run

from common.formats import readers

MODE = ROOT / "04_pyTorch"


@pytest.fixture(scope="module")
def result():
    out = MODE / "prof_out_test"
    proc = run(["bash", "04_pyTorch/run.sh", "0", "--output", str(out)])
    yield proc, out
    if (out / ".msprof_lab").is_file():
        shutil.rmtree(out)


def test_run_passes_its_checks(result) -> None:
    proc, _ = result
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("=== msprof lab backend: PORTABLE")
    for check in ("files present", "op counts per forward (04, 5 active steps)", "matmul dominates (04)",
                  "op time vs Computing (04)", "output matches"):
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
