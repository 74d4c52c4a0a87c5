"""Run ``add_pyasc.py``'s kernel for ``run.sh --kernel pyasc``: launch, verify, time, write msprof's layout.

pyasc launches a kernel from Python, in this process, so the profiling is in-process too:
``common.profiling.Profiler`` (pyasc's ``asc.lib.profiling`` names) around the launches, and
``task_time_median`` over the tasks it reads back. On the portable backend the kernel runs on the
lab's pyasc twin (``pyasc_twin/``), whose per-block pipe timers become op_summary rows through
``twin_profile`` — the same writer the C++ twin's timers go through.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import pyasc_twin
from kernel_report import kernel_tasks
from twin_profile import launch_pipes, twin_tasks, write_portable_profile

from common.analyze.checks import Verdict
from common.errors import LabError
from common.formats import readers
from common.formats.records import Task
from common.profiling import Profiler, task_time_median

LESSON = "add_pyasc"  # src/add_pyasc.py
PYASC_KERNEL = "add_kernel"  # the @asc.jit function's name: the Op Name its tasks carry


def load_lesson(backend_is_npu: bool) -> ModuleType:
    """``add_pyasc`` with the real pyasc on an NPU, or with the twin installed as ``asc`` where pyasc is missing."""
    if backend_is_npu or pyasc_twin.real_pyasc_available():
        if not backend_is_npu:
            raise LabError("pyasc is installed, but this machine has no NPU and CANN for it to run on (and the lab "
                           "never hides a real pyasc behind its twin)",
                           "run --kernel pyasc on an NPU, or from an environment without pyasc to use the twin")
        raise LabError("--kernel pyasc on the npu backend is not wired into run.sh yet",
                       "run `python 02_api_AscendC/src/add_pyasc.py -r NPU --device <dev>` under msprof op "
                       "(02_api_AscendC/README.md gives the commands)")
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
