"""Mode 04 — white-box profiling from inside PyTorch, with a schedule (the lab around model_with_profiler.py).

What the lab does: launch ``04_pyTorch/src/model_with_profiler.py`` on the workload (TinyMLP, or
``--workload FILE``; ``--train`` for its training steps) with ``schedule(wait=1, warmup=3, active=5)``,
turn the portable backend's torch.profiler trace into torch_npu's layout, time the same steps
without the profiler, and check and report ``step_trace_time.csv``, ``kernel_details.csv`` and
``op_statistic.csv``.

What you will learn:
- why a schedule: the first steps pay one-off costs, so only the active steps are recorded;
- Computing vs Free per step: is the device busy, or waiting for the host (host-bound)?
- what profiling itself costs: the same steps are timed again without the profiler.

Usage: ``bash 04_pyTorch/run.sh [device] [--workload FILE] [--train] [--threads N]``.
"""

from __future__ import annotations

from pathlib import Path


from common.analyze import grouping
from common.formats.outputs import load_output
from common.modes.pytorch import (
    ACTIVE,
    MODE_DIR,
    STEPS,
    TORCH_TRACE_DIR,
    WAIT,
    WARMUP,
    convert_portable,
    device_arg,
    launch,
    lesson_argv,
    model_args,
)

LESSON = "model_with_profiler.py"


# --- 1. profile: the lesson, as a program -------------------------------------------------------------
def profile(run, train: bool) -> tuple[Path, Path]:
    """Launch the lesson into the run's folder; on the portable backend convert its trace. Returns (the
    trace the step times are read from, the file with the output or the losses)."""
    raw = run.out if run.npu else run.out / TORCH_TRACE_DIR  # torch_npu writes *_ascend_pt/ itself
    saved = run.out / ("losses.npy" if train else "output.npy")
    argv = lesson_argv(
        LESSON,
        "--out",
        raw,
        "--device",
        device_arg(run),
        *model_args(run),
        *(["--train"] if train else []),
        "--save-output",
        saved,
    )
    run.record(lesson=argv[1:])
    launch(run, argv)
    if not run.npu:
        return convert_portable(run, raw, WAIT, WARMUP, ACTIVE), saved
    traces = sorted(run.out.glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"))
    return (traces[0] if traces else None), saved


def profiled_step_times(run, trace: Path | None) -> tuple[list[float], list[float]]:
    """The profiled active steps, from the files: (step length: Computing + Communication(Not Overlapped) +
    Free of each step_trace_time row, so prof.step() included; the step's own work: its ProfilerStep#N
    event in the trace, which ends when prof.step() is called)."""
    from common.formats.readers import read_trace

    steps = [s for ds in run.datasets(kind="torch_npu") for s in ds.steps]
    work = [e.dur_us for e in read_trace(trace) if e.ph == "X" and e.name.startswith("ProfilerStep#")] if trace else []
    return [s.total_us for s in steps], [w for w in work if w is not None]


def plain_steps(run, train: bool):
    """The same steps without the profiler, from a fresh model, timed here: what profiling costs (and, for
    training, what the steps compute when nothing watches them)."""
    import torch

    from common.modes.pytorch.steps import make_step, run_steps

    device, sync = "cpu", (lambda: None)
    if run.npu:
        import torch_npu  # noqa: F401  (registers the "npu" device with torch)

        torch.npu.set_device(run.device)
        device, sync = f"npu:{run.device}", torch.npu.synchronize
    return run_steps(make_step(run.workload, device, train), STEPS, sync=sync)


# --- 2. check · 3. read -----------------------------------------------------------------------------
def check_run(run, train: bool, losses: tuple[list[float], list[float]] | None) -> list:
    """Every active step records the same ops as the first, Σ op time ≈ Computing, output = fp32 reference."""
    from common.analyze import checks
    from common.formats.datasets import file_rows, stats_of, tasks_of
    from common.formats.outputs import read_output

    where = f"04, {ACTIVE} active steps"
    datasets = run.datasets(kind="torch_npu")
    records = grouping.records_by_step(tasks_of(datasets))  # warm-up steps have no Step Id
    tasks = [t for t in tasks_of(datasets) if t.step_id is not None]
    steps = [s for ds in datasets for s in ds.steps]
    verdicts = [
        checks.check_files(
            file_rows(datasets, ["kernel_details", "op_statistic", "step_trace_time", "trace_view"]), "04"
        ),
        checks.check_same_records(records, ACTIVE, where, "training step" if train else "step"),
    ]
    expected = run.workload.expected(fp32=False)  # the model runs here, if at all, never in the checks
    by_step = grouping.tasks_by_step(tasks)
    verdicts += [
        checks.check_declared_top_family(stats_of(datasets), expected, "04", by_step, "step", training=train),
        checks.check_sum_vs_computing(tasks, steps, "04"),
    ]
    if train:  # the profiler must not change what training computes
        return verdicts + [checks.check_training_losses(*losses, "04")]
    return verdicts + [checks.check_output_file(read_output(run.out / "output.npy"), "04", expected, run.npu)]


# --- 4. interpret: the report and the profiling overhead ----------------------------------------------
def main(argv: list[str] | None = None) -> int:
    from common.collect.calibrate import step_disturbance
    from common.errors import LabError
    from common.modes.lesson import Lesson, require_module
    from common.modes.pytorch.steps import overhead_line
    from common.workload import load_workload

    lesson = Lesson("pytorch", MODE_DIR, __doc__)
    lesson.parser.add_argument(
        "--train", action="store_true", help="profile training steps (forward, loss, backward, SGD step): needs loss()"
    )

    def needs_loss(backend) -> None:  # checked before the output folder is touched
        if args.train and (work := load_workload(args.workload)).loss is None:
            raise LabError(
                f"--train needs a loss, and {work.where} defines no loss()",
                "add loss(output, input) returning a scalar tensor (docs/own_model.md), or drop --train",
            )

    args = lesson.parse(argv)
    run = lesson.start(
        args=args,
        check=needs_loss,
        forwards=ACTIVE,
        train=args.train,
        schedule={"wait": WAIT, "warmup": WARMUP, "active": ACTIVE},
    )
    require_module(run.backend, "torch_npu", "pip install torch_npu matching your torch")
    trace, saved = profile(run, args.train)
    step_us, work_us = profiled_step_times(run, trace)
    plain = plain_steps(run, args.train)
    losses = None
    if args.train:
        profiled = [float(v) for a in load_output(saved) or [] for v in a.reshape(-1)]
        losses = (profiled, [float(v) for v in plain.results])
    run.finish(
        completed=True,
        overhead={"profiled_step_us": step_us, "profiled_work_us": work_us, "plain_step_us": plain.step_us},
        **({"losses": {"profiled": losses[0], "plain": losses[1]}} if losses else {}),
    )
    # Interruptions show in the steps' own work; the profiler's step switch varies by design (steps.run_steps).
    disturbed = step_disturbance(work_us[-ACTIVE:], f"the {ACTIVE} active steps' wall times")
    notes = [overhead_line(step_us, plain.step_us, ACTIVE)] if step_us else []
    return run.report(check_run(run, args.train, losses), notes=notes, warnings=[disturbed] if disturbed else [])
