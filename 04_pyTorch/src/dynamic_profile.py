"""Mode 04, dynamic profiling — profile a training job that is already running, with no code change.

What you will do: start the workload's training loop (TinyMLP, or your model with ``--workload
FILE``) as a job with ``PROF_CONFIG_PATH=<folder>`` in its environment and not one profiler call
in its code; torch_npu writes a template ``<folder>/profiler_config.json`` and watches it. Part
way through the run, the lesson edits that file as you would from a second shell, torch_npu
collects the configured steps into ``*_ascend_pt/``, and the lesson reads that capture like any other.

What you will learn:
- how to profile a long job on demand: set one variable at start-up, edit one file when you want a capture;
- what the file says: ``start_step`` (-1: the next step), ``warmup``, ``active``, ``prof_dir``, the level;
- what counts as a step without code: the native ``torch.optim`` optimizer's ``step()``, so training only.

NPU only: the watcher is torch_npu's. On the portable backend the run says so in one line and
collects nothing. Usage: ``bash 04_pyTorch/run_dynamic.sh [device] [--workload FILE]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

MODE_DIR = Path(__file__).resolve().parent.parent
CONFIG_DIR = "profiler_config_path"  # PROF_CONFIG_PATH: letters, digits, underscores only (torch_npu's rule)
WARMUP, ACTIVE = 1, 5  # one step to settle, five recorded: the active steps of mode 04's own run
# What you would type into profiler_config.json; every other field keeps the template's value.
# start_step -1: start at the next step (0 collects nothing; a step already past is ignored).
# analyse true: parse right after collecting, inside the job's step, so ASCEND_PROFILER_OUTPUT/ exists.
CHANGES = {
    "start_step": -1, "warmup": WARMUP, "active": ACTIVE, "analyse": True, "async_mode": False,
    "record_shapes": True, "activities": ["CPU", "NPU"],
    "experimental_config": {"profiler_level": "Level1", "aic_metrics": "PipeUtilization",
                            "data_simplification": False},  # as mode 04: PMU, op_statistic, msprof's CSVs
}
TEMPLATE_TIMEOUT_S = 180  # importing torch_npu and starting its watcher
CAPTURE_TIMEOUT_S = 600  # the watcher's poll (every 2 s), the steps, then parsing
STOP_TIMEOUT_S = 300
MAX_JOB_STEPS = 1_000_000  # the job stops when told; this only bounds a job left alone


# --- 1. profile: the job, a plain training loop --------------------------------------------------------
def job(config_dir: Path, device: int, workload_file: str | None) -> int:
    """The training job: no profiler in sight. ``import torch_npu`` reads PROF_CONFIG_PATH and starts the
    watcher; every ``optimizer.step()`` of the native SGD is a step it counts."""
    import torch
    import torch_npu  # noqa: F401  (with PROF_CONFIG_PATH set: dynamic_profile.init(<folder>), the template)

    from common.collect.dynamic import stop_requested
    from common.collect.steps import make_step
    from common.workload import load_workload

    torch.npu.set_device(device)
    step = make_step(with_loss(load_workload(workload_file)), f"npu:{device}", train=True)
    for _ in range(MAX_JOB_STEPS):
        step()
        torch.npu.synchronize()
        if stop_requested(config_dir):
            break
    return 0


def with_loss(work):
    """The workload with its own loss, else the mean square of its outputs (TinyMLP defines none)."""
    if work.loss is not None:
        return work
    from common.workload import flatten_output

    return dataclasses.replace(work, loss=lambda out, x: sum(t.float().square().mean() for t in flatten_output(out)))


def profile_running_job(run, workload_file: str | None) -> dict:
    """Start the job with PROF_CONFIG_PATH, edit profiler_config.json once it exists, wait for the capture."""
    from common.collect import dynamic

    config_dir = dynamic.config_folder(run.out, CONFIG_DIR)
    argv = [sys.executable, str(Path(__file__).resolve()), str(run.device), "--job", str(config_dir)]
    argv += ["--workload", workload_file] if workload_file else []
    env = {**os.environ, **run.child_env, "PROF_CONFIG_PATH": str(config_dir)}  # the one thing a user sets
    log = run.out / "job.log"
    job_process = dynamic.start_job(argv, env, log)
    try:
        dynamic.wait_for(lambda: (config_dir / dynamic.CONFIG_FILE).is_file(), job_process, TEMPLATE_TIMEOUT_S,
                         f"torch_npu's template {config_dir / dynamic.CONFIG_FILE}", log)
        # From a second shell this is: edit profiler_config.json, save.
        config = dynamic.edit_config(config_dir, {**CHANGES, "prof_dir": str(run.out)})
        capture = dynamic.wait_for(lambda: dynamic.finished_capture(run.out), job_process, CAPTURE_TIMEOUT_S,
                                   f"capture in {run.out}", log)
        code = dynamic.stop_job(config_dir, job_process, STOP_TIMEOUT_S, log)
    finally:
        if job_process.poll() is None:
            job_process.kill()
            job_process.wait()
    if code != 0:
        from common.errors import LabError

        raise LabError(f"the job exited {code}", f"see {log}")
    return {"config": config, "capture": capture.name, "job_exit": code}


# --- 2. check · 3. read --------------------------------------------------------------------------------
def check_run(run) -> list:
    """The capture has mode 04's files, ACTIVE training steps with the same ops, Σ op time ≈ Computing."""
    from common.analyze import checks

    where = f"04 dynamic, {ACTIVE} active steps"
    datasets = run.datasets(kind="torch_npu")
    tasks = [t for t in checks.tasks_of(datasets) if t.step_id is not None]
    steps = [s for ds in datasets for s in ds.steps]
    return [checks.check_files(datasets, ["kernel_details", "op_statistic", "step_trace_time", "trace_view"],
                               "04 dynamic"),
            checks.check_same_records(checks.records_by_step(tasks), ACTIVE, where, "training step"),
            checks.check_sum_vs_computing(tasks, steps, "04 dynamic")]


# --- 4. interpret ----------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    from common.backend import detect
    from common.lesson import Lesson, require_module

    lesson = Lesson("pytorch", MODE_DIR, __doc__, prog="04_pyTorch/run_dynamic.sh")
    lesson.parser.add_argument("--job", metavar="CONFIG_DIR", help=argparse.SUPPRESS)  # the job's own process
    args = lesson.parse(argv)
    if args.job:
        return job(Path(args.job), int(args.device), args.workload)
    backend = detect()
    if not backend.is_npu:
        print(backend.banner())
        print("dynamic profiling is NPU-only (torch_npu watches PROF_CONFIG_PATH); nothing collected on this backend")
        return 0
    out = MODE_DIR / "prof_out_dynamic" if args.output is None else None
    run = lesson.start(args=args, out=out, train=True, dynamic={"warmup": WARMUP, "active": ACTIVE})
    require_module(run.backend, "torch_npu", "pip install torch_npu matching your torch")
    found = profile_running_job(run, args.workload)
    run.finish(completed=True, dynamic=found)
    return run.report(check_run(run), notes=[
        f"dynamic profiling: PROF_CONFIG_PATH={run.out / CONFIG_DIR}; profiler_config.json edited while the job ran "
        f"(start_step -1, warmup {WARMUP}, active {ACTIVE}); capture {found['capture']}"])


if __name__ == "__main__":
    from common.lesson import main_of

    main_of(main)
