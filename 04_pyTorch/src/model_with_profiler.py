"""Mode 04 — white-box profiling from inside PyTorch, with a schedule.

What you will do: wrap the TinyMLP inference loop in ``torch_npu.profiler`` (the portable
backend: ``torch.profiler``) with ``schedule(wait=1, warmup=3, active=5)``, then read the
step table ``step_trace_time.csv`` next to ``kernel_details.csv`` and ``op_statistic.csv``.

What you will learn:
- why a schedule: the first steps pay one-off costs, so only the active steps are recorded;
- Computing vs Free per step: is the device busy, or waiting for the host (host-bound)?
- what profiling itself costs: the same steps are timed again without the profiler.

Usage: ``bash 04_pyTorch/run.sh [device]``.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import numpy as np
import torch

# The schedule: skip 1 step, warm up 3 (recorded, then thrown away: caches and allocator
# settle), record 5. Only the 5 active steps reach the files.
WAIT, WARMUP, ACTIVE = 1, 3, 5
STEPS = WAIT + WARMUP + ACTIVE
MODE_DIR = Path(__file__).resolve().parent.parent


# --- 1. profile ---------------------------------------------------------------------------------
def profile_npu(model, x, out: Path) -> tuple[list[float], torch.Tensor]:
    """torch_npu.profiler on the NPU: it writes ``<out>/*_ascend_pt/`` itself when the schedule ends."""
    with npu_profiler(out) as prof:
        return run_steps(model, x, STEPS, prof.step, torch.npu.synchronize)


def npu_profiler(out: Path):
    """The profiler itself, with the schedule: ``with npu_profiler(out) as prof:``, ``prof.step()`` per step."""
    import torch_npu

    config = torch_npu.profiler._ExperimentalConfig(
        profiler_level=torch_npu.profiler.ProfilerLevel.Level1,  # Level1: PMU + op_statistic + api_statistic
        aic_metrics=torch_npu.profiler.AiCMetrics.PipeUtilization,  # pipe busy ratios in kernel_details
        data_simplification=False,  # keep PROF_*/mindstudio_profiler_output too (msprof's own CSVs)
    )
    return torch_npu.profiler.profile(
        activities=[torch_npu.profiler.ProfilerActivity.CPU, torch_npu.profiler.ProfilerActivity.NPU],
        schedule=torch_npu.profiler.schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1),
        on_trace_ready=torch_npu.profiler.tensorboard_trace_handler(str(out)),
        record_shapes=True,
        profile_memory=True,  # memory_record.csv, operator_memory.csv: peak memory and the ops that allocate
        with_stack=False,  # call stacks inflate host time in exactly the steps we measure
        experimental_config=config,
    )


def profile_portable(model, x, out: Path) -> tuple[list[float], torch.Tensor]:
    """torch.profiler with the same schedule, written in torch_npu's layout and columns."""
    from common.collect.torch_npu_layout import portable_profiler_info, write_torch_profile

    with portable_profiler() as prof:
        times, y = run_steps(model, x, STEPS, prof.step)
    write_torch_profile(prof, out, WAIT + WARMUP, portable_profiler_info(WAIT, WARMUP, ACTIVE))
    return times, y


def portable_profiler():
    """torch.profiler with the same schedule (the CPU is the only device it sees)."""
    schedule = torch.profiler.schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1)
    return torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=schedule,
                                  record_shapes=True, profile_memory=True)


def run_steps(model, x, steps: int, on_step=None, sync=lambda: None) -> tuple[list[float], torch.Tensor]:
    """``steps`` forwards; returns each step's host wall time (µs) and the last output."""
    times = []
    with torch.no_grad():
        for _ in range(steps):
            start = time.perf_counter()
            y = model(x)
            sync()  # the device runs behind the host: wait for it, or the step time is launch time only
            if on_step:
                on_step()  # tell the profiler a step ended: the schedule advances here
            times.append((time.perf_counter() - start) * 1e6)
    return times, y


# --- 2. check · 3. read -----------------------------------------------------------------------------
def check_run(run, model) -> list:
    """The active steps' tasks: 4 MatMul + 3 Gelu each, Σ op time ≈ Computing, output = fp32 reference."""
    from common.analyze import checks
    from common.workload import expected_op_counts

    datasets = run.datasets(kind="torch_npu")
    tasks = [t for t in checks.tasks_of(datasets) if t.step_id is not None]  # warm-up steps have no Step Id
    steps = [s for ds in datasets for s in ds.steps]
    return [
        checks.check_files(datasets, ["kernel_details", "op_statistic", "step_trace_time", "trace_view"], "04"),
        checks.check_counts(tasks, ACTIVE, expected_op_counts(model), f"04, {ACTIVE} active steps"),
        checks.check_top_family(checks.stats_of(datasets), "matmul", "04"),
        checks.check_sum_vs_computing(tasks, steps, "04"),
        checks.check_output_file(run.out / "output.npy", "04"),
    ]


# --- 4. interpret ----------------------------------------------------------------------------------
def overhead_line(profiled_us: list[float], plain_us: list[float]) -> str:
    """Profiling cost: median active-step time with the profiler over the same steps without it."""
    with_prof = statistics.median(profiled_us[-ACTIVE:])
    without = statistics.median(plain_us[-ACTIVE:])
    return (
        f"profiling overhead: median step {with_prof:.1f} us with the profiler vs {without:.1f} us without "
        f"(ratio {with_prof / without:.2f}x, host wall clock over the {ACTIVE} active steps)"
    )


def main(argv: list[str] | None = None) -> int:
    from common.lesson import Lesson, require_module
    from common.workload import build_model, make_input

    run = Lesson("pytorch", MODE_DIR, __doc__).start(
        argv, forwards=ACTIVE, schedule={"wait": WAIT, "warmup": WARMUP, "active": ACTIVE})
    require_module(run.backend, "torch_npu", "pip install torch_npu matching your torch")
    model, x, sync = build_model(), make_input(), (lambda: None)
    if run.npu:
        import torch_npu  # noqa: F401  (registers the "npu" device with torch)

        torch.npu.set_device(run.device)  # the logical device you named; msprof profiles the one in use
        device = f"npu:{run.device}"
        model, x, sync = model.to(device), x.to(device), torch.npu.synchronize

    profiled_us, y = (profile_npu if run.npu else profile_portable)(model, x, run.out)
    plain_us, _ = run_steps(model, x, STEPS, sync=sync)  # the same steps without the profiler
    np.save(run.out / "output.npy", y.float().cpu().numpy())
    run.finish(completed=True, overhead={"profiled_step_us": profiled_us, "plain_step_us": plain_us})
    return run.report(check_run(run, model), notes=[overhead_line(profiled_us, plain_us)])


if __name__ == "__main__":
    from common.lesson import main_of

    main_of(main)
