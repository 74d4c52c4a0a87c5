"""What a folder's report shows of each export, read once into records: render/directory.py lays them out and
reads nothing itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from common.formats.advice_input import RankInput, rank_input
from common.formats.datasets import TASK_RECORDS_MAX, Dataset, forward_windows
from common.formats.memory import MemoryData
from common.formats.records import OpStat, StepTime, Task


@dataclass(frozen=True)
class ExportRecord:
    """One export (an msprof PROF_* output, a torch_npu rank, a database) as its report needs it.

    ``tasks`` are held only for an export of at most :data:`TASK_RECORDS_MAX` tasks (``small``); beyond that the
    per-task sections say they were skipped. ``source``: which files were read, when that needs saying (a
    database, an export chosen over another); ``advice``: what the advisor rules read, for a small export."""

    label: str
    kind: str
    op_statistic: list[OpStat]
    task_count: int
    small: bool
    type_counts: dict[str, int] = field(default_factory=dict)
    tasks: list[Task] = field(default_factory=list)
    steps: list[StepTime] = field(default_factory=list)
    steps_source: str = ""
    memory: MemoryData | None = None
    forward_windows: list[tuple[float, float]] = field(default_factory=list)
    source: str | None = None
    advice: RankInput | None = None


def export_record(ds: Dataset, root: Path) -> ExportRecord:
    """Read what the report of ``root`` shows of ``ds``: each file once, the per-task ones only for a small export."""
    small = ds.small
    stats = ds.op_statistic
    count = ds.task_count
    steps = ds.steps
    return ExportRecord(
        label=ds.label(root),
        kind=ds.kind,
        op_statistic=stats,
        task_count=count,
        small=small,
        type_counts=ds.type_counts if stats and count > 0 else {},
        tasks=ds.tasks if small else [],
        steps=steps,
        steps_source=ds.steps_source if steps else "",
        memory=ds.memory,
        forward_windows=forward_windows([ds]) if small and stats else [],
        source=ds.source if ds.is_db or ds.skipped or ds.superseded else None,
        advice=rank_input(ds) if small else None,
    )


__all__ = ["TASK_RECORDS_MAX", "ExportRecord", "export_record"]
