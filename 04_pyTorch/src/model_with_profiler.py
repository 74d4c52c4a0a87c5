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

import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # before torch loads: keep the profiler's own logging quiet

import numpy as np  # noqa: E402
import torch  # noqa: E402

from common.analyze import checks  # noqa: E402
from common.collect.torch_npu_layout import portable_profiler_info, write_torch_profile  # noqa: E402
from common.backend import Backend, detect, parse_device_id, select_device  # noqa: E402
from common.errors import ArgumentParser, LabError, run_cli  # noqa: E402
from common.formats.datasets import find_datasets  # noqa: E402
from common.cli.reports import directory_report, write_report_md  # noqa: E402
from common.formats.rundir import finish_run, lock_mode, output_path, prepare_output_dir, start_run  # noqa: E402
from common.workload import build_model, expected_op_counts, make_input  # noqa: E402

MODE_DIR = Path(__file__).resolve().parent.parent
# The schedule: skip 1 step, warm up 3 (recorded, then thrown away: caches and allocator
# settle), record 5. Only the 5 active steps reach the files.
WAIT, WARMUP, ACTIVE = 1, 3, 5
STEPS = WAIT + WARMUP + ACTIVE
FILES = ["kernel_details", "op_statistic", "step_trace_time", "trace_view"]


def run_steps(model, x, steps: int, on_step=None, sync=lambda: None) -> tuple[list[float], torch.Tensor]:
    """``steps`` forwards; returns each step's host wall time (µs) and the last output."""
    times = []
    with torch.no_grad():
        for _ in range(steps):
            start = time.perf_counter()
            y = model(x)
            sync()
            if on_step:
                on_step()
            times.append((time.perf_counter() - start) * 1e6)
    return times, y


def profile_npu(model, x, out: Path) -> tuple[list[float], torch.Tensor]:
    """torch_npu.profiler as the NPU path uses it (DESIGN §4); it writes *_ascend_pt itself."""
    import torch_npu

    config = torch_npu.profiler._ExperimentalConfig(
        profiler_level=torch_npu.profiler.ProfilerLevel.Level1,  # Level1: PMU + op_statistic + api_statistic
        aic_metrics=torch_npu.profiler.AiCMetrics.PipeUtilization,  # pipe busy ratios in kernel_details
        data_simplification=False,  # keep PROF_*/mindstudio_profiler_output too (msprof's own CSVs)
    )
    with torch_npu.profiler.profile(
        activities=[torch_npu.profiler.ProfilerActivity.CPU, torch_npu.profiler.ProfilerActivity.NPU],
        schedule=torch_npu.profiler.schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1),
        on_trace_ready=torch_npu.profiler.tensorboard_trace_handler(str(out)),
        record_shapes=True,
        with_stack=False,  # call stacks inflate host time in exactly the steps we measure
        experimental_config=config,
    ) as prof:
        return run_steps(model, x, STEPS, prof.step, torch.npu.synchronize)


def profile_portable(model, x, out: Path) -> tuple[list[float], torch.Tensor]:
    """torch.profiler with the same schedule, written in torch_npu's layout and columns."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    schedule = torch.profiler.schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1)
    with torch.profiler.profile(activities=activities, schedule=schedule, record_shapes=True) as prof:
        times, y = run_steps(model, x, STEPS, prof.step)
    write_torch_profile(prof, out, WAIT + WARMUP, portable_profiler_info(WAIT, WARMUP, ACTIVE))
    return times, y


def overhead_line(profiled_us: list[float], plain_us: list[float]) -> str:
    """Profiling cost: median active-step time with the profiler over the same steps without it."""
    with_prof = statistics.median(profiled_us[-ACTIVE:])
    without = statistics.median(plain_us[-ACTIVE:])
    return (
        f"profiling overhead: median step {with_prof:.1f} us with the profiler vs {without:.1f} us without "
        f"(ratio {with_prof / without:.2f}x, host wall clock over the {ACTIVE} active steps)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="04_pyTorch/run.sh", description=__doc__.splitlines()[0])
    parser.add_argument("device", nargs="?", default="0", help="NPU device id, 0..63 (default 0)")
    parser.add_argument("--output", help="output folder inside 04_pyTorch/ (default 04_pyTorch/prof_out)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)

    # --- workload -------------------------------------------------------------------------
    backend: Backend = detect()
    print(backend.banner(), flush=True)
    device = parse_device_id(args.device)
    os.environ.update(select_device(backend, device))
    if backend.is_npu and "torch_npu" not in backend.python_modules:
        raise LabError("the npu backend needs torch_npu, which is not importable", "pip install torch_npu matching your torch")
    out = output_path(MODE_DIR, args.output)
    lock_mode(MODE_DIR)  # one run of this mode at a time: a second one stops here, before deleting anything
    out = prepare_output_dir(out)
    info = start_run(out, mode="pytorch", backend=backend.name, device=device, command=sys.argv,
                     forwards=ACTIVE, schedule={"wait": WAIT, "warmup": WARMUP, "active": ACTIVE})
    model, x = build_model(), make_input()
    sync = lambda: None  # noqa: E731
    if backend.is_npu:
        import torch_npu  # noqa: F401

        model, x, sync = model.to("npu:0"), x.to("npu:0"), torch.npu.synchronize

    # --- collect ----------------------------------------------------------------------------
    profile = profile_npu if backend.is_npu else profile_portable
    profiled_us, y = profile(model, x, out)
    plain_us, _ = run_steps(model, x, STEPS, sync=sync)
    np.save(out / "output.npy", y.float().cpu().numpy())
    finish_run(out, info, exit_code=0, completed=True, overhead={"profiled_step_us": profiled_us, "plain_step_us": plain_us})

    # --- parse, check, report ---------------------------------------------------------------
    datasets = [ds for ds in find_datasets(out) if ds.kind == "torch_npu"]
    tasks = [t for t in checks.tasks_of(datasets) if t.step_id is not None]
    steps = [s for ds in datasets for s in ds.steps]
    verdicts = [
        checks.check_files(datasets, FILES, "04"),
        checks.check_counts(tasks, ACTIVE, expected_op_counts(model), f"04, {ACTIVE} active steps"),
        checks.check_top_family(checks.stats_of(datasets), "matmul", "04"),
        checks.check_sum_vs_computing(tasks, steps, "04"),
        checks.check_output_file(out / "output.npy", "04"),
    ]
    text, markdown = directory_report(out, verdicts)
    line = overhead_line(profiled_us, plain_us)
    print(text)
    print(line)
    print(write_report_md(out, markdown + f"\n{line}\n"))
    return 0 if all(v.ok for v in verdicts) else 1


if __name__ == "__main__":
    run_cli(main)
