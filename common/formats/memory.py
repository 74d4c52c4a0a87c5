"""Readers of the memory files torch_npu writes with ``profile_memory=True`` (typed rows, MB and µs).

- ``memory_record.csv``: the allocators' totals over time, one row per change, per Component
  (``PTA`` = torch's caching allocator, ``GE`` = the graph engine, ``PTA+GE`` both, ``APP`` =
  the whole process's device memory, reserved only);
- ``operator_memory.csv``: one row per allocation: the op that made it, its size, when it was
  allocated and released, and the allocator's totals at both moments;
- ``npu_module_mem.csv``: device memory reserved per CANN module (``HCCL``, ``RUNTIME`` ...).

msprof's own exports name the same columns in KB; both units are read, MB is returned.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from common.errors import LabError
from common.formats.table import Table, read_table

WRITER = "torch_npu.profiler with profile_memory=True (ASCEND_PROFILER_OUTPUT)"
MEMORY_FILES = ("memory_record.csv", "operator_memory.csv", "npu_module_mem.csv")


@dataclass
class MemoryRecord:
    """One row of memory_record: an allocator's totals at one moment (MB; None = not recorded)."""

    component: str
    ts_us: float
    allocated_mb: float | None
    reserved_mb: float | None
    active_mb: float | None
    device: str | None


@dataclass
class OperatorMemory:
    """One row of operator_memory: one allocation made by an op (release None: still held at the end)."""

    name: str
    size_kb: float
    allocation_us: float | None
    release_us: float | None
    duration_us: float | None
    allocated_mb: float | None  # the allocator's total allocated right after this allocation
    reserved_mb: float | None
    device: str | None


@dataclass
class ModuleMemory:
    """One row of npu_module_mem: device memory one CANN module had reserved at one moment (MB)."""

    component: str
    ts_us: float
    reserved_mb: float | None
    device: str | None


@dataclass
class MemoryData:
    """The memory files of one dataset folder; a list is empty when its file is absent."""

    records: list[MemoryRecord]
    operators: list[OperatorMemory]
    modules: list[ModuleMemory]
    files: list[str]

    def __bool__(self) -> bool:
        return bool(self.records or self.operators or self.modules)


def _mb(t: Table, base: str, required: bool = False) -> list[float | None]:
    """``<base>(MB)``, or ``<base>(KB)`` converted; all None when neither column exists."""
    if t.has(f"{base}(MB)") or not t.has(f"{base}(KB)"):
        if required and not t.has(f"{base}(MB)"):
            t.file.require([f"{base}(MB)"])
        return t.numbers(f"{base}(MB)").to_list()
    return [None if v is None else v / 1024.0 for v in t.numbers(f"{base}(KB)").to_list()]


def _device(t: Table) -> list[str | None]:
    name = "Device Type" if t.has("Device Type") else "Device"
    return t.strings(name).to_list()


def read_memory_record(path: Path | str) -> list[MemoryRecord]:
    t = read_table(path, ["Component", "Timestamp(us)"], WRITER)
    if not (t.has("Total Reserved(MB)") or t.has("Total Reserved(KB)")):
        t.file.require(["Total Reserved(MB)"])
    return [
        MemoryRecord(component or "", ts, allocated, reserved, active, device)
        for component, ts, allocated, reserved, active, device in zip(
            t.strings("Component").to_list(),
            t.numbers("Timestamp(us)", required=True).to_list(),
            _mb(t, "Total Allocated"),
            _mb(t, "Total Reserved"),
            _mb(t, "Total Active"),
            _device(t),
        )
    ]


def read_operator_memory(path: Path | str) -> list[OperatorMemory]:
    t = read_table(path, ["Name", "Size(KB)"], WRITER)
    return [
        OperatorMemory(name or "", size, alloc, release, duration, allocated, reserved, device)
        for name, size, alloc, release, duration, allocated, reserved, device in zip(
            t.strings("Name").to_list(),
            t.numbers("Size(KB)", required=True).to_list(),
            t.numbers("Allocation Time(us)").to_list(),
            t.numbers("Release Time(us)").to_list(),
            t.numbers("Duration(us)", minimum=0).to_list(),
            _mb(t, "Allocation Total Allocated"),
            _mb(t, "Allocation Total Reserved"),
            _device(t),
        )
    ]


def read_module_memory(path: Path | str) -> list[ModuleMemory]:
    t = read_table(path, ["Component", "Timestamp(us)"], WRITER)
    if not (t.has("Total Reserved(MB)") or t.has("Total Reserved(KB)")):
        t.file.require(["Total Reserved(MB)"])
    return [
        ModuleMemory(component or "", ts, reserved, device)
        for component, ts, reserved, device in zip(
            t.strings("Component").to_list(),
            t.numbers("Timestamp(us)", required=True).to_list(),
            _mb(t, "Total Reserved"),
            _device(t),
        )
    ]


def read_memory(folder: Path | str, leave_out: Collection[Path] = ()) -> MemoryData:
    """The memory files in ``folder`` (a torch_npu ``ASCEND_PROFILER_OUTPUT/``), but those in ``leave_out``
    (found damaged); empty when there are none."""
    folder = Path(folder)
    present = [name for name in MEMORY_FILES if (folder / name).is_file() and folder / name not in leave_out]
    try:
        return MemoryData(
            records=read_memory_record(folder / MEMORY_FILES[0]) if MEMORY_FILES[0] in present else [],
            operators=read_operator_memory(folder / MEMORY_FILES[1]) if MEMORY_FILES[1] in present else [],
            modules=read_module_memory(folder / MEMORY_FILES[2]) if MEMORY_FILES[2] in present else [],
            files=present,
        )
    except OSError as err:
        raise LabError(
            f"{folder}: memory files unreadable ({err.strerror})", "check the folder's permissions"
        ) from None


DB_TABLES = ("MEMORY_RECORD", "OP_MEMORY")  # a database export's memory_record / operator_memory


def memory_from_db(records: list, operators: list) -> MemoryData:
    """A database's MEMORY_RECORD / OP_MEMORY rows (common.formats.db) as the text files' MemoryData."""
    return MemoryData(
        records=[
            MemoryRecord(
                r.component, r.timestamp_us, r.total_allocated_mb, r.total_reserved_mb, r.total_active_mb, r.device
            )
            for r in records
        ],
        operators=[
            OperatorMemory(
                o.name,
                o.size_kb,
                o.allocation_us,
                o.release_us,
                o.duration_us,
                o.allocation_total_allocated_mb,
                o.allocation_total_reserved_mb,
                o.device,
            )
            for o in operators
        ],
        modules=[],
        files=[name for name, rows in zip(DB_TABLES, (records, operators)) if rows],
    )
