"""Mode 04's dynamic profiling: the portable run collects with the lesson's own watcher; the torch_npu stand-in
follows the documented PROF_CONFIG_PATH behaviour; the NPU path in the dry run starts the job with the
variable, edits profiler_config.json mid-run and reports on the capture (checked in the whole dry run,
test_npu_dryrun.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import ROOT, remove_lab_output, run

from common.modes.pytorch import dynamic
from common.errors import LabError

MODULES = ROOT / "tests" / "npu_dryrun" / "modules"

# A training job with no profiler in it; after 3 optimizer steps it edits profiler_config.json (as a user
# would from another shell) with a whole-second mtime later than torch_npu's init ("later"), or in the second
# of init ("init second"), then takes 5 more.
JOB = """
import json, os, sys, time
began = time.time()
import torch, torch_npu
from pathlib import Path
model = torch.nn.Linear(4, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
def step():
    opt.zero_grad(); model(torch.ones(2, 4)).square().mean().backward(); opt.step()
for _ in range(3):
    step()
cfg = Path(os.environ["PROF_CONFIG_PATH"]) / "profiler_config.json"
data = json.loads(cfg.read_text())
data.update(json.loads(sys.argv[1]))
if sys.argv[2] == "later":
    time.sleep(max(0.0, int(os.path.getmtime(cfg)) + 2 - time.time()))
cfg.write_text(json.dumps(data))
if sys.argv[2] == "init second":
    os.utime(cfg, (int(began) + 0.5, int(began) + 0.5))
for _ in range(5):
    step()
"""


def run_job(tmp_path: Path, changes: dict, release: str = "7.2.0", when: str = "later") -> tuple[list[dict], Path]:
    config, out = tmp_path / "profiler_config_path", tmp_path / "prof"
    log = tmp_path / "calls.jsonl"
    env = {
        **os.environ,
        "PYTHONPATH": f"{MODULES}{os.pathsep}{ROOT}",
        "PROF_CONFIG_PATH": str(config),
        "NPU_DRYRUN_LOG": str(log),
        "NPU_DRYRUN_CAPTURES": str(ROOT / "tests" / "npu_dryrun" / "captures"),
        "NPU_DRYRUN_FIXTURES": str(ROOT / "tests" / "fixtures" / "npu"),
        "NPU_DRYRUN_PTA_VERSION": release,
        "NPU_DRYRUN_POLL_S": "0",
    }  # the watcher looks at every step: these steps take milliseconds
    proc = subprocess.run(
        [sys.executable, "-c", JOB, json.dumps({**changes, "prof_dir": str(out)}), when],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.is_file() else []
    return calls, out


def test_portable_run_collects_with_the_lessons_own_watcher() -> None:
    out = ROOT / "04_pyTorch" / "prof_out_dynamic_test"
    try:
        proc = run(["bash", "04_pyTorch/run_dynamic.sh", "0", "--output", str(out)], timeout=300)
        assert proc.returncode == 0, proc.stderr
        for check in (
            "files present",
            "every training step records the same ops (04 dynamic, 5 active steps)",
            "op time vs Computing (04 dynamic)",
        ):
            assert f"[PASS] {check}" in proc.stdout
        assert "collected by the lesson's watcher (torch.profiler)" in proc.stdout
        config = json.loads((out / "profiler_config_path" / "profiler_config.json").read_text())
        assert config["start_step"] > 0 and config["active"] == 5  # the template, edited by the lab: a step ahead
        assert len(list((out / "torch_profiler").glob("*.pt.trace.json"))) == 1
        assert len(list(out.glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/step_trace_time.csv"))) == 1
    finally:
        remove_lab_output(out)


@pytest.mark.parametrize(
    "release, start, at",
    [("7.2.0", -1, 4), ("7.2.0", 5, 5), ("7.1.0", 5, 5)],
    ids=["7.2.0, -1: the next step", "7.2.0, step 5", "7.1.0, step 5"],
)
def test_stand_in_collects_the_configured_steps_after_the_edit(
    tmp_path: Path, release: str, start: int, at: int
) -> None:
    calls, out = run_job(tmp_path, {"start_step": start, "warmup": 1, "active": 2}, release)
    inits = [c for c in calls if c["call"] == "dynamic_profile.init"]
    collects = [c for c in calls if c["call"] == "dynamic_profile.collect"]
    assert [c["via"] for c in inits] == ["PROF_CONFIG_PATH"]
    assert json.loads((tmp_path / "profiler_config_path" / "profiler_config.json").read_text())["active"] == 2
    assert [c["at_step"] for c in collects] == [at]  # the template was edited after step 3
    assert len([c for c in calls if c["call"] == "profiler.step"]) == 3  # warmup 1 + active 2
    assert len(list(out.glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/step_trace_time.csv"))) == 1


@pytest.mark.parametrize(
    "release, changes, when",
    [
        ("7.2.0", {"start_step": 0, "active": 2}, "later"),
        ("7.2.0", {"start_step": 2, "active": 2}, "later"),
        ("7.1.0", {"start_step": -1, "active": 2}, "later"),  # before 7.2.0 a negative start_step is 0
        ("7.2.0", {"start_step": -1, "active": 2}, "init second"),  # mtime not later than init's whole second
    ],
    ids=[
        "start_step 0 collects nothing",
        "a step already past is ignored",
        "7.1.0: start_step -1 is 0",
        "an edit in the second of init is not seen",
    ],
)
def test_stand_in_collects_nothing(tmp_path: Path, release: str, changes: dict, when: str) -> None:
    calls, out = run_job(tmp_path, changes, release, when)
    assert not [c for c in calls if c["call"] == "dynamic_profile.collect"]
    assert not out.exists()


def test_the_edit_lands_in_a_whole_second_later_than_the_template_and_the_watchers_init(tmp_path: Path) -> None:
    template = tmp_path / dynamic.CONFIG_FILE
    template.write_text("{}")
    os.utime(template, (1_800_000_000.9, 1_800_000_000.9))
    assert dynamic.later_second(template, 1_800_000_001.05) == 1_800_000_003  # seen in the next second
    not_before = int(time.time()) + 2  # as if the watcher had started in the next second
    dynamic.edit_config(tmp_path, {"start_step": 7}, not_before)
    assert int(template.stat().st_mtime) >= not_before


def test_start_step_is_a_step_the_job_has_not_reached_when_the_watcher_reads_it(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text("step 3 at 1.0 s\n")
    assert dynamic.job_progress(log) is None  # one line: no rate yet
    log.write_text("step 3 at 1.0 s\nstep 503 at 2.0 s\n")
    assert dynamic.job_progress(log) == (503, 500.0)
    assert dynamic.start_step_ahead(503, 500.0) == 503 + 500 * dynamic.LEAD_S
    assert dynamic.start_step_ahead(7, 0.1) == 7 + dynamic.LEAD_STEPS  # a slow job: a few steps ahead


def test_config_folder_refuses_a_name_torch_npu_refuses(tmp_path: Path) -> None:
    with pytest.raises(LabError, match="letters, digits and underscores"):
        dynamic.config_folder(tmp_path, "my-config")


def test_edit_config_refuses_a_file_that_is_not_json(tmp_path: Path) -> None:
    (tmp_path / dynamic.CONFIG_FILE).write_text("{not json")
    with pytest.raises(LabError, match="not the JSON template"):
        dynamic.edit_config(tmp_path, {"start_step": 7})
