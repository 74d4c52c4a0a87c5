"""Find and load profiling datasets in a directory, whoever wrote them.

A *dataset* is one folder of exported files: an msprof ``mindstudio_profiler_output/``
(files named ``<name>_<14-digit ts>.csv``, sliced as ``<name>_slice_<i>_<ts>.csv`` past a
million rows) or a torch_npu ``ASCEND_PROFILER_OUTPUT/`` (``kernel_details.csv`` ...).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from common.errors import LabError
from common.formats import readers
from common.formats.engine import pl
from common.formats.overlap import overlap_step_times
from common.formats.records import OpStat, StepTime, Task
from common.formats.rundir import RUN_INFO, read_run_info

_MSPROF_NAME = re.compile(r"^(?P<name>[a-z_]+?)(?:_slice_(?P<slice>\d+))?_(?P<ts>\d{14})\.(?:csv|json)$")
TORCH_NPU_FILES = ("kernel_details.csv", "op_statistic.csv", "step_trace_time.csv", "trace_view.json", "api_statistic.csv")
RUN_INFO_DEPTH = 4  # PROF_*/mindstudio_profiler_output sits at most this deep below prof_out/
# Above this many tasks the report works on engine aggregates only: a Task record costs ~1 KB and
# ~10 us to build, so a million of them would take ~10 s and ~1 GB.
TASK_RECORDS_MAX = 200_000
MSPROF_NAMES = ("op_summary", "op_statistic", "api_statistic", "task_time", "msprof")


@dataclass
class Dataset:
    kind: str  # "msprof" or "torch_npu"
    folder: Path

    @functools.cached_property
    def _files(self) -> dict[str, list[Path]]:
        found: dict[str, list[tuple[int, Path]]] = {}
        for path in self.folder.iterdir():
            if self.kind == "torch_npu":
                if path.name in TORCH_NPU_FILES:
                    found.setdefault(path.name.rsplit(".", 1)[0], []).append((0, path))
            elif (m := _MSPROF_NAME.match(path.name)) and m["name"] in MSPROF_NAMES:
                found.setdefault(m["name"], []).append((int(m["slice"] or 0), path))
        return {name: [p for _, p in sorted(items)] for name, items in found.items()}

    def files(self, name: str) -> list[Path]:
        """All files (slices in order) of one kind, e.g. ``files("op_summary")``."""
        return self._files.get(name, [])

    def has(self, name: str) -> bool:
        return bool(self.files(name))

    @property
    def task_file(self) -> str:
        """The per-task file of this kind of dataset: op_summary (msprof) or kernel_details (torch_npu)."""
        return "op_summary" if self.kind == "msprof" else "kernel_details"

    @functools.cached_property
    def tasks(self) -> list[Task]:
        """Every task as a typed record, slices joined (small profiles; at scale use the table accessors)."""
        reader = readers.read_op_summary if self.kind == "msprof" else readers.read_kernel_details
        return [task for path in self.files(self.task_file) for task in reader(path)]

    @functools.cached_property
    def task_totals(self) -> pl.DataFrame:
        """Per (Device_id, OP Type, Core Type, Input Shapes) count and total/min/max µs of the task file, slices joined.

        Computed in polars a block at a time, so memory stays bounded however many rows there are.
        """
        parts = [readers.task_totals(path, self.task_file) for path in self.files(self.task_file)]
        return readers.merge_totals(pl.concat(parts)) if parts else readers.task_totals_empty()

    @property
    def task_count(self) -> int:
        return int(self.task_totals["count"].sum())

    @property
    def small(self) -> bool:
        """Few enough tasks for per-task records (:attr:`tasks`); larger profiles use the table accessors."""
        return self.task_count <= TASK_RECORDS_MAX

    def time_by_op_and_shape(self) -> dict[tuple[str, str], float]:
        """Summed task µs per (OP Type, Input Shapes), shapes ``N/A`` when not recorded."""
        per = self.task_totals.group_by("op_type", "input_shapes").agg(pl.col("total_us").sum())
        return {(op, shapes or "N/A"): total for op, shapes, total in per.iter_rows()}

    @functools.cached_property
    def type_counts(self) -> dict[str, int]:
        """Task count per OP Type of the task file."""
        per_type = self.task_totals.group_by("op_type").agg(pl.col("count").sum())
        return dict(per_type.iter_rows())

    @functools.cached_property
    def op_statistic(self) -> list[OpStat]:
        """op_statistic from its file, or built from the task file when only that was exported."""
        if self.has("op_statistic"):
            return [row for path in self.files("op_statistic") for row in readers.read_op_statistic(path)]
        return readers.op_statistic_from_totals(self.task_totals)

    @functools.cached_property
    def steps(self) -> list[StepTime]:
        """step_trace_time rows; without that file, one whole-trace row recomputed from trace_view.json.

        The recomputation sums the timeline's Overlap Analysis events (``overlap.overlap_step_times``,
        per ProfilerStep when the trace has them), as torch_npu and msprof-analyze do, so Computing/Free
        agree with msprof-analyze on any torch_npu output, step_trace_time.csv or not. The trace is
        streamed (``readers.read_overlap``): a gigabyte trace_view.json stays within bounded memory.
        """
        if self.has("step_trace_time"):
            return [row for path in self.files("step_trace_time") for row in readers.read_step_trace_time(path)]
        return [row for path in self.files("trace_view") for row in overlap_step_times(readers.read_overlap(path))]

    @property
    def steps_source(self) -> str:
        """Where :attr:`steps` come from, for reports."""
        if self.has("step_trace_time"):
            return "step_trace_time.csv"
        whole = not any(row.step is not None for row in self.steps)
        return f"trace_view.json Overlap Analysis events, {'whole trace' if whole else 'per ProfilerStep'} (no step_trace_time.csv)"

    def label(self, root: Path) -> str:
        try:
            return str(self.folder.relative_to(root)) or "."
        except ValueError:
            return str(self.folder)


def _kind(folder: Path) -> str | None:
    names = {p.name for p in folder.iterdir() if p.is_file()}
    if names & set(TORCH_NPU_FILES):
        return "torch_npu"
    if any((m := _MSPROF_NAME.match(n)) and m["name"] in MSPROF_NAMES for n in names):
        return "msprof"
    return None


def find_datasets(root: Path | str) -> list[Dataset]:
    """Every dataset folder at or below ``root`` (raw ``device_*/data`` is not one)."""
    root = Path(root)
    if not root.exists():
        raise LabError(f"{root}: no such directory", "give the prof_out/ of a mode or a PROF_*/ or *_ascend_pt/ folder")
    if not root.is_dir():
        raise LabError(f"{root} is not a directory", "give the folder that holds the profile, not a file")
    folders = [root, *sorted(p for p in root.rglob("*") if p.is_dir() and not p.is_symlink())]
    datasets = [Dataset(kind, folder) for folder in folders if (kind := _kind(folder))]
    if not datasets:
        raise LabError(
            f"{root}: no msprof or torch_npu output found",
            "expected PROF_*/mindstudio_profiler_output/*.csv or ASCEND_PROFILER_OUTPUT/kernel_details.csv",
        )
    return datasets


def find_run_info(path: Path | str) -> dict | None:
    """run_info.json of the lab run that wrote ``path`` (looked up in it and its parents)."""
    path = Path(path).resolve()
    for folder in (path, *path.parents[:RUN_INFO_DEPTH]):
        if (folder / RUN_INFO).is_file():
            return read_run_info(folder)
    return None
