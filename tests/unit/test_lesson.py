"""The lesson harness's workload and thread options, the workload-driven checks, N/A verdicts, disturbed runs."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import ROOT, load_lesson

from common.analyze import checks
from common.collect import calibrate
from common.modes.pytorch.steps import run_steps
from common.errors import LabError
from common.formats.outputs import load_output, read_output, save_output
from common.formats.records import OpStat, Task
from common.modes.lesson import Lesson, parse_threads
from common.render import html
from common.render.text import render_verdicts
from common.workload import load_workload, tiny_mlp, workload_identity

CNN, TRANSFORMER = ROOT / "workloads" / "cnn.py", ROOT / "workloads" / "transformer.py"


def _task(op: str, duration: float = 1.0) -> Task:
    return Task(op_name=op, op_type=op, task_type="CPU", start_us=0.0, duration_us=duration)


# --- the harness ------------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["-1", "x", "1.5", "2000", ""])
def test_bad_thread_counts_are_refused(text: str) -> None:
    with pytest.raises(LabError, match="--threads"):
        parse_threads(text)


def test_thread_counts() -> None:
    assert parse_threads("0") == 0 and parse_threads(" 4 ") == 4 and parse_threads(None) is None


def test_workload_identity_without_importing(tmp_path: Path) -> None:
    bad = tmp_path / "broken.py"
    bad.write_text("raise SystemExit('never imported')\n")
    info = workload_identity(str(bad))
    assert info["name"] == "broken" and len(info["sha256"]) == 64
    assert workload_identity(None) == tiny_mlp().info()
    assert workload_identity(str(CNN)) == load_workload(str(CNN)).info()  # what a loaded workload records
    with pytest.raises(LabError, match="does not exist"):
        workload_identity(str(tmp_path / "missing.py"))


def test_start_loads_the_workload_before_touching_the_output(tmp_path: Path, portable) -> None:
    mode = tmp_path / "mode"
    out = mode / "prof_out"
    out.mkdir(parents=True)
    (out / ".msprof_lab").write_text("")
    (out / "keep.txt").write_text("old run")
    bad = tmp_path / "bad.py"
    bad.write_text("def build_model():\n    return 1\n\ndef make_input():\n    return 2\n")
    lesson = Lesson("test", mode, None)
    with pytest.raises(LabError, match="not a torch.nn.Module"):
        lesson.start(["0", "--workload", str(bad)])
    assert (out / "keep.txt").read_text() == "old run"


def test_start_records_workload_and_threads(tmp_path: Path, portable) -> None:
    before = torch.get_num_threads()
    (tmp_path / "mode2").mkdir()
    try:
        run = Lesson("test", tmp_path / "mode2", None).start(["0", "--workload", str(CNN), "--threads", "1"])
        info = json.loads((run.out / "run_info.json").read_text())
        assert info["workload"] == load_workload(CNN).info() and info["threads"] == 1
        assert run.workload is load_workload(CNN) and torch.get_num_threads() == 1
        assert run.child_env["OMP_NUM_THREADS"] == "1"  # a profiled child process gets the same count
    finally:
        torch.set_num_threads(before)


def test_a_failure_in_the_harness_own_work_is_kept_in_the_runs_logs_and_named(
    tmp_path: Path, portable, capsys: pytest.CaptureFixture
) -> None:
    """Mode 04 runs the workload's forward in its own process too (the steps without the profiler): a forward that
    raises there is kept under logs/ and named, as the stderr of a launched program is, and the run is incomplete."""
    from common.modes.lesson import keep_failure

    (tmp_path / "mode3").mkdir()
    lesson = Lesson("test", tmp_path / "mode3", None)

    def main() -> int:
        run = lesson.start(["0"])
        run.record(out=str(run.out))
        raise RuntimeError("forward failed on call 11 (a planted fault)")

    assert keep_failure(main) == 1
    out = tmp_path / "mode3" / "prof_out"
    logs = sorted((out / "logs").glob("*.stderr.log"))
    assert [p.name for p in logs] == ["01-test-harness.stderr.log"]
    assert "RuntimeError: forward failed on call 11" in logs[0].read_text()
    err = capsys.readouterr().err
    assert f"stderr of test-harness: {logs[0]}" in err and "Traceback" in err
    info = json.loads((out / "run_info.json").read_text())
    assert info["completed"] is False and info["failure"].startswith("RuntimeError: forward failed")
    with pytest.raises(LabError):  # a user mistake stays one line, not a kept traceback
        keep_failure(lambda: (_ for _ in ()).throw(LabError("bad", "fix")))


# --- checks from the workload -------------------------------------------------------------------------
def test_top_family_is_declared_or_not_applicable() -> None:
    stats = [
        OpStat("aten::addmm", "CPU", 4, 90.0, 22.0, 22.5, 23.0, 90.0),
        OpStat("aten::gelu", "CPU", 3, 10.0, 3.0, 3.3, 3.6, 10.0),
    ]
    assert checks.check_declared_top_family(stats, tiny_mlp().expected(), "t").ok
    na = checks.check_declared_top_family(stats, load_workload(CNN).expected(), "t")
    assert na.ok and not na.applicable and na.detail == "not applicable: cnn declares no EXPECT['top_family']"
    line = render_verdicts([na, checks.Verdict("x", False, "y")])
    assert line.splitlines() == [
        "[N/A] top family (t): not applicable: cnn declares no EXPECT['top_family']",
        "[FAIL] x: y",
    ]
    assert "[N/A]" in html.verdict_list([na]) and "[PASS]" not in html.verdict_list([na])


def test_output_files_one_or_several(tmp_path: Path) -> None:
    work = load_workload(TRANSFORMER)
    expected = work.expected()
    model = work.build_model()
    with torch.no_grad():
        y = model(*work.inputs())
    save_output(tmp_path / "output.npy", y)
    assert checks.check_output_file(read_output(tmp_path / "output.npy"), "t", expected).ok
    assert not checks.check_output_file(
        read_output(tmp_path / "output.npy"), "t", load_workload(CNN).expected()
    ).ok  # another shape
    save_output(tmp_path / "two.npy", (y, y))
    arrays = load_output(tmp_path / "two.npy")
    assert len(arrays) == 2 and np.array_equal(arrays[1], y.numpy())
    wrong = tmp_path / "wrong.npy"
    np.save(wrong, y.numpy() + 0.01)
    assert not checks.check_output_file(read_output(wrong), "t", expected).ok
    assert not checks.check_output_file(read_output(tmp_path / "none.npy"), "t", expected).ok


def test_training_losses() -> None:
    assert checks.check_training_losses([2.0, 1.5], [2.0, 1.5], "t").ok
    assert not checks.check_training_losses([2.0, 1.6], [2.0, 1.5], "t").ok
    assert not checks.check_training_losses([2.0], [2.0, 1.5], "t").ok


# --- disturbed runs -----------------------------------------------------------------------------------
def test_step_spread_marks_a_disturbed_run() -> None:
    assert calibrate.step_disturbance([100.0, 101.0, 99.0, 100.5, 100.0], "steps") is None
    line = calibrate.step_disturbance([100.0, 100.0, 100.0, 100.0, 400.0], "steps")
    assert line.startswith("disturbed: steps vary") and "above 0.25" in line and "max 400.0 us" in line


def test_the_profilers_slow_step_switch_is_not_a_disturbance(tmp_path: Path) -> None:
    """The switch that closes the active window is slow by design; the check reads the steps' own work."""
    mode = load_lesson("04_pyTorch/src/model_with_profiler.py")
    with mode.portable_profiler(str(tmp_path)) as prof:
        steps = run_steps(lambda: torch.ones(64, 64) @ torch.ones(64, 64), mode.STEPS, prof.step)
    active = slice(-mode.ACTIVE, None)
    assert all(s >= w for s, w in zip(steps.step_us, steps.work_us))
    closing = steps.step_us[-1] - steps.work_us[-1]  # the last active step's prof.step(): collection stops
    # against the other active steps' typical switch (their median: one of them can be slowed by the machine)
    others = sorted(s - w for s, w in zip(steps.step_us[active][:-1], steps.work_us[active][:-1]))
    assert closing > 5 * others[len(others) // 2]  # about 1.3-2 ms against tens of µs
    spread = [steps.work_us[-1] * 5] + steps.work_us[active][1:]  # one step interrupted: still seen
    assert calibrate.step_disturbance(spread, "steps") is not None


def test_calibration_spread_marks_a_disturbed_run(monkeypatch: pytest.MonkeyPatch) -> None:
    peaks = calibrate.calibrate()
    monkeypatch.setattr(
        calibrate, "_measure", lambda threads=None: calibrate.Measured(peaks, {"copy 64 MB": 1.1, "GEMM 1024^3": 3.0})
    )
    line = calibrate.calibration_disturbance()
    assert "GEMM 1024^3 median 3.00x its best" in line and "copy" not in line
    monkeypatch.setattr(calibrate, "_measure", lambda threads=None: calibrate.Measured(peaks, {"copy 64 MB": 1.1}))
    assert calibrate.calibration_disturbance() is None


def test_a_kept_calibration_says_when_it_was_measured_not_now(monkeypatch: pytest.MonkeyPatch) -> None:
    made_now = f"{calibrate.NOW} copy 64 MB 20.0 GB/s (peak = the faster), fp32 GEMM 1024^3 90.0 GFLOP/s"
    kept = {
        "name": "vm (x86_64, 2 threads)",
        "flops_per_s": 9e10,
        "bytes_per_s": 2e10,
        "source": made_now,
        "when": "2026-12-02 08:49 UTC",
        "more_flops": [["bf16", 4.5e11]],
    }
    monkeypatch.setattr(calibrate.cache, "load", lambda kind, key: {"result": kept})
    monkeypatch.setattr(calibrate, "_probe_spread", lambda: {})
    peaks = calibrate._measure.__wrapped__().peaks
    assert peaks.source.startswith("calibrated on this machine: copy 64 MB 20.0 GB/s") and " now" not in peaks.source
    assert peaks.source.endswith(
        "measured 2026-12-02 08:49 UTC, kept while this machine, its thread count and torch are unchanged"
    )
    assert peaks.flops_at("bf16") == 4.5e11 and peaks.flops_at("fp32") == 9e10  # each precision's own peak kept


def test_the_calibration_measures_a_gemm_peak_per_precision_torch_runs() -> None:
    """The peaks of a real calibration: fp32, and bf16/fp16 where torch runs them on this CPU (each measured)."""
    import torch

    peaks, spreads = calibrate._calibrate_torch(torch)
    assert peaks.dtype == "fp32" and peaks.flops_per_s > 0
    measured = {p for p, _ in peaks.more_flops}
    assert measured <= {"bf16", "fp16"} and all(f > 0 for _, f in peaks.more_flops)
    assert {f"{p} GEMM {calibrate.GEMM_N}^3" for p in measured | {"fp32"}} <= set(spreads)
    assert all(f"{p} " in peaks.source for p in measured | {"fp32"})


def test_a_calibration_made_while_the_machine_is_busy_is_said_and_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine busy the whole time slows every repeat alike: their spread cannot show it, the load can."""
    fake = calibrate.Peaks("vm (x86_64, 1 thread)", 6.7e10, 2e10, f"{calibrate.NOW} fp32 GEMM 67.1 GFLOP/s")
    saved = []
    monkeypatch.setattr(calibrate.cache, "load", lambda kind, key: None)
    monkeypatch.setattr(calibrate.cache, "save", lambda *a, **k: saved.append(a))
    monkeypatch.setattr(calibrate, "_calibrate_now", lambda threads=None: (fake, {"GEMM 1024^3": 1.05}))
    monkeypatch.setattr(calibrate, "_load", lambda: "load average 3.02 on 2 cores")
    monkeypatch.setattr(calibrate, "_measure", functools.cache(calibrate._measure.__wrapped__))
    assert calibrate.calibrate(1) is fake and not saved
    line = calibrate.calibration_disturbance(1)
    assert line.startswith("disturbed: other programs kept the cores busy") and "load average 3.02" in line
    monkeypatch.setattr(calibrate, "_load", lambda: None)
    calibrate._measure.cache_clear()
    calibrate.calibrate(1)
    assert len(saved) == 1 and calibrate.calibration_disturbance(1) is None  # quiet: kept


def test_a_captures_peaks_are_calibrated_at_the_thread_count_the_run_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = []
    monkeypatch.setattr(
        calibrate, "calibrate", lambda threads=None: asked.append(threads) or calibrate.Peaks("vm", 1e11, 1e10, "fake")
    )
    calibrate.peaks_for({"backend": "portable", "threads": 1}, [], None)
    calibrate.peaks_for({"backend": "portable"}, [], None)
    assert asked == [1, None]
