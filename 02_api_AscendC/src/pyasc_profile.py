"""Run ``add_pyasc.py``'s kernel for ``run.sh --kernel pyasc``: launch, verify, time, write msprof's layout.

pyasc launches a kernel from Python, in this process, so the profiling is in-process too:
``common.profiling.Profiler`` (pyasc's ``asc.lib.profiling`` names) around the launches, and
``task_time_median`` over the tasks it reads back. On the portable backend the kernel runs on the
lab's pyasc twin (``pyasc_twin/``), whose per-block pipe timers become op_summary rows through
``twin_profile`` — the same writer the C++ twin's timers go through.

On the npu backend the lesson runs as its own program under ``msprof op`` (``-r NPU``, on the board)
or ``msprof op simulator`` (``-r Model -v <soc>``, CANN's simulator): ``pyasc_msprof_argv`` builds
both commands from the builders in ``common.collect.npu_commands``.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pyasc_twin
from kernel_report import kernel_tasks
from twin_profile import launch_pipes, twin_tasks, write_portable_profile

from common.collect.npu_commands import MSPROF_OP_METRICS_REGION, msprof_op_argv, msprof_op_simulator_argv
from common.errors import LabError
from common.formats import readers
from common.formats.records import Task
from common.profiling import Profiler, task_time_median
from common.verdict import Verdict

LESSON = "add_pyasc"  # src/add_pyasc.py
LESSON_FILE = Path(__file__).resolve().with_name(f"{LESSON}.py")
PYASC_KERNEL = "add_kernel"  # the @asc.jit function's name: the Op Name its tasks carry


def pyasc_msprof_argv(msprof: str, out: Path, device: int, simulator_soc: str | None = None,
                      python: str = sys.executable) -> list[str]:
    """The ``msprof op`` command that runs ``add_pyasc.py`` once: on the board (``-r NPU --device <dev>``,
    KernelScale so the kernel's metrics_prof region is honoured) or, with ``simulator_soc``, in CANN's
    simulator (``msprof op simulator --soc-version=<soc> ... -r Model -v <soc>``). One launch is collected."""
    lesson = [python, str(LESSON_FILE)]
    if simulator_soc:
        return msprof_op_simulator_argv(msprof, out, [*lesson, "-r", "Model", "-v", simulator_soc], simulator_soc,
                                        kernel_name=PYASC_KERNEL, launch_count=1)
    return msprof_op_argv(msprof, out, [*lesson, "-r", "NPU", "--device", str(device)], kernel_name=PYASC_KERNEL,
                          launch_count=1, aic_metrics=MSPROF_OP_METRICS_REGION)


def load_lesson() -> ModuleType:
    """``add_pyasc`` on the twin, installed as ``asc`` because pyasc is missing (the portable backend only:
    on the npu backend the lesson runs as its own program under msprof op)."""
    if pyasc_twin.real_pyasc_available():
        raise LabError("pyasc is installed, but this machine has no NPU and CANN for it to run on (and the lab "
                       "never hides a real pyasc behind its twin)",
                       "run --kernel pyasc on an NPU, or from an environment without pyasc to use the twin")
    pyasc_twin.install()
    return importlib.import_module(LESSON)


def sizes_of(lesson: ModuleType) -> dict[str, int]:
    """The lesson's sizes, under the names of the C++ program's ``kernel sizes:`` line."""
    return {"total_length": lesson.TOTAL_LENGTH, "block_dim": lesson.USE_CORE_NUM,
            "block_length": lesson.BLOCK_LENGTH, "tile_num": lesson.TILE_NUM, "buffer_num": lesson.BUFFER_NUM,
            "tile_length": lesson.TILE_LENGTH}


def run_twin(out: Path, lesson: ModuleType, warmup: int, launches: int
             ) -> tuple[Verdict, list[Task], str, dict[str, int], float]:
    """Warm-up and measured launches on the twin, each verified; the measured ones written as a PROF_* run.

    Returns the verification verdict, the op_summary rows, the file's name, the sizes and the
    median kernel time (µs) from ``task_time_median`` over the run the Profiler read back.
    """
    import asc._twin as twin

    sizes = sizes_of(lesson)
    x, y = lesson.make_inputs()
    bad_launches, first_bad = 0, []
    profiler = Profiler(out)
    with profiler.profile(cleanup=False):
        for i in range(warmup + launches):
            if i == warmup:
                twin.take_rows()  # the warm-up launches are not profiled
            z = lesson.launch(x, y)
            bad = lesson.mismatches(x, y, z, lesson.MAX_ULP["twin"])
            bad_launches += bool(bad)
            first_bad = first_bad or bad
        summary, _ = write_portable_profile(out, twin_tasks(launch_pipes(twin.take_rows()), sizes, kernel=PYASC_KERNEL))
    for index, want, got in first_bad[:5]:
        print(f"mismatch at {index}: expected {want}, got {got}")
    total = sizes["total_length"]
    ok = bad_launches == 0
    detail = (f"{total} of {total} equal numpy's fp16 x + y bit for bit in each of {warmup + launches} launches"
              if ok else f"{bad_launches} of {warmup + launches} launches differ from numpy's fp16 x + y; "
                         f"first launch: {len(first_bad)} elements (first mismatches printed above)")
    print(f"verified: {total - len(first_bad)} of {total} elements in each of {warmup + launches} launches")
    median = task_time_median(profiler.last_result.tasks, name=PYASC_KERNEL)
    tasks = kernel_tasks(readers.read_op_summary(summary), PYASC_KERNEL)
    return Verdict(f"all {total} elements verified", ok, detail), tasks, summary.name, sizes, median
