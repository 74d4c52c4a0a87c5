"""Mode 04 — white-box profiling from inside PyTorch, with a schedule.

What you will do: wrap the workload's inference loop (TinyMLP, or your model with
``--workload FILE``; with ``--train``, its training steps) in ``torch_npu.profiler`` (the
portable backend: ``torch.profiler``) with ``schedule(wait=1, warmup=3, active=5)``, then read
the step table ``step_trace_time.csv`` next to ``kernel_details.csv`` and ``op_statistic.csv``.

What you will learn:
- why a schedule: the first steps pay one-off costs, so only the active steps are recorded;
- Computing vs Free per step: is the device busy, or waiting for the host (host-bound)?
- what profiling itself costs: the same steps are timed again without the profiler.

Usage: ``bash 04_pyTorch/run.sh [device] [--workload FILE] [--train] [--threads N]``.
"""

from __future__ import annotations

from pathlib import Path

import torch

from common.collect.steps import Steps, forward_step, make_step, overhead_line, run_steps

# The schedule: skip 1 step, warm up 3 (recorded, then thrown away: caches and allocator
# settle), record 5. Only the 5 active steps reach the files.
WAIT, WARMUP, ACTIVE = 1, 3, 5
STEPS = WAIT + WARMUP + ACTIVE
MODE_DIR = Path(__file__).resolve().parent.parent


# --- 1. profile ---------------------------------------------------------------------------------
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


def portable_profiler():
    """torch.profiler with the same schedule (the CPU is the only device it sees)."""
    schedule = torch.profiler.schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1)
    return torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=schedule,
                                  record_shapes=True, profile_memory=True)


def profile_npu(model, x, out: Path, step=None) -> Steps:
    """torch_npu.profiler around ``step`` (default: a no-grad ``model(x)``); it writes ``<out>/*_ascend_pt/``
    itself when the schedule ends."""
    with npu_profiler(out) as prof:
        return run_steps(step or forward_step(model, (x,)), STEPS, prof.step, torch.npu.synchronize)


def profile_portable(model, x, out: Path, step=None) -> Steps:
    """torch.profiler with the same schedule, written in torch_npu's layout and columns."""
    from common.collect.torch_npu_layout import portable_profiler_info, write_torch_profile

    with portable_profiler() as prof:
        steps = run_steps(step or forward_step(model, (x,)), STEPS, prof.step)
    write_torch_profile(prof, out, WAIT + WARMUP, portable_profiler_info(WAIT, WARMUP, ACTIVE))
    return steps


# --- 2. check · 3. read -----------------------------------------------------------------------------
def check_run(run, train: bool, losses: tuple[list[float], list[float]] | None) -> list:
    """Every active step records the same ops as the first, Σ op time ≈ Computing, output = fp32 reference."""
    from common.analyze import checks

    work, where = run.workload, f"04, {ACTIVE} active steps"
    datasets = run.datasets(kind="torch_npu")
    records = checks.records_by_step(checks.tasks_of(datasets))  # warm-up steps have no Step Id
    tasks = [t for t in checks.tasks_of(datasets) if t.step_id is not None]
    steps = [s for ds in datasets for s in ds.steps]
    verdicts = [checks.check_files(datasets, ["kernel_details", "op_statistic", "step_trace_time", "trace_view"], "04"),
                checks.check_same_records(records, ACTIVE, where, "training step" if train else "step")]
    if train:  # a training step adds backward and optimizer ops: the declared top family is about the forward
        return verdicts + [
            checks.not_applicable("top family (04)", "not applicable: EXPECT['top_family'] is about the forward; "
                                  "a training step adds backward and optimizer ops"),
            checks.check_sum_vs_computing(tasks, steps, "04"), checks.check_training_losses(*losses, "04")]
    return verdicts + [
        checks.check_declared_top_family(checks.stats_of(datasets), work, "04"),
        checks.check_sum_vs_computing(tasks, steps, "04"), checks.check_output_file(run.out / "output.npy", "04", work, run.npu)]


# --- 4. interpret: the report and the profiling overhead (common.collect.steps.overhead_line) --------
def main(argv: list[str] | None = None) -> int:
    from common.analyze.checks import save_output
    from common.collect.calibrate import step_disturbance
    from common.errors import LabError
    from common.lesson import Lesson, require_module
    from common.workload import load_workload

    lesson = Lesson("pytorch", MODE_DIR, __doc__)
    lesson.parser.add_argument("--train", action="store_true",
                               help="profile training steps (forward, loss, backward, SGD step): needs loss()")

    def needs_loss(backend) -> None:  # checked before the output folder is touched
        if args.train and (work := load_workload(args.workload)).loss is None:
            raise LabError(f"--train needs a loss, and {work.where} defines no loss()",
                           "add loss(output, input) returning a scalar tensor (docs/own_model.md), or drop --train")

    args = lesson.parse(argv)
    run = lesson.start(args=args, check=needs_loss, forwards=ACTIVE, train=args.train,
                       schedule={"wait": WAIT, "warmup": WARMUP, "active": ACTIVE})
    require_module(run.backend, "torch_npu", "pip install torch_npu matching your torch")
    device, sync = "cpu", (lambda: None)
    if run.npu:
        import torch_npu  # noqa: F401  (registers the "npu" device with torch)

        torch.npu.set_device(run.device)  # the logical device you named; msprof profiles the one in use
        device, sync = f"npu:{run.device}", torch.npu.synchronize

    step = make_step(run.workload, device, args.train)
    profiled = (profile_npu if run.npu else profile_portable)(None, None, run.out, step)
    # The same steps without the profiler, from a fresh model: what profiling costs (and, for
    # training, what the steps compute when nothing watches them).
    plain = run_steps(make_step(run.workload, device, args.train), STEPS, sync=sync)
    losses = ([float(v) for v in profiled.results], [float(v) for v in plain.results]) if args.train else None
    if not args.train:
        save_output(run.out / "output.npy", profiled.results[-1])
    run.finish(completed=True, overhead={"profiled_step_us": profiled.step_us, "profiled_work_us": profiled.work_us,
                                         "plain_step_us": plain.step_us},
               **({"losses": {"profiled": losses[0], "plain": losses[1]}} if losses else {}))
    # Interruptions show in the steps' own work; the profiler's step switch varies by design (run_steps).
    disturbed = step_disturbance(profiled.work_us[-ACTIVE:], f"the {ACTIVE} active steps' wall times")
    return run.report(check_run(run, args.train, losses), notes=[overhead_line(profiled.step_us, plain.step_us, ACTIVE)],
                      warnings=[disturbed] if disturbed else [])


if __name__ == "__main__":
    from common.lesson import main_of

    main_of(main)
