"""What the integrity checks compare of one export, read from its files: records, handed to
:func:`common.analyze.checks.integrity_verdicts`, which never opens a file.

A profiler derives op_statistic from the task file, step_trace_time from the timeline's Overlap Analysis, and
its text export from the same data as its database; :class:`ExportFacts` holds each side of those comparisons.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from common.formats.datasets import Dataset, StepTables
from common.formats.engine import pl
from common.formats.records import OpStat, StepTime


@dataclass
class ExportSide:
    """One export's view of a capture, for cross-checking a text export against its database."""

    source: str  # the file the numbers come from: kernel_details / op_summary, or the .db
    per_type: dict[str, tuple[int, float]]  # OP Type -> (task count, total µs), communication included
    steps: list[StepTime]
    steps_source: str
    step_tasks: dict[int | None, int]  # tasks per Step Id (None: no step), bounding each step's timeline events


def export_side(ds: Dataset) -> ExportSide:
    per = ds.task_totals.group_by("op_type").agg(pl.col("count").sum(), pl.col("total_us").sum())
    per_type = {op: (int(count), float(total)) for op, count, total in per.iter_rows()}
    # per step from the task records of a small profile; otherwise every task bounds any one step
    step_tasks = (
        dict(Counter(t.step_id for t in ds.tasks)) if ds.small else {None: sum(count for count, _ in per_type.values())}
    )
    return ExportSide(
        source=ds.db.name if ds.db is not None else ds.task_file,
        per_type=per_type,
        steps=ds.steps,
        steps_source=ds.steps_source,
        step_tasks=step_tasks,
    )


def export_sides(ds: Dataset) -> tuple[ExportSide, ExportSide] | None:
    """(text, database) of a capture exported both ways, both complete; None when there is one side.

    Exports of one capture must agree: the same tasks per OP Type (count and total time) and the
    same step rows; a difference means one export is damaged or not from the same capture.
    """
    other = ds.counterpart()
    if other is None:
        return None
    text, db = (other, ds) if ds.is_db else (ds, other)
    return export_side(text), export_side(db)


@dataclass(frozen=True)
class ExportFacts:
    """One export's sides of the integrity checks, read. ``stat_file`` None: no op_statistic check applies (a
    database, whose op_statistic is built from its tasks, or a text export without op_statistic or a task file)."""

    where: str  # the export's folder, relative to what was given
    task_kind: str  # op_summary (msprof), kernel_details (torch_npu) or the .db file's name
    stat_file: str | None  # op_statistic's file as the checks name it (its first slice, and how many more)
    task_file: str
    op_statistic: list[OpStat]
    task_totals: pl.DataFrame | None  # per device, OP Type and Task Type: count and total µs of the task file
    step_tables: StepTables | None
    sides: tuple[ExportSide, ExportSide] | None  # (text, database) of a capture exported both ways


def _first_name(ds: Dataset, name: str) -> str:
    files = ds.files(name)
    return files[0].name + (f" (+{len(files) - 1} slices)" if len(files) > 1 else "") if files else name


def export_facts(ds: Dataset, root: Path) -> ExportFacts:
    """Read what the integrity checks of ``ds`` compare (its op_statistic and task totals only when they apply)."""
    compared = not ds.is_db and ds.has("op_statistic") and ds.has(ds.task_file)
    return ExportFacts(
        where=ds.label(root),
        task_kind=ds.task_file,
        stat_file=_first_name(ds, "op_statistic") if compared else None,
        task_file=_first_name(ds, ds.task_file),
        op_statistic=ds.op_statistic if compared else [],
        task_totals=ds.task_totals if compared else None,
        step_tables=ds.step_tables,
        sides=export_sides(ds),
    )


def integrity_facts(datasets: list[Dataset], root: Path) -> list[ExportFacts]:
    """:func:`export_facts` of each dataset under ``root``."""
    return [export_facts(ds, Path(root)) for ds in datasets]
