"""The portable twins' timers as msprof output: per-block timer rows -> op_summary / op_statistic rows.

The C++ twin (``twin/``) times each block's pipes on the host, the pyasc twin (``pyasc_twin/``) in
Python; both write the same CSV columns to ``$ASCENDC_TWIN_TIMINGS`` (:data:`TIMINGS_VAR`) when the
program exits, one row per block and launch. These functions turn that into what msprof writes on an
NPU, with op_summary's real column names, so the same readers and checks work on both: the measured
``aiv_*`` columns are filled, every other PMU column is N/A.
"""

from __future__ import annotations

import csv
from pathlib import Path

from common.collect.msprof_layout import new_prof_dir
from common.errors import LabError
from common.formats import writers
from common.formats.records import Task
from common.formats.twin_timings import LaunchPipes, parse_twin_timings
from common.analyze.bounds.kernel import PIPES
from common.modes.ascendc.kernel_report import KERNEL

TIMINGS_VAR = "ASCENDC_TWIN_TIMINGS"  # where both twins write their timers at exit (the lab sets it)


def twin_tasks(launches: list[LaunchPipes], sizes: dict[str, int], kernel: str = KERNEL) -> list[Task]:
    """op_summary rows of ``kernel``: measured aiv_* columns, every other PMU column N/A, Task Type CPU.

    ``sizes`` is what the host program printed (kernel_report.read_sizes): Block Dim and shapes; without it (the
    timings alone) Block Dim is the blocks each launch recorded and the shapes are N/A.
    """
    total = sizes.get("total_length")
    tasks = []
    for launch in launches:
        pmu: dict[str, float | None] = {"aiv_time(us)": launch.aiv_time_us}
        for pipe in PIPES:
            t = launch.pipe_us[pipe]
            pmu[f"aiv_{pipe}_time(us)"] = t
            pmu[f"aiv_{pipe}_ratio"] = t / launch.aiv_time_us if launch.aiv_time_us else None
        tasks.append(
            Task(
                op_name=kernel,
                op_type=kernel,
                task_type="CPU",
                start_us=launch.start_us,
                duration_us=launch.duration_us,
                device_id="host",
                block_dim=sizes.get("block_dim", launch.blocks),
                input_shapes=f"{total};{total}" if total else None,
                input_dtypes="DT_FLOAT16;DT_FLOAT16",
                output_shapes=f"{total}" if total else None,
                output_dtypes="DT_FLOAT16",
                pmu=pmu,
            )
        )
    return writers.with_wait_times(tasks)


def convert_timings(path: Path, into: Path) -> str:
    """A twin's timings CSV made outside the lab (the copied 02 lesson run with ``$ASCENDC_TWIN_TIMINGS``) ->
    msprof's files under ``into``, as the mode writes its own. The file does not mark warm-up launches: the first
    launch (it pays the one-off costs) is left out, every later one is read. Returns a line saying so."""
    try:
        launches = parse_twin_timings(path)
    except (KeyError, ValueError, csv.Error) as err:
        raise LabError(
            f"{path}: not a twin timings CSV ({err!r})", "give the file $ASCENDC_TWIN_TIMINGS named when the kernel ran"
        ) from None
    if not launches:
        raise LabError(f"{path}: a twin timings CSV with no launch", "run the kernel with at least two launches")
    skip = 1 if len(launches) > 1 else 0
    write_portable_profile(into, twin_tasks(launches[skip:], {}))
    return (
        f"{len(launches)} launches recorded, "
        + ("the first left out as a warm-up, " if skip else "")
        + f"{len(launches) - skip} read (the twin's pipe timers; input shapes are N/A: the CSV does not hold them)"
    )


def write_portable_profile(out_dir: Path, tasks: list[Task]) -> tuple[Path, Path]:
    """PROF_*/mindstudio_profiler_output/{op_summary,op_statistic}_<ts>.csv, as msprof lays them out."""
    prof = new_prof_dir(out_dir)
    summary = writers.write_op_summary(prof.file("op_summary"), tasks)
    statistic = writers.write_op_statistic(prof.file("op_statistic"), writers.aggregate_op_statistic(tasks))
    return summary, statistic
