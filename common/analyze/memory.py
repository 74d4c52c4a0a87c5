"""Memory: peak allocated / reserved per allocator and the ops that allocate most (pure functions).

Allocated is what live tensors hold; reserved is what the caching allocator holds from the
device (allocated plus its cache). The peak reserved is what a run needs from the device; a
large gap between the two is cache the allocator keeps (fragmentation, or a shrinking shape).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from common.formats.memory import DB_TABLES, MemoryData, MemoryRecord

# The allocator whose totals headline the report: torch's and the graph engine's together when
# torch_npu records both, torch's caching allocator alone otherwise (the portable backend's CPU
# allocator is recorded under the same name).
HEADLINE_COMPONENTS = ("PTA+GE", "PTA")
PROCESS_COMPONENT = "APP"  # the whole process's device memory (reserved only)
TOP_OPERATORS = 10
TOP_MODULES = 5


@dataclass(frozen=True)
class ComponentPeak:
    component: str
    samples: int
    peak_allocated_mb: float | None
    peak_reserved_mb: float | None
    peak_active_mb: float | None


@dataclass(frozen=True)
class OperatorTotal:
    """One op name's allocations over the capture."""

    name: str
    count: int
    total_mb: float
    largest_mb: float
    mean_held_us: float | None  # mean Duration of its released allocations


@dataclass(frozen=True)
class MemorySummary:
    peaks: list[ComponentPeak]
    headline: ComponentPeak | None
    process: ComponentPeak | None
    operators: list[OperatorTotal]
    operator_rows: int
    modules: list[tuple[str, float]]  # (CANN module, peak reserved MB), largest first
    record_source: str = "memory_record.csv"  # where the figures come from, for the report's words
    operator_source: str = "operator_memory.csv"


def _max(values) -> float | None:
    kept = [v for v in values if v is not None]
    return max(kept) if kept else None


def component_peaks(records: list[MemoryRecord]) -> list[ComponentPeak]:
    by: dict[str, list[MemoryRecord]] = {}
    for r in records:
        by.setdefault(r.component, []).append(r)
    return [
        ComponentPeak(
            name,
            len(rows),
            _max(r.allocated_mb for r in rows),
            _max(r.reserved_mb for r in rows),
            _max(r.active_mb for r in rows),
        )
        for name, rows in by.items()
    ]


def summarize_memory(data: MemoryData, top: int = TOP_OPERATORS) -> MemorySummary | None:
    if not data:
        return None
    peaks = component_peaks(data.records)
    named = {p.component: p for p in peaks}
    headline = next((named[c] for c in HEADLINE_COMPONENTS if c in named), None)
    if headline is None:
        headline = next((p for p in peaks if p.peak_allocated_mb is not None), None)
    groups: dict[str, list] = {}
    for op in data.operators:
        if op.size_kb > 0:  # a release written as a negative size is not an allocation
            groups.setdefault(op.name, []).append(op)
    operators = []
    for name, ops in groups.items():
        held = [o.duration_us for o in ops if o.duration_us is not None]
        operators.append(
            OperatorTotal(
                name,
                len(ops),
                sum(o.size_kb for o in ops) / 1024.0,
                max(o.size_kb for o in ops) / 1024.0,
                statistics.fmean(held) if held else None,
            )
        )
    operators.sort(key=lambda o: (-o.total_mb, o.name))
    modules: dict[str, float] = {}
    for m in data.modules:
        if m.reserved_mb:
            modules[m.component] = max(modules.get(m.component, 0.0), m.reserved_mb)
    return MemorySummary(
        peaks=peaks,
        headline=headline,
        process=named.get(PROCESS_COMPONENT),
        operators=operators[:top],
        operator_rows=len(data.operators),
        modules=sorted(modules.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_MODULES],
        **(
            {"record_source": DB_TABLES[0], "operator_source": DB_TABLES[1]} if set(data.files) & set(DB_TABLES) else {}
        ),
    )


def _mb(value: float | None) -> str:
    if value is None:
        return "N/A"
    return f"{value:,.1f} MB" if value >= 10 else f"{value:.3g} MB"


def memory_lines(summary: MemorySummary) -> list[str]:
    """The headline figures in words."""
    lines = []
    if summary.headline:
        h = summary.headline
        lines.append(
            f"peak allocated {_mb(h.peak_allocated_mb)}, peak reserved {_mb(h.peak_reserved_mb)} "
            f"({h.component}, {h.samples} samples in {summary.record_source})"
        )
    if summary.process and summary.process is not summary.headline:
        lines.append(f"whole process ({PROCESS_COMPONENT}): peak reserved {_mb(summary.process.peak_reserved_mb)}")
    if summary.modules:
        lines.append(
            "largest CANN modules (npu_module_mem.csv, peak reserved): "
            + ", ".join(f"{name} {mb:,.1f} MB" for name, mb in summary.modules)
        )
    return lines


def operator_lines(summary: MemorySummary) -> list[str]:
    """What the table of the top ops by memory is made of (none without it)."""
    if not summary.operators:
        return []
    return [
        f"top ops by memory allocated ({summary.operator_rows} allocations in {summary.operator_source}); "
        "held = mean time from allocation to release"
    ]
