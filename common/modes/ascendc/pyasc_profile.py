"""Run ``add_pyasc.py`` for ``run.sh --kernel pyasc``: the lesson as a program, on the twin or under msprof op.

On the portable backend the lesson runs on the lab's pyasc twin (``pyasc_twin/``, first on the child's
``PYTHONPATH`` because pyasc is missing), with warm-up and measured launches, each verified by the
program itself. The twin writes its per-block pipe timers to ``$ASCENDC_TWIN_TIMINGS`` when the
program exits; they become op_summary rows through ``twin_profile`` (the writer the C++ twin's timers
go through), inside a ``common.collect.profiling.Profiler`` block, and the median is ``task_time_median`` over
the tasks it reads back.

On the npu backend the lesson runs as its own program under ``msprof op`` (``-r NPU``, on the board)
or ``msprof op simulator`` (``-r Model -v <soc>``, CANN's simulator): ``pyasc_msprof_argv`` builds
both commands from the builders in ``common.collect.npu_commands``. ``run_pyasc`` is the whole run, from the start
of the mode's lesson to its report.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from common.analyze import checks
from common.analyze.bounds.kernel import PIPE_ROLE, PIPES, pipe_ratios
from common.backend import Backend, is_atlas_a2_a3, parse_device_id, soc_version
from common.collect import runlogs
from common.collect.npu_commands import MSPROF_OP_METRICS_REGION, msprof_op_argv, msprof_op_simulator_argv
from common.collect.profiling import Profiler, task_time_median
from common.errors import LabError
from common.formats import readers
from common.formats.msprof_op import read_msprof_op_pipes, read_simulator_cores
from common.formats.records import Task
from common.formats.twin_timings import parse_twin_timings
from common.modes.ascendc import PYASC_LESSON, pyasc_twin
from common.modes.ascendc.kernel_report import kernel_tasks, read_sizes, read_verified
from common.modes.ascendc.kernel_run import (
    MEASURED_LAUNCHES,
    WARMUP_LAUNCHES,
    check_launch_count,
    kernel_answer,
    report_msprof_op_only,
    run_binary,
)
from common.modes.ascendc.twin_profile import TIMINGS_VAR, twin_tasks, write_portable_profile
from common.render.kernel import render_simulator
from common.verdict import Verdict

LESSON_FILE = PYASC_LESSON  # 02_api_AscendC/src/add_pyasc.py
PYASC_KERNEL = "add_kernel"  # the @asc.jit function's name: the Op Name its tasks carry
TWIN_TIMINGS = "pyasc_twin_timings.csv"  # the twin's timers, in prof_out/
TWIN = Backend("portable", "the pyasc twin: the kernel runs on the host CPU")


def pyasc_msprof_argv(
    msprof: str, out: Path, device: int, simulator_soc: str | None = None, python: str = sys.executable
) -> list[str]:
    """The ``msprof op`` command that runs ``add_pyasc.py`` once: on the board (``-r NPU --device <dev>``,
    KernelScale so the kernel's metrics_prof region is honoured) or, with ``simulator_soc``, in CANN's
    simulator (``msprof op simulator --soc-version=<soc> ... -r Model -v <soc>``). One launch is collected."""
    lesson = [python, str(LESSON_FILE)]
    if simulator_soc:
        return msprof_op_simulator_argv(
            msprof,
            out,
            [*lesson, "-r", "Model", "-v", simulator_soc],
            simulator_soc,
            kernel_name=PYASC_KERNEL,
            launch_count=1,
        )
    return msprof_op_argv(
        msprof,
        out,
        [*lesson, "-r", "NPU", "--device", str(device)],
        kernel_name=PYASC_KERNEL,
        launch_count=1,
        aic_metrics=MSPROF_OP_METRICS_REGION,
    )


def simulator_env(env: dict[str, str], soc: str, cann_home: str | None) -> dict[str, str]:
    """``env`` with CANN's simulator libraries for ``soc`` first on ``LD_LIBRARY_PATH``
    (``<CANN>/tools/simulator/<soc>/lib``): pyasc's Model backend loads them, and its own error says to export
    that path when they cannot be found (PYASC, ``runtime/config.py`` ``set_platform``)."""
    if cann_home is None:
        return dict(env)
    lib = str(Path(cann_home) / "tools" / "simulator" / soc / "lib")
    return {**env, "LD_LIBRARY_PATH": os.pathsep.join(filter(None, [lib, env.get("LD_LIBRARY_PATH")]))}


def twin_argv(warmup: int, launches: int, python: str = sys.executable) -> list[str]:
    """The lesson on the twin (pyasc's Model backend, which the twin stands in for), warm-up and measured."""
    return [python, str(LESSON_FILE), "-r", "Model", "--warmup", str(warmup), "--launches", str(launches)]


def twin_env(timings: Path) -> dict[str, str]:
    """The child's environment: the twin first on ``PYTHONPATH`` as ``asc``, its timers to ``timings``.
    Only where pyasc itself is missing: the lab never hides a real pyasc behind its twin."""
    if pyasc_twin.real_pyasc_available():
        raise LabError(
            "pyasc is installed, but this machine has no NPU and CANN for it to run on (and the lab "
            "never hides a real pyasc behind its twin)",
            "run --kernel pyasc on an NPU, or from an environment without pyasc to use the twin",
        )
    path = os.pathsep.join(filter(None, [str(pyasc_twin.SITE), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, TIMINGS_VAR: str(timings)}


@dataclass(frozen=True)
class TwinRun:
    """The pyasc lesson's run on the twin: what it printed and what the Profiler read back."""

    code: int  # the lesson's exit code
    stdout: str
    tasks: list[Task]  # the kernel's op_summary rows (empty when the run failed)
    summary: str  # the op_summary file's name ("" when none was written)
    sizes: dict[str, int] | None  # the sizes the lesson printed
    median_us: float | None  # the median kernel time from ``task_time_median`` (None when the run failed)


def run_twin(out: Path, warmup: int, launches: int, run_program) -> TwinRun:
    """The lesson on the twin inside the in-process Profiler; the measured launches' timers written as a PROF_*
    run in msprof's layout, which the Profiler reads back. ``run_program(argv, env)`` runs the lesson and
    returns its exit code and output."""
    timings = out / TWIN_TIMINGS
    profiler = Profiler(out, backend=TWIN)  # the twin runs on the host, whatever the machine: nothing to collect
    profiler.start()
    summary = None
    try:
        code, stdout = run_program(twin_argv(warmup, launches), twin_env(timings))
        sizes = read_sizes(stdout)
        if code == 0 and sizes and timings.is_file():
            measured = parse_twin_timings(timings)[warmup:]  # the warm-up launches are not profiled
            summary, _ = write_portable_profile(out, twin_tasks(measured, sizes, kernel=PYASC_KERNEL))
    finally:
        profiler.stop()
    if summary is None:
        return TwinRun(code, stdout, [], "", sizes, None)
    median = task_time_median(profiler.store_last_result().tasks, name=PYASC_KERNEL)
    return TwinRun(
        code, stdout, kernel_tasks(readers.read_op_summary(summary), PYASC_KERNEL), summary.name, sizes, median
    )


def pyasc_twin_verdict(returncode: int, stdout: str, launches: int) -> Verdict:
    """add_pyasc.py's own ``verified:`` line covers every element of the sizes it printed, in every launch."""
    verified, line = read_verified(stdout)
    return checks.check_pyasc_verified(returncode, read_sizes(stdout), verified, line, launches)


def profile_pyasc_npu(run, simulator_soc: str | None) -> tuple[list[Verdict], str]:
    """``add_pyasc.py`` as its own program under ``msprof op`` (board, ``-r NPU``) or ``msprof op simulator``
    (``-r Model -v <soc>``); the program verifies its own result and prints a ``verified:`` line.
    Returns the checks and the report's text (msprof op's pipe ratios, or the simulator's per-core table)."""
    from common.backend import find_cann_home

    argv = pyasc_msprof_argv(run.backend.tools["msprof"], run.out, run.device, simulator_soc)
    env = simulator_env(run.child_env, simulator_soc, find_cann_home()) if simulator_soc else run.child_env
    print("$ " + " ".join(argv))
    code, stdout = run_binary(argv, env, run.timeout_s, runlogs.stderr_log(run.out, argv))
    verdicts = [checks.check_npu_verified(code, read_verified(stdout)[0])]
    if simulator_soc:  # per-core instruction and code-line data; no PMU ratios in the simulator
        cores = read_simulator_cores(run.out)
        verdicts.append(checks.check_simulator_cores(code, cores))
        return verdicts, f"msprof op simulator, {simulator_soc}, one launch of add_kernel:\n" + render_simulator(cores)
    pipes = read_msprof_op_pipes(run.out)  # the C++ kernel's reader: OPPROF_*/PipeUtilization*.csv
    verdicts += [
        checks.check_msprof_op(code, pipes, "the metrics_prof region (KernelScale)"),
        checks.check_bound(pipes or dict.fromkeys(PIPES)),
    ]
    body = (
        "msprof op, one launch of add_kernel, mean over the vector blocks of PipeUtilization.csv:\n"
        + "\n".join(f"  aiv_{p}_ratio  {v:.3f}  {PIPE_ROLE[p]}" for p, v in pipes.items() if v is not None)
        if pipes
        else "msprof op wrote no PipeUtilization.csv"
    )
    return verdicts, body


def check_pyasc_npu(backend, args) -> dict:
    """npu backend: the SoC msprof op's reader knows (Atlas A2/A3), checked before prof_out is replaced."""
    soc = args.simulator or soc_version(backend, parse_device_id(args.device))
    if not is_atlas_a2_a3(soc):
        raise LabError(
            f"mode 02 reads the Atlas A2/A3 profile layout (aiv_* columns, sub_block_id, core*.veccore*); "
            f"{'--simulator ' if args.simulator else 'the device is '}{soc}, whose msprof op output differs",
            "use --simulator Ascend910B1 (any Atlas A2/A3 simulator), or the portable twin",
        )
    return {"run_mode": "pyasc-simulator" if args.simulator else "pyasc", "soc_version": soc}


def run_pyasc(lesson, args) -> int:
    """``--kernel pyasc``: add_pyasc.py's kernel, verified, profiled (msprof op on the npu backend, the twin's
    timers elsewhere) and, where per-launch rows exist, classified."""

    def check(backend) -> dict:
        if backend.is_npu:
            return {**check_pyasc_npu(backend, args), "pyasc_lesson": str(LESSON_FILE)}
        if args.simulator:
            raise LabError(
                "--simulator runs msprof op simulator, which needs CANN (the npu backend)",
                "drop --simulator to run the kernel on the pyasc twin",
            )
        twin_env(Path("unused"))  # a real pyasc without an NPU is refused here, before prof_out is replaced
        return {"run_mode": "pyasc-twin", "pyasc_lesson": str(LESSON_FILE)}

    def run_lesson(argv: list[str], env: dict[str, str]) -> tuple[int, str]:
        print("$ " + " ".join(argv))
        return run_binary(argv, env, run.timeout_s, runlogs.stderr_log(run.out, argv))

    run = lesson.start(
        args=args, check=check, warmup_launches=WARMUP_LAUNCHES, measured_launches=MEASURED_LAUNCHES, kernel="pyasc"
    )
    verdicts, finished, body, answer = [checks.workload_not_profiled(run.info["workload"]["name"])], False, None, None
    data_backend = "npu" if run.backend.is_npu else "portable"
    try:
        if run.backend.is_npu:
            more, body = profile_pyasc_npu(run, args.simulator)
            verdicts += more
        else:
            twin = run_twin(run.out, WARMUP_LAUNCHES, MEASURED_LAUNCHES, run_lesson)
            verdicts += [
                pyasc_twin_verdict(twin.code, twin.stdout, WARMUP_LAUNCHES + MEASURED_LAUNCHES),
                check_launch_count(twin.tasks, twin.summary or "no op_summary", PYASC_KERNEL),
                checks.check_ratio_sums(twin.tasks, "portable"),
                checks.check_bound(pipe_ratios(twin.tasks)),
            ]
            if twin.tasks and twin.sizes:
                verdict, answer = kernel_answer(
                    twin.tasks, twin.sizes, twin.summary, PYASC_KERNEL, twin.median_us, 1, "portable"
                )  # one by one
                verdicts.append(verdict)
        finished = True
    finally:
        run.finish(completed=finished and all(v.ok for v in verdicts), backend=data_backend)
    if body is not None:
        return report_msprof_op_only(run, verdicts, body)
    return run.report(verdicts, notes=[answer] if answer else [])
