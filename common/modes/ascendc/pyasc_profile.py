"""Run ``add_pyasc.py`` for ``run.sh --kernel pyasc``: the lesson as a program, on the twin or under msprof op.

On the portable backend the lesson runs on the lab's pyasc twin (``pyasc_twin/``, first on the child's
``PYTHONPATH`` because pyasc is missing), with warm-up and measured launches, each verified by the
program itself. The twin writes its per-block pipe timers to ``$ASCENDC_TWIN_TIMINGS`` when the
program exits; they become op_summary rows through ``twin_profile`` (the writer the C++ twin's timers
go through), inside a ``common.collect.profiling.Profiler`` block, and the median is ``task_time_median`` over
the tasks it reads back.

On the npu backend the lesson runs as its own program under ``msprof op`` (``-r NPU``, on the board)
or ``msprof op simulator`` (``-r Model -v <soc>``, CANN's simulator): ``pyasc_msprof_argv`` builds
both commands from the builders in ``common.collect.npu_commands``.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from common.backend import Backend
from common.collect.npu_commands import MSPROF_OP_METRICS_REGION, msprof_op_argv, msprof_op_simulator_argv
from common.errors import LabError
from common.formats import readers
from common.formats.records import Task
from common.modes.ascendc import PYASC_LESSON, pyasc_twin
from common.modes.ascendc.kernel_report import kernel_tasks, read_sizes
from common.formats.twin_timings import parse_twin_timings
from common.modes.ascendc.twin_profile import TIMINGS_VAR, twin_tasks, write_portable_profile
from common.collect.profiling import Profiler, task_time_median

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
