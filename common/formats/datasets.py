"""Find and load profiling datasets in a directory, whoever wrote them.

A *dataset* is one export of one capture: an msprof ``mindstudio_profiler_output/`` (files
named ``<name>_<14-digit ts>.csv``, sliced as ``<name>_slice_<i>_<ts>.csv`` past a million
rows), a torch_npu ``ASCEND_PROFILER_OUTPUT/`` (``kernel_details.csv`` ...), or the SQLite
export of either (``ascend_pytorch_profiler[_{rank}].db``, ``msprof_<ts>.db``; read by
:mod:`common.formats.db`). A capture exported both ways is read once: the text export when it
is complete, the database otherwise (:attr:`Dataset.source` says which, and why).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

from common.errors import LabError
from common.formats import readers
from common.formats.db import ProfilerDb, db_kind
from common.formats.engine import pl
from common.formats.memory import MEMORY_FILES, MemoryData, memory_from_db, read_memory
from common.formats.overlap import overlap_step_times
from common.formats.records import OpStat, StepTime, Task, TxRange
from common.formats.rundir import RUN_INFO, read_run_info, require_directory
from common.workload import FORWARD_RANGE

_MSPROF_NAME = re.compile(r"^(?P<name>[a-z_]+?)(?:_slice_(?P<slice>\d+))?_(?P<ts>\d{14})\.(?:csv|json)$")
TORCH_NPU_FILES = (
    "kernel_details.csv",
    "op_statistic.csv",
    "step_trace_time.csv",
    "trace_view.json",
    "api_statistic.csv",
)
RUN_INFO_DEPTH = 4  # PROF_*/mindstudio_profiler_output sits at most this deep below prof_out/
# Above this many tasks the report works on engine aggregates only: a Task record costs ~1 KB and
# ~10 us to build, so a million of them would take ~10 s and ~1 GB.
TASK_RECORDS_MAX = 200_000
MSPROF_NAMES = ("op_summary", "op_statistic", "api_statistic", "task_time", "msprof", "msprof_tx")


DB_KINDS = ("torch_npu_db", "msprof_db")
MSPROF_TEXT_DIR = "mindstudio_profiler_output"  # beside msprof_<ts>.db in PROF_*/ (current layout)


@dataclass
class Dataset:
    kind: str  # "msprof", "torch_npu" (text exports), "msprof_db" or "torch_npu_db" (SQLite exports)
    folder: Path
    db: Path | None = None  # the .db file of a database dataset
    skipped: list[Path] = field(default_factory=list)  # the same capture's other export(s), not read
    reason: str | None = None  # why this export was read rather than the skipped one
    damaged: dict[Path, str] = field(default_factory=dict)  # files left out as unreadable, and why
    # what readers in other modules keep of this export (common.formats.advice_input); fresh in a copy
    memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def without(self, damaged: dict[Path, str]) -> Dataset:
        """This dataset read as if the ``damaged`` files of its folder were absent (a fresh one: nothing cached)."""
        mine = {p: why for p, why in damaged.items() if p.parent == self.folder}
        return dataclasses.replace(self, damaged={**self.damaged, **mine}) if mine else self

    def all_files(self) -> list[Path]:
        """Every file this dataset reads (a database: the .db file)."""
        if self.db is not None:
            return [self.db]
        memory = [self.folder / name for name in MEMORY_FILES] if self.kind == "torch_npu" else []
        return [p for files in self._files.values() for p in files] + [p for p in memory if p.is_file()]

    @property
    def is_db(self) -> bool:
        return self.db is not None

    @functools.cached_property
    def profiler_db(self) -> ProfilerDb:
        if self.db is None:
            raise ValueError(f"{self.folder}: a text dataset has no database")
        return ProfilerDb(self.db, self.kind)

    @functools.cached_property
    def _exports(self) -> tuple[dict[str, list[Path]], list[Path]]:
        """(name -> the files read, slices in order; the older exports' files, not read).

        msprof stamps every file of one export with one ``<14-digit ts>``; a folder exported twice
        holds both stamps. Of each kind of file the newest export is read and the older ones are
        left out (counting both would double every op); ``_slice_<i>_`` files of one stamp are one export.
        """
        found: dict[str, dict[str, list[tuple[int, Path]]]] = {}
        if self.is_db:
            return {}, []
        for path in self.folder.iterdir():
            if path in self.damaged:
                continue
            if self.kind == "torch_npu":
                if path.name in TORCH_NPU_FILES:
                    found.setdefault(path.name.rsplit(".", 1)[0], {}).setdefault("", []).append((0, path))
            elif (m := _MSPROF_NAME.match(path.name)) and m["name"] in MSPROF_NAMES:
                found.setdefault(m["name"], {}).setdefault(m["ts"], []).append((int(m["slice"] or 0), path))
        files, older = {}, []
        for name, stamps in found.items():
            newest = max(stamps)
            files[name] = [p for _, p in sorted(stamps[newest])]
            older += [p for ts, items in stamps.items() if ts != newest for _, p in sorted(items)]
        return files, sorted(older)

    @property
    def _files(self) -> dict[str, list[Path]]:
        return self._exports[0]

    @property
    def superseded(self) -> list[Path]:
        """Files of older exports in the same folder (another ``<14-digit ts>``), not read."""
        return self._exports[1]

    def files(self, name: str) -> list[Path]:
        """All files (slices in order) of one kind, e.g. ``files("op_summary")``."""
        return self._files.get(name, [])

    def has(self, name: str) -> bool:
        return bool(self.files(name))

    @property
    def task_file(self) -> str:
        """The per-task file: op_summary (msprof), kernel_details (torch_npu) or the .db file's name."""
        if self.db is not None:
            return self.db.name
        return "op_summary" if self.kind == "msprof" else "kernel_details"

    @property
    def complete(self) -> bool:
        """A text export with its task file (and, from torch_npu, a step table or timeline); any database."""
        if self.is_db:
            return True
        if not self.has(self.task_file):
            return False
        return self.kind == "msprof" or self.has("step_trace_time") or self.has("trace_view")

    @property
    def source(self) -> str:
        """Which export of the capture was read, for reports."""
        what = f"database export {self.db.name}" if self.db is not None else f"text export ({self.kind})"
        if self.superseded:
            stamps = sorted({_MSPROF_NAME.match(p.name)["ts"] for p in self.superseded})
            newest = sorted({_MSPROF_NAME.match(p.name)["ts"] for files in self._files.values() for p in files})
            what += (
                f" of the newest export ({', '.join(newest)}); not read: {len(self.superseded)} file(s) of "
                f"older export(s) {', '.join(stamps)} in the same folder (reading both would count every op twice)"
            )
        if not self.skipped:
            return f"read: {what}"
        other = ", ".join(p.name for p in self.skipped)
        return f"read: {what}; not read: {other} ({self.reason})"

    def counterpart(self) -> Dataset | None:
        """The same capture's other export as a dataset, when both are complete (for cross-checks)."""
        for path in self.skipped:
            kind = db_kind(path.name)
            other = (
                Dataset(kind, path.parent, db=path)
                if kind
                else Dataset(_kind(path) or "", path)
                if path.is_dir()
                else None
            )
            if other is not None and other.kind and other.complete and self.complete:
                return other
        return None

    @functools.cached_property
    def tasks(self) -> list[Task]:
        """Every task as a typed record, slices joined (small profiles; at scale use the table accessors)."""
        if self.is_db:
            return self.profiler_db.tasks()
        reader = readers.read_op_summary if self.kind == "msprof" else readers.read_kernel_details
        return [task for path in self.files(self.task_file) for task in reader(path)]

    @functools.cached_property
    def tx_ranges(self) -> list[TxRange]:
        """The application's own ranges (msprof_tx, written with ``--msproftx=on``), oldest first."""
        ranges = [r for path in self.files("msprof_tx") for r in readers.read_msprof_tx(path)]
        return sorted(ranges, key=lambda r: r.start_us)

    @functools.cached_property
    def task_totals(self) -> pl.DataFrame:
        """Per (Device_id, OP Type, Core Type, Input Shapes) count and total/min/max µs of the task file, slices joined.

        Computed in polars a block at a time (SQLite's GROUP BY for a database), so memory stays
        bounded however many rows there are. A task file holding its header and no row is refused:
        msprof and torch_npu write one only when tasks ran, so it was cut short.
        """
        if self.is_db:
            return self.profiler_db.task_totals()
        paths = self.files(self.task_file)
        parts = [readers.task_totals(path, self.task_file) for path in paths]
        totals = readers.merge_totals(pl.concat(parts)) if parts else readers.task_totals_empty()
        if paths and not totals.height:
            again = (
                "export the raw data again (msprof --export=on --output=<PROF_*>) or collect again"
                if self.kind == "msprof"
                else "collect again"
            )
            raise LabError(
                f"{', '.join(map(str, paths))}: only the header line, no task rows",
                f"the export was cut short: {again}",
            )
        return totals

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
        """op_statistic from its file, or built from the task file when only that was exported.

        A database has no op_statistic table: it is built from its compute tasks, as msprof builds the file.
        """
        if self.is_db:
            return self.profiler_db.op_statistic()
        if self.has("op_statistic"):
            return [row for path in self.files("op_statistic") for row in readers.read_op_statistic(path)]
        return readers.op_statistic_from_totals(self.task_totals)

    @functools.cached_property
    def memory(self) -> MemoryData | None:
        """Memory as the capture recorded it, read once: a torch_npu text export's memory files or a
        database's MEMORY_RECORD / OP_MEMORY (empty when it recorded none); None for msprof's exports."""
        if self.is_db:
            return memory_from_db(self.profiler_db.memory_records(), self.profiler_db.op_memory())
        return read_memory(self.folder, self.damaged) if self.kind == "torch_npu" else None

    @functools.cached_property
    def steps(self) -> list[StepTime]:
        """step_trace_time rows; without that file, one whole-trace row recomputed from trace_view.json.

        The recomputation sums the timeline's Overlap Analysis events (``overlap.overlap_step_times``,
        per ProfilerStep when the trace has them), as torch_npu and msprof-analyze do, so Computing/Free
        agree with msprof-analyze on any torch_npu output, step_trace_time.csv or not. The trace is
        streamed (``readers.read_overlap``): a gigabyte trace_view.json stays within bounded memory.
        A database's come from analysis.db's StepTraceTime, else its OVERLAP_ANALYSIS events.
        """
        if self.is_db:
            return self.profiler_db.steps()
        if self.has("step_trace_time"):
            return [row for path in self.files("step_trace_time") for row in readers.read_step_trace_time(path)]
        return [row for path in self.files("trace_view") for row in overlap_step_times(readers.read_overlap(path))]

    @property
    def steps_source(self) -> str:
        """Where :attr:`steps` come from, for reports."""
        if self.is_db:
            return self.profiler_db.steps_and_source[1]
        if self.has("step_trace_time"):
            return "step_trace_time.csv"
        whole = not any(row.step is not None for row in self.steps)
        return f"trace_view.json Overlap Analysis events, {'whole trace' if whole else 'per ProfilerStep'} (no step_trace_time.csv)"

    def label(self, root: Path) -> str:
        try:
            return str(self.folder.relative_to(root)) or "."
        except ValueError:
            return str(self.folder)

    def rows(self, name: str) -> int:
        """Rows of every file of one kind, each parsed with its columns (a LabError says what is wrong)."""
        reader = {
            "op_summary": readers.read_op_summary,
            "kernel_details": readers.read_kernel_details,
            "op_statistic": readers.read_op_statistic,
            "api_statistic": readers.read_api_statistic,
            "task_time": readers.read_task_time,
            "step_trace_time": readers.read_step_trace_time,
            "msprof": readers.read_trace,
            "trace_view": readers.read_trace,
        }[name]
        return sum(len(reader(path)) for path in self.files(name))

    @functools.cached_property
    def step_tables(self) -> StepTables | None:
        """The step table and the same rebuilt from the timeline's Overlap Analysis events it is built from.

        Text: step_trace_time.csv and trace_view.json; database: analysis.db StepTraceTime and the
        OVERLAP_ANALYSIS table. None when the capture lacks one of the two (or the timeline has no
        Overlap Analysis events: a Level0 or msprof export).
        """
        if self.is_db:
            db = self.profiler_db
            table = db.analysis_steps()
            overlap = db.overlap() if table else None
            rebuilt = overlap_step_times(overlap) if overlap is not None else []
            if not table or not rebuilt:
                return None
            return StepTables(table, rebuilt, "analysis.db StepTraceTime", f"{db.path.name} OVERLAP_ANALYSIS")
        if not self.has("step_trace_time") or not self.has("trace_view"):
            return None
        rebuilt = [row for path in self.files("trace_view") for row in overlap_step_times(readers.read_overlap(path))]
        if not rebuilt:
            return None
        return StepTables(self.steps, rebuilt, "step_trace_time.csv", "trace_view.json Overlap Analysis")


@dataclass(frozen=True)
class StepTables:
    """A capture's step table and the one rebuilt from its Overlap Analysis events, with where each comes from."""

    table: list[StepTime]
    rebuilt: list[StepTime]
    table_source: str
    rebuilt_source: str


@dataclass(frozen=True)
class FileRows:
    """One kind of file in one dataset: its first file (None: the dataset has none) and the rows of all
    of them, or why they could not be read."""

    dataset: str  # the dataset's folder name
    name: str
    first: Path | None
    rows: int | None = None
    error: str | None = None


def file_rows(datasets: list[Dataset], names: list[str]) -> list[FileRows]:
    """Each named kind of file in each dataset, in order, read: what common.analyze.checks.check_files checks."""
    out = []
    for ds in datasets:
        for name in names:
            files = ds.files(name)
            if not files:
                out.append(FileRows(ds.folder.name, name, None))
                continue
            try:
                out.append(FileRows(ds.folder.name, name, files[0], ds.rows(name)))
            except LabError as err:
                out.append(FileRows(ds.folder.name, name, files[0], error=str(err)))
    return out


def tasks_of(datasets: list[Dataset]) -> list[Task]:
    """Every task of these datasets, in order."""
    return [task for ds in datasets for task in ds.tasks]


def stats_of(datasets: list[Dataset]) -> list[OpStat]:
    """Every op_statistic row of these datasets, in order."""
    return [row for ds in datasets for row in ds.op_statistic]


def forward_windows(datasets: list[Dataset]) -> list[tuple[float, float]]:
    """The windows (start, end µs) of the forwards a program named with the lab's range (msprof_tx ``FORWARD_RANGE``:
    01's model.py marks each one), in the order recorded."""
    return [r.window_us for ds in datasets for r in ds.tx_ranges if r.message == FORWARD_RANGE]


def _kind(folder: Path) -> str | None:
    names = {p.name for p in folder.iterdir() if p.is_file()}
    if names & set(TORCH_NPU_FILES):
        return "torch_npu"
    if any((m := _MSPROF_NAME.match(n)) and m["name"] in MSPROF_NAMES for n in names):
        return "msprof"
    return None


def _databases(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if db_kind(p.name) and p.is_file())


def _read_once(folder: Path, dbs: list[Path], text: Dataset | None) -> Dataset:
    """One dataset for a capture exported as text and/or databases: the text when complete."""
    if text is not None and text.complete:
        text.skipped, text.reason = dbs, "database export of the same capture; its text export is complete"
        return text
    newest = dbs[-1]  # msprof_<ts>.db sorts by its timestamp: a re-export is the last
    skipped = dbs[:-1] + ([text.folder] if text is not None else [])
    missing = f"no {text.task_file} file" if text is not None and not text.has(text.task_file) else "no step table"
    reason = (
        f"incomplete text export of the same capture: {missing}"
        if text is not None
        else f"older export of the same capture than {newest.name}"
    )
    return Dataset(db_kind(newest.name) or "torch_npu_db", folder, db=newest, skipped=skipped, reason=reason)


_TEXT_STEMS = tuple(dict.fromkeys([*MSPROF_NAMES, *(n.rsplit(".", 1)[0] for n in TORCH_NPU_FILES)]))


def _refuse_near_misses(root: Path, folders: list[Path]) -> None:
    """No dataset found: if files look like a profiler's under another name, say which names are expected."""
    dbs, texts = [], []
    for folder in folders:
        for path in folder.iterdir():
            if not path.is_file():
                continue
            if path.suffix == ".db" and not db_kind(path.name):
                dbs.append(path)
            elif path.suffix in (".csv", ".json") and path.name.startswith(_TEXT_STEMS):
                texts.append(path)
    if texts:
        listed = ", ".join(str(p.relative_to(root)) for p in sorted(texts)[:3]) + (", ..." if len(texts) > 3 else "")
        raise LabError(
            f"{root}: {len(texts)} file(s) named like profiler output but not as msprof or torch_npu name them: {listed}",
            "msprof names its files <name>_<14-digit timestamp>.csv (e.g. op_summary_20260101000000.csv, "
            "op_summary_slice_0_20260101000000.csv); torch_npu writes kernel_details.csv, op_statistic.csv, "
            "step_trace_time.csv, trace_view.json; rename them so, or give the folder the profiler wrote",
        )
    if dbs:
        listed = ", ".join(str(p.relative_to(root)) for p in sorted(dbs)[:3]) + (", ..." if len(dbs) > 3 else "")
        only = (
            " (analysis.db holds torch_npu's communication analysis, not the profile)"
            if all(p.name == "analysis.db" for p in dbs)
            else ""
        )
        raise LabError(
            f"{root}: only database file(s) that are not a profiler export: {listed}{only}",
            "give the folder holding ascend_pytorch_profiler[_<rank>].db (torch_npu export_type=db) or "
            "msprof_<14-digit timestamp>.db (msprof --type=db)",
        )


def find_datasets(root: Path | str) -> list[Dataset]:
    """Every dataset at or below ``root`` (raw ``device_*/data`` is not one), each capture once.

    A database and a text export are one capture when they share a folder (torch_npu's
    ASCEND_PROFILER_OUTPUT/, msprof CANN 8.0.RC1's mindstudio_profiler_output/) or the database
    sits in the PROF_*/ folder of the mindstudio_profiler_output/ (msprof's current layout).
    """
    root = Path(root)
    require_directory(root, "give the prof_out/ of a mode or a PROF_*/ or *_ascend_pt/ folder")
    folders = [root, *sorted(p for p in root.rglob("*") if p.is_dir() and not p.is_symlink())]
    text = {folder: Dataset(kind, folder) for folder in folders if (kind := _kind(folder))}
    chosen: dict[Path, Dataset] = {}
    for folder in folders:
        dbs = _databases(folder)
        if not dbs:
            continue
        twin = next((f for f in (folder, folder / MSPROF_TEXT_DIR) if f in text), None)
        chosen[folder] = _read_once(folder, dbs, text.pop(twin) if twin is not None else None)
    chosen.update(text)
    datasets = [chosen[folder] for folder in folders if folder in chosen]
    if not datasets:
        _refuse_near_misses(root, folders)
        raise LabError(
            f"{root}: no msprof or torch_npu output found",
            "expected PROF_*/mindstudio_profiler_output/*.csv, ASCEND_PROFILER_OUTPUT/kernel_details.csv "
            "or a database export (ascend_pytorch_profiler_*.db, msprof_*.db)",
        )
    return datasets


def dataset_of(folder: Path | str) -> Dataset | None:
    """The one dataset of a single export folder (e.g. a rank's ASCEND_PROFILER_OUTPUT/), text or database."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    kind = _kind(folder)
    dbs = _databases(folder)
    text = Dataset(kind, folder) if kind else None
    return _read_once(folder, dbs, text) if dbs else text


def find_run_info(path: Path | str) -> dict | None:
    """run_info.json of the lab run that wrote ``path`` (looked up in it and its parents)."""
    path = Path(path).resolve()
    for folder in (path, *path.parents[:RUN_INFO_DEPTH]):
        if (folder / RUN_INFO).is_file():
            return read_run_info(folder)
    return None
