"""Mode 04, dynamic profiling (``04_pyTorch/run_dynamic.sh``): a training job profiled on demand, mid-run.

The lab around ``04_pyTorch/src/dynamic_profile.py``: it starts the lesson as the job, with
``PROF_CONFIG_PATH=<out>/profiler_config_path`` and no profiler call in its loop, waits for the
template ``profiler_config.json``, edits it as a user would from a second shell (start a few seconds'
steps ahead of the step the job last printed, warm-up 1, active 5, Level1 + PipeUtilization, ``analyse``
on), in a whole second later than the template's, waits for the capture, stops the job, and checks it:
mode 04's files, 5 training steps with the same ops, Σ op time ≈ Computing.
On an NPU torch_npu watches the file; elsewhere the lesson's own watcher starts torch.profiler,
and the lab converts its trace into torch_npu's layout.

Usage: ``bash 04_pyTorch/run_dynamic.sh [device] [--workload FILE]``.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import time
from pathlib import Path

from common.analyze import grouping
from common.errors import LabError

CONFIG_FILE = "profiler_config.json"
STOP_FILE = "stop_job"  # the lab's own signal to its job (not torch_npu's): stop after the current step
POLL_S = 0.2
SAFE_NAME = re.compile(r"[A-Za-z0-9_]+")  # torch_npu: letters, digits and underscores, no symbolic links


def config_folder(out: Path, name: str) -> Path:
    """``<out>/<name>``: the folder PROF_CONFIG_PATH names, checked against torch_npu's rule for its name."""
    if not SAFE_NAME.fullmatch(name):
        raise LabError(
            f"config folder {name!r} has characters torch_npu refuses", "use letters, digits and underscores only"
        )
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def start_job(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    """The job as an argv list (never a shell), its stdout and stderr into ``log``."""
    with log.open("w", encoding="utf-8") as sink:
        return subprocess.Popen(argv, env=env, stdout=sink, stderr=subprocess.STDOUT)


def wait_for(found, job: subprocess.Popen, timeout_s: float, what: str, log: Path):
    """Poll ``found()`` until it returns something truthy; the job ending first or the timeout is a LabError."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = found()
        if result:
            return result
        if job.poll() is not None:
            raise LabError(f"the job ended (exit {job.returncode}) before {what}", f"see {log}")
        time.sleep(POLL_S)
    raise LabError(f"no {what} after {timeout_s:.0f} s", f"see {log}")


def edit_config(folder: Path, changes: dict, not_before_s: int = 0) -> dict:
    """Read torch_npu's template, apply ``changes`` and write it back in one move (never half a file), with a
    modification time in whole second ``not_before_s`` or later (PTA-DYNAMIC: torch_npu compares whole seconds)."""
    path = folder / CONFIG_FILE
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise LabError(
            f"{path} is not the JSON template torch_npu writes ({err})",
            "check the torch_npu version; dynamic profiling needs 6.0.RC3 or later",
        ) from err
    config.update(changes)
    temporary = path.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    os.replace(temporary, path)
    if int(path.stat().st_mtime) < not_before_s:  # a file system's clock may lag time.time() by a tick
        now = max(time.time(), not_before_s)
        os.utime(path, (now, now))
    return config


def later_second(template: Path, seen_s: float) -> int:
    """The first whole second an edit of ``template`` may carry: torch_npu's watcher takes a change only when the
    file's whole-second mtime differs from the template's and is later than the second it initialised in, which
    follows the template's writing (PTA-DYNAMIC). Two seconds past the later of the template's mtime and the time
    the lab saw it are past both."""
    return max(int(template.stat().st_mtime), int(seen_s)) + 2


def wait_until(second: int) -> None:
    """Sleep until the wall clock is in whole second ``second`` or later."""
    while (left := second - time.time()) > 0:
        time.sleep(left)


PROGRESS = re.compile(r"^step ([0-9]+) at ([0-9.]+) s$", re.M)  # what the lesson prints about once a second


def job_progress(log: Path) -> tuple[int, float] | None:
    """(the step the job printed last, steps per second between its last two lines), or None before two lines."""
    found = [(int(n), float(t)) for n, t in PROGRESS.findall(log.read_text(encoding="utf-8", errors="replace"))]
    if len(found) < 2 or found[-1][1] <= found[-2][1]:
        return None
    (n0, t0), (n1, t1) = found[-2:]
    return n1, (n1 - n0) / (t1 - t0)


def start_step_ahead(step: int, steps_per_s: float) -> int:
    """A ``start_step`` the job has not reached by the time torch_npu's watcher has read the edit: what older
    torch_npu releases need (before 7.2.0 a negative start_step is 0, never reached; PTA-DYNAMIC), and what
    every release takes."""
    return step + max(LEAD_STEPS, math.ceil(steps_per_s * LEAD_S))


def finished_capture(prof_dir: Path) -> Path | None:
    """The first ``*_ascend_pt`` under ``prof_dir`` whose ASCEND_PROFILER_OUTPUT holds step_trace_time.csv, or
    torch.profiler's ``*.pt.trace.json`` (complete once the job has taken its next step: :func:`stop_job`)."""
    return next(
        (
            p
            for p in sorted(prof_dir.glob("*_ascend_pt"))
            if (p / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv").is_file()
        ),
        next(iter(sorted(prof_dir.glob("*.pt.trace.json"))), None),
    )


def stop_job(folder: Path, job: subprocess.Popen, timeout_s: float, log: Path) -> int:
    """Ask the job to stop after its current step (torch_npu parses inside that step), wait for it; its exit code."""
    (folder / STOP_FILE).touch()
    try:
        return job.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        job.kill()
        job.wait()
        raise LabError(f"the job did not stop within {timeout_s:.0f} s of being asked", f"see {log}") from None


# --- the run ------------------------------------------------------------------------------------------
CONFIG_DIR = "profiler_config_path"  # PROF_CONFIG_PATH: letters, digits, underscores only (torch_npu's rule)
LESSON = "dynamic_profile.py"
DYNAMIC_WARMUP, DYNAMIC_ACTIVE = 1, 5  # one step to settle, five recorded: the active steps of mode 04's own run
# What a user would type into profiler_config.json; every other field keeps the template's value. start_step is
# a step ahead of the job (start_step_ahead): -1 ("the next step") only from torch_npu 7.2.0 on.
# analyse true: parse right after collecting, inside the job's step, so ASCEND_PROFILER_OUTPUT/ exists.
CHANGES = {
    "warmup": DYNAMIC_WARMUP,
    "active": DYNAMIC_ACTIVE,
    "analyse": True,
    "async_mode": False,
    "record_shapes": True,
    "experimental_config": {
        "profiler_level": "Level1",
        "aic_metrics": "PipeUtilization",
        "data_simplification": False,
    },  # as mode 04: PMU, op_statistic, msprof's CSVs
}
TEMPLATE_TIMEOUT_S = 180  # importing torch_npu and starting its watcher
PROGRESS_TIMEOUT_S = 300  # the job's first steps (a graph compiled on the first), two progress lines
# How far ahead start_step is: the last progress line's age (1 s), the watcher's poll (2 s, or a step's time,
# PTA-DYNAMIC) and the edit's own second, with room to spare; never fewer than LEAD_STEPS steps.
LEAD_S, LEAD_STEPS = 10.0, 3
CAPTURE_TIMEOUT_S = 600  # the watcher's poll (every 2 s), the steps, then parsing
STOP_TIMEOUT_S = 300


def profile_running_job(run) -> dict:
    """Start the job with PROF_CONFIG_PATH, edit profiler_config.json once it exists, wait for the capture."""
    from common.modes.pytorch import TORCH_TRACE_DIR, convert_portable, device_arg, lesson_argv, model_args

    config_dir = config_folder(run.out, CONFIG_DIR)
    prof_dir = run.out if run.npu else run.out / TORCH_TRACE_DIR  # torch_npu writes *_ascend_pt/ itself
    argv = lesson_argv(LESSON, "--device", device_arg(run), *model_args(run))
    run.record(lesson=argv[1:])
    env = {**os.environ, **run.child_env, "PROF_CONFIG_PATH": str(config_dir)}  # the one thing a user sets
    log = run.out / "job.log"
    job_process = start_job(argv, env, log)
    try:
        wait_for(
            lambda: (config_dir / CONFIG_FILE).is_file(),
            job_process,
            TEMPLATE_TIMEOUT_S,
            f"the template {config_dir / CONFIG_FILE}",
            log,
        )
        not_before = later_second(config_dir / CONFIG_FILE, time.time())
        wait_until(not_before)
        # From a second shell this is: read the job's step, edit profiler_config.json, save.
        step, rate = wait_for(lambda: job_progress(log), job_process, PROGRESS_TIMEOUT_S, "two progress lines", log)
        activities = ["CPU", "NPU"] if run.npu else ["CPU"]
        config = edit_config(
            config_dir,
            {
                **CHANGES,
                "start_step": start_step_ahead(step, rate),
                "activities": activities,
                "prof_dir": str(prof_dir),
            },
            not_before,
        )
        capture = wait_for(
            lambda: finished_capture(prof_dir), job_process, CAPTURE_TIMEOUT_S, f"capture in {prof_dir}", log
        )
        code = stop_job(config_dir, job_process, STOP_TIMEOUT_S, log)
    finally:
        if job_process.poll() is None:
            job_process.kill()
            job_process.wait()
    if code != 0:
        raise LabError(f"the job exited {code}", f"see {log}")
    if not run.npu:  # torch.profiler's trace, in torch_npu's layout (first recorded step: after the warm-up)
        convert_portable(run, prof_dir, 0, DYNAMIC_WARMUP, DYNAMIC_ACTIVE)
    return {"config": config, "capture": capture.name, "job_exit": code, "job_step_at_edit": step}


def check_run(run) -> list:
    """The capture has mode 04's files, the active training steps with the same ops, Σ op time ≈ Computing."""
    from common.analyze import checks
    from common.formats.datasets import file_rows, tasks_of

    where = f"04 dynamic, {DYNAMIC_ACTIVE} active steps"
    datasets = run.datasets(kind="torch_npu")
    tasks = [t for t in tasks_of(datasets) if t.step_id is not None]
    steps = [s for ds in datasets for s in ds.steps]
    return [
        checks.check_files(
            file_rows(datasets, ["kernel_details", "op_statistic", "step_trace_time", "trace_view"]), "04 dynamic"
        ),
        checks.check_same_records(grouping.records_by_step(tasks), DYNAMIC_ACTIVE, where, "training step"),
        checks.check_sum_vs_computing(tasks, steps, "04 dynamic"),
    ]


def main(argv: list[str] | None = None) -> int:
    from common.modes.lesson import Lesson, require_module
    from common.modes.pytorch import MODE_DIR

    lesson = Lesson("pytorch", MODE_DIR, __doc__, prog="04_pyTorch/run_dynamic.sh")
    args = lesson.parse(argv)
    out = MODE_DIR / "prof_out_dynamic" if args.output is None else None
    run = lesson.start(args=args, out=out, train=True, dynamic={"warmup": DYNAMIC_WARMUP, "active": DYNAMIC_ACTIVE})
    require_module(run.backend, "torch_npu", "pip install torch_npu matching your torch")
    found = profile_running_job(run)
    run.finish(completed=True, dynamic=found)
    watcher = "torch_npu's watcher" if run.npu else "the lesson's watcher (torch.profiler)"
    return run.report(
        check_run(run),
        notes=[
            f"dynamic profiling: PROF_CONFIG_PATH={run.out / CONFIG_DIR}; profiler_config.json edited while the job ran "
            f"(start_step {found['config']['start_step']}, the job at step {found['job_step_at_edit']}; warmup "
            f"{DYNAMIC_WARMUP}, active {DYNAMIC_ACTIVE}), collected by {watcher}; "
            f"capture {found['capture']}"
        ],
    )


if __name__ == "__main__":
    from common.modes.lesson import main_of

    main_of(main)
