"""Mode 02: profile a hand-written AscendC kernel (fp16 vector Add) and name the pipe it is bound by.

``build``: the lesson's CMake project (``02_api_AscendC/src``) for the NPU (CANN's ``ascendc_library``)
or, without CANN, against the portable twin of the AscendC API (``build.sh``). ``run``: the host
program, 3 warm-up and 20 measured launches, each verified by the program itself, under msprof and
msprof op on an NPU or with the twin's own timers elsewhere; then the checks, the per-pipe table, the
bound pipe and the bottleneck class (``run.sh``). ``run --kernel pyasc``: the same for ``add_pyasc.py``
(common.modes.ascendc.pyasc_profile).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from common.analyze import checks
from common.analyze.bounds.kernel import pipe_ratios
from common.backend import Backend, parse_device_id
from common.collect import runlogs
from common.collect.calibrate import step_disturbance
from common.collect.npu_commands import MSPROF_OP_METRICS_REGION, msprof_argv, msprof_op_argv
from common.collect.profiling import Profiler, read_run_tasks, task_time_median
from common.errors import LabError
from common.formats import readers
from common.formats.msprof_op import read_msprof_op_pipes
from common.formats.records import Task
from common.formats.twin_timings import parse_twin_timings
from common.modes.ascendc import MODE, MODE_DIR
from common.modes.ascendc.build_kernel import (
    BINARY_NAME,
    BUILD_DIR,
    build,
    choose_run_mode,  # noqa: F401  (the RUN_MODE allow-list, also here)
    read_build_info,
    usable_build,
)
from common.modes.ascendc.kernel_report import KERNEL, kernel_tasks, read_sizes, read_verified
from common.modes.ascendc.kernel_run import (
    MEASURED_LAUNCHES,
    WARMUP_LAUNCHES,
    check_launch_count,
    kernel_answer,
    run_binary,
)
from common.modes.ascendc.twin_profile import TIMINGS_VAR, twin_tasks, write_portable_profile
from common.verdict import Verdict

TWIN_TIMINGS = "twin_timings.csv"  # the twin's per-block pipe timers, in prof_out/
TWIN = Backend("portable", "the AscendC twin: the kernel runs on the host CPU")


@dataclass
class KernelRun:
    """One profiled run of the C++ kernel: the checks made on the way (the program's own verification, msprof
    op's), its measured launches' tasks, the op_summary they were read from ("" when none), the sizes the program
    printed, and the median kernel time."""

    verdicts: list[Verdict]
    tasks: list[Task]
    where: str
    sizes: dict[str, int] | None
    median_us: float | None


# --- 1. profile ---------------------------------------------------------------------------------
def profile_npu(run, binary: Path) -> KernelRun:
    """msprof around the host program (op_summary per launch), then msprof op (per-block PMU of one launch)."""
    # The program selects the logical device itself (aclrtSetDevice in main.cpp); msprof follows it.
    app = [
        str(binary),
        "--device",
        str(run.device),
        "--warmup",
        str(WARMUP_LAUNCHES),
        "--launches",
        str(MEASURED_LAUNCHES),
    ]
    argv = msprof_argv(run.backend.tools["msprof"], run.out, app)  # --aic-metrics=PipeUtilization
    print("$ " + " ".join(argv))
    code, stdout = run_binary(argv, run.child_env, run.timeout_s, runlogs.stderr_log(run.out, argv))
    verdicts = [verification_verdict(code, stdout)]
    summaries = sorted(run.out.glob("PROF_*/mindstudio_profiler_output/op_summary_*.csv"))
    if not summaries:
        raise LabError(
            f"msprof wrote no op_summary_*.csv under {run.out}", "check msprof's log in PROF_*/mindstudio_profiler_log"
        )
    rows = sorted(kernel_tasks(readers.read_op_summary(summaries[-1])), key=lambda t: t.start_us)

    # msprof op: per-block PMU of the first measured launch. KernelScale makes it honour the kernel's
    # MetricsProfStart/Stop region (the build is for Atlas A2/A3: usable_build checked it); the warm-up
    # launches are skipped, as they are in op_summary.
    op_argv = msprof_op_argv(
        run.backend.tools["msprof"],
        run.out,
        app,
        kernel_name=KERNEL,
        launch_count=1,
        aic_metrics=MSPROF_OP_METRICS_REGION,
        launch_skip=WARMUP_LAUNCHES,
    )
    print("$ " + " ".join(op_argv))
    op_code, _ = run_binary(op_argv, run.child_env, run.timeout_s, runlogs.stderr_log(run.out, op_argv))
    verdicts.append(checks.check_msprof_op(op_code, read_msprof_op_pipes(run.out), "the MetricsProf region"))
    tasks, where = rows[WARMUP_LAUNCHES:], summaries[-1].name
    # Median over the measured launches: on an NPU op_summary also holds the warm-up ones.
    run_dir = run.out / where_run(run.out, where)
    median = task_time_median(read_run_tasks(run_dir), name=KERNEL, skip=WARMUP_LAUNCHES) if tasks else None
    return KernelRun(verdicts, tasks, where, read_sizes(stdout), median)


def profile_twin(run, binary: Path) -> tuple[int, str]:
    """No msprof without an NPU: the portable twin times each pipe itself, into ``$ASCENDC_TWIN_TIMINGS``."""
    app = [str(binary), "--warmup", str(WARMUP_LAUNCHES), "--launches", str(MEASURED_LAUNCHES)]
    print(f"$ {TIMINGS_VAR}={run.out / TWIN_TIMINGS} " + " ".join(app))
    return run_binary(
        app, {**os.environ, TIMINGS_VAR: str(run.out / TWIN_TIMINGS)}, run.timeout_s, runlogs.stderr_log(run.out, app)
    )


# --- 2. check: the programs' own lines parsed here, judged by common.analyze.checks.kernel -------------------
def verification_verdict(returncode: int, stdout: str) -> Verdict:
    """The host program's own 'verified:' line covers every element of the sizes it printed."""
    return checks.check_host_verified(returncode, read_sizes(stdout), read_verified(stdout)[0])


# --- 3. read -------------------------------------------------------------------------------------
def profile_twin_in_process(run, binary: Path) -> KernelRun:
    """The twin run inside the in-process Profiler (``common.collect.profiling``, pyasc's ``asc.lib.profiling`` names), as
    the pyasc kernel is: the twin's timers become a ``PROF_*`` run in msprof's layout, which the Profiler reads back;
    the median kernel time comes from ``task_time_median`` over what it read. (On the NPU the host program is
    another process: aclprof* profiles only its caller, so msprof wraps it instead, in profile_npu.)"""
    profiler = Profiler(run.out, backend=TWIN)  # the twin runs on the host, whatever the machine: nothing to collect
    profiler.start()
    try:
        code, stdout = profile_twin(run, binary)
        sizes = read_sizes(stdout)
        summary = None
        if code == 0 and sizes and (run.out / TWIN_TIMINGS).is_file():
            measured = parse_twin_timings(run.out / TWIN_TIMINGS)[WARMUP_LAUNCHES:]  # warm-up launches: not profiled
            summary, _ = write_portable_profile(run.out, twin_tasks(measured, sizes))
    finally:
        profiler.stop()
    verified = [verification_verdict(code, stdout)]
    if summary is None:
        return KernelRun(verified, [], "", sizes, None)
    median = task_time_median(profiler.store_last_result().tasks, name=KERNEL)
    tasks = kernel_tasks(readers.read_op_summary(summary))  # what was written, not what we meant
    return KernelRun(verified, tasks, summary.name, sizes, median)


def where_run(out: Path, summary_name: str) -> str:
    """The PROF_* folder under ``out`` that holds the op_summary file ``summary_name``."""
    found = sorted(out.glob(f"PROF_*/mindstudio_profiler_output/{summary_name}"))
    if not found:
        raise LabError(
            f"{summary_name} is not under {out}/PROF_*/mindstudio_profiler_output",
            "re-run: the export was moved or removed during the run",
        )
    return found[-1].parent.parent.name


def main(argv: list[str] | None = None) -> int:
    from common.errors import ArgumentParser
    from common.modes.lesson import TIMEOUT_HELP, Lesson

    lesson = Lesson(
        MODE, MODE_DIR, __doc__, prog="python -m common.modes.ascendc", device=False, output=False, workload=False
    )
    commands = lesson.parser.add_subparsers(dest="command", required=True, parser_class=ArgumentParser)
    build_command = commands.add_parser(
        "build", help="configure and build with CMake (RUN_MODE from the backend or $RUN_MODE)"
    )
    build_command.add_argument(
        "--device", default="0", help="npu: build for this logical device's SoC (default 0; $SOC_VERSION overrides)"
    )
    run_command = commands.add_parser("run", help="run, verify, profile and report")
    run_command.add_argument("--device", default="0", help="logical NPU id (0..63); ignored by the portable twin")
    run_command.add_argument("--timeout", help=TIMEOUT_HELP)
    run_command.add_argument(
        "--kernel",
        choices=("cpp", "pyasc"),
        default="cpp",
        help="cpp: add_kernel.cpp (default); pyasc: add_pyasc.py, launched from Python",
    )
    run_command.add_argument(
        "--simulator",
        metavar="SOC",
        help="with --kernel pyasc on the npu backend: run it in "
        "CANN's simulator for this SoC (msprof op simulator, e.g. Ascend910B1)",
    )
    lesson.add_workload_option(run_command)  # accepted and recorded, like every mode; this one profiles a kernel
    args = lesson.parse(argv)
    if args.command == "build":
        return build(device=parse_device_id(args.device))

    if args.kernel == "pyasc":
        from common.modes.ascendc.pyasc_profile import run_pyasc

        return run_pyasc(lesson, args)
    if args.simulator:
        raise LabError("--simulator is for --kernel pyasc", "add --kernel pyasc, or drop --simulator")
    # The build is checked under the mode's lock, before prof_out is replaced: no build, nothing deleted.
    run = lesson.start(
        args=args,
        check=lambda backend: {"run_mode": usable_build(backend)["run_mode"]},
        warmup_launches=WARMUP_LAUNCHES,
        measured_launches=MEASURED_LAUNCHES,
        kernel="cpp",
    )
    run_mode, binary = run.info["run_mode"], BUILD_DIR / BINARY_NAME
    data_backend = "npu" if run_mode == "npu" else "portable"  # what the numbers come from, not the machine
    verdicts = [
        checks.check_build(True, f"{binary.name} built {read_build_info()['built_at']} (RUN_MODE={run_mode})"),
        checks.workload_not_profiled(run.info["workload"]["name"]),
    ]
    finished, answer = False, None
    try:
        kernel = profile_npu(run, binary) if run_mode == "npu" else profile_twin_in_process(run, binary)
        tasks, where, sizes, median = kernel.tasks, kernel.where, kernel.sizes, kernel.median_us
        verdicts += kernel.verdicts
        verdicts += [
            check_launch_count(tasks, where or "no op_summary"),
            checks.check_ratio_sums(tasks, data_backend),
            checks.check_bound(pipe_ratios(tasks)),
        ]
        if tasks and sizes:
            concurrent = sizes["block_dim"] if data_backend == "npu" else min(sizes["block_dim"], os.cpu_count() or 1)
            verdict, answer = kernel_answer(tasks, sizes, where, KERNEL, median, concurrent, data_backend)
            verdicts.append(verdict)
        finished = True
    finally:  # Ctrl-C, a timeout or a missing export: what was collected stays, marked incomplete
        run.finish(completed=finished and all(v.ok for v in verdicts), backend=data_backend)
    # the launches run the same kernel on the same data: a wide spread of their times says the run was interrupted
    disturbed = step_disturbance(
        [t.duration_us for t in tasks or []], f"the {MEASURED_LAUNCHES} launches' kernel times"
    )
    return run.report(verdicts, notes=[answer] if answer else [], warnings=[disturbed] if disturbed else [])
