"""Readers of the SQLite exports: torch_npu ``export_type=db`` and ``msprof --type=db``.

torch_npu writes ``ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler[_{rank}].db`` and, when it
analysed communication, ``analysis.db`` beside it; msprof writes ``msprof_<14-digit ts>.db``.
Both keep one table per kind of record (``TASK``, ``COMPUTE_TASK_INFO``, ``COMMUNICATION_OP``,
``STEP_TIME``, ``MEMORY_RECORD`` ...), every string once in ``STRING_IDS`` referred to by id,
and times as integer ns. The readers return the rows the text readers return
(:mod:`common.formats.records`), in the text files' units, so every analysis reads either export.

The files are opened by :class:`common.formats.sqlite_file.SqliteFile` (read-only, nothing created
beside them, a change while reading refused).
"""

from __future__ import annotations

import bisect
import functools
import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from common.errors import LabError
from common.formats.engine import np, pl
from common.formats.overlap import overlap_step_times
from common.formats.readers import TOTALS_KEYS, merge_totals, op_statistic_from_totals, task_totals_empty
from common.formats.records import OVERLAP_EVENTS, CommOp, MemoryRecord, OpMemory, OpStat, OverlapEvents, StepTime, Task
from common.formats.schema import PMU_COLUMNS
from common.formats.sqlite_file import SqliteFile
from common.formats.table import MISSING, clean, finite_number

DAMAGED = "the database is damaged; export the profile again"  # the fix every damaged-file error names
TORCH_NPU_DB = re.compile(r"^ascend_pytorch_profiler(?:_\d+)?\.db$")
MSPROF_DB = re.compile(r"^msprof_\d{14}\.db$")
ANALYSIS_DB = "analysis.db"  # torch_npu's communication / step-time analysis, beside the profiler db
PARALLEL_QUERIES = 2  # a large TASK table is grouped in this many rowid ranges at once
PARALLEL_MIN_ROWS = 200_000
_KEPT: dict[tuple, object] = {}  # (file identity, what) -> result: one read per file however often it is asked

# The tables each reader needs, with the columns it reads (other columns are optional).
TASK_TABLES = {
    "TASK": ("startNs", "endNs", "globalTaskId"),
    "COMPUTE_TASK_INFO": ("globalTaskId", "name", "opType", "taskType"),
    "STRING_IDS": ("id", "value"),
}
COMM_TABLE = {"COMMUNICATION_OP": ("opName", "startNs", "endNs", "opType")}
STEP_TRACE_COLUMNS = (
    "step",
    "computing",
    "communication_not_overlapped",
    "overlapped",
    "communication",
    "free",
    "stage",
    "bubble",
)
# OVERLAP_ANALYSIS.type is the index of the event in OVERLAP_EVENTS (0 Computing ... 3 Free)
OVERLAP_TABLE = {"OVERLAP_ANALYSIS": ("startNs", "endNs", "type")}
NS_PER_US = 1000.0
CUBE_UTILIZATION = "cube_utilization(%)"
BYTES_PER_MB = 1024.0 * 1024.0
# torch_npu labels communication rows of kernel_details "HCCL"; msprof's op_summary "COMMUNICATION".
COMM_CORE = {"torch_npu_db": "HCCL", "msprof_db": "COMMUNICATION"}
WRITER = {"torch_npu_db": "torch_npu (export_type=db)", "msprof_db": "msprof (--type=db)"}


def _kept(path: Path, what: str, compute):
    """``compute()`` once per file and ``what`` (kept while the file's size, mtime and inode stay)."""
    try:
        st = path.stat()
        key = (str(path.resolve()), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, what)
    except OSError:
        return compute()
    if key not in _KEPT:
        if len(_KEPT) >= 256:
            _KEPT.clear()
        _KEPT[key] = compute()
    return _KEPT[key]


def db_kind(name: str) -> str | None:
    """The dataset kind of a profiler database file name, or None for any other file."""
    if TORCH_NPU_DB.match(name):
        return "torch_npu_db"
    if MSPROF_DB.match(name):
        return "msprof_db"
    return None


def _pmu_name(name: str) -> str | None:
    """The op_summary column of a TASK_PMU_INFO metric, as msprof names it; None when op_summary has none."""
    renamed = {"total_time": "aicore_time", "aic_total_time": "aicore_time", "aiv_total_time": "aiv_time"}.get(
        name, name
    )
    column = f"{renamed}(us)" if "time" in renamed else renamed
    return column if column in PMU_COLUMNS else None


def _text(value: object) -> str | None:
    """A STRING_IDS value as the text readers clean a cell: quotes and blanks stripped, N/A = None."""
    if value is None:
        return None
    text = clean(str(value))
    return None if text in MISSING else text


def _finite(value: object, path: Path, where: str, required: bool = True) -> float | None:
    if value is None or value == "":
        if required:
            raise LabError(f"{path}: {where} is empty", DAMAGED)
        return None
    return finite_number(value, path, where, DAMAGED)


def _step_of(value: object) -> int | None:
    text = _text(value)
    if text is None:
        return None
    match = re.fullmatch(r"(?:step)?(\d+)", text)
    return int(match[1]) if match else None


class ProfilerDb:
    """A torch_npu or msprof profiler database (and torch_npu's analysis.db beside it)."""

    def __init__(self, path: Path | str, kind: str | None = None) -> None:
        self.path = Path(path)
        self.kind = kind or db_kind(self.path.name) or "torch_npu_db"
        self.db = SqliteFile(self.path, WRITER.get(self.kind, "profiler"))

    @property
    def analysis_path(self) -> Path:
        return self.path.parent / ANALYSIS_DB

    @functools.cached_property
    def strings(self) -> dict[int, str]:
        self.db.require({"STRING_IDS": TASK_TABLES["STRING_IDS"]})
        return dict(self.db.query("SELECT id, value FROM STRING_IDS"))

    def _string(self, ident: object) -> str | None:
        return _text(self.strings.get(ident)) if ident is not None else None

    @functools.cached_property
    def step_ranges(self) -> list[tuple[int, int, int]]:
        """(step, startNs, endNs) of STEP_TIME, by start; empty when no schedule ran (or msprof)."""
        if not self.db.has("STEP_TIME", "id", "startNs", "endNs"):
            return []
        rows = self.db.query("SELECT id, startNs, endNs FROM STEP_TIME ORDER BY startNs")
        return [
            (int(step), int(start), int(end))
            for step, start, end in rows
            if step is not None and start is not None and end is not None
        ]

    @functools.cached_property
    def _step_starts(self) -> list[int]:
        return [s for _, s, _ in self.step_ranges]

    def _step_at(self, start_ns: int) -> int | None:
        """The step whose [startNs, endNs] holds ``start_ns``: torch_npu's Step Id of a task."""
        i = bisect.bisect_right(self._step_starts, start_ns) - 1
        if i >= 0 and start_ns <= self.step_ranges[i][2]:
            return self.step_ranges[i][0]
        return None

    def _ns(self, start: object, end: object, where: str) -> tuple[int, int]:
        if not isinstance(start, int) or not isinstance(end, int) or end < start:
            raise LabError(f"{self.path}: {where} has start {start!r} and end {end!r} (ns)", DAMAGED)
        return start, end

    # --- tasks ---------------------------------------------------------------------------------
    def _compute_select(self, columns: str) -> str:
        return f"SELECT {columns} FROM TASK AS t JOIN COMPUTE_TASK_INFO AS c ON c.globalTaskId = t.globalTaskId"

    def _optional(self, table: str, alias: str, *names: str) -> str:
        name = self.db.column(table, *names)
        return f"{alias}.{name}" if name else "NULL"

    @functools.cached_property
    def devices(self) -> list[int]:
        if not self.db.has("TASK", "deviceId"):
            return []
        return [d for (d,) in self.db.query("SELECT DISTINCT deviceId FROM TASK WHERE deviceId IS NOT NULL")]

    def compute_tasks(self) -> list[Task]:
        """Every compute task (TASK x COMPUTE_TASK_INFO), as op_summary / kernel_details rows, by start time."""
        self.db.require(TASK_TABLES)
        opt = functools.partial(self._optional, "COMPUTE_TASK_INFO", "c")
        columns = ", ".join(
            [
                "t.startNs",
                "t.endNs",
                self._optional("TASK", "t", "deviceId"),
                "t.globalTaskId",
                "c.name",
                "c.opType",
                "c.taskType",
                opt("blockDim", "blockNum"),
                opt("waitNs"),
                opt("inputShapes"),
                opt("inputDataTypes"),
                opt("outputShapes"),
                opt("outputDataTypes"),
            ]
        )
        rows = self.db.query(self._compute_select(columns) + " ORDER BY t.startNs, t.globalTaskId")
        pmu = self._pmu()
        # cube_utilization(%) needs the chip's AI Core count, which the database does not hold: N/A
        names = sorted(
            {name for values in pmu.values() for name in values} | ({CUBE_UTILIZATION} if pmu else set()),
            key=PMU_COLUMNS.index,
        )
        tasks = []
        for start, end, device, gid, name, op_type, core, block, wait, ishape, idtype, oshape, odtype in rows:
            start, end = self._ns(start, end, f"TASK globalTaskId {gid}")
            op_name = self._string(name) or ""
            values = pmu.get(gid, {})
            tasks.append(
                Task(
                    op_name=op_name,
                    op_type=self._string(op_type) or op_name,
                    task_type=self._string(core) or "N/A",
                    start_us=start / NS_PER_US,
                    duration_us=(end - start) / NS_PER_US,
                    wait_us=None if wait is None else wait / NS_PER_US,
                    device_id=None if device is None else str(device),
                    block_dim=None if block is None else int(block),
                    input_shapes=self._string(ishape),
                    input_dtypes=self._string(idtype),
                    output_shapes=self._string(oshape),
                    output_dtypes=self._string(odtype),
                    step_id=self._step_at(start),
                    pmu={n: values.get(n) for n in names} if values else {},
                )
            )
        return tasks

    def _pmu(self) -> dict[int, dict[str, float]]:
        """globalTaskId -> PMU values under their op_summary column names (µs for times, as op_summary)."""
        if not self.db.has("TASK_PMU_INFO", "globalTaskId", "name", "value"):
            return {}
        out: dict[int, dict[str, float]] = {}
        columns: dict[object, str | None] = {}
        for gid, name, value in self.db.query("SELECT globalTaskId, name, value FROM TASK_PMU_INFO"):
            if name not in columns:
                columns[name] = _pmu_name(self.strings.get(name, ""))
            column = columns[name]
            if column is None or value is None:
                continue
            number = float(value)
            out.setdefault(gid, {})[column] = number / NS_PER_US if column.endswith("(us)") else number
        return out

    def communication(self) -> list[CommOp]:
        """COMMUNICATION_OP: every collective / point-to-point op, by start time (none when none ran)."""
        return _kept(self.path, "communication", self._communication)

    def _has_receives(self) -> bool:
        """Whether any COMMUNICATION_OP is an ``hcom_receive*`` (asked of the few strings, not the many ops)."""
        if "COMMUNICATION_OP" not in self.db.schema:
            return False
        ids = [i for i, value in self.strings.items() if (_text(value) or "").startswith("hcom_receive")]
        if not ids:
            return False
        marks = ",".join("?" * len(ids))
        return bool(self.db.query(f"SELECT 1 FROM COMMUNICATION_OP WHERE opName IN ({marks}) LIMIT 1", tuple(ids)))

    def _communication_device(self) -> str:
        """SQL for an op's device: the one device of the capture, else the device of its tasks, else NULL."""
        if len(self.devices) == 1:
            return str(int(self.devices[0]))
        if self.db.has("COMMUNICATION_OP", "connectionId") and self.db.has("TASK", "connectionId", "deviceId"):
            return "(SELECT min(t.deviceId) FROM TASK AS t WHERE t.connectionId = op.connectionId)"
        return "NULL"

    def _communication(self) -> list[CommOp]:
        if "COMMUNICATION_OP" not in self.db.schema:
            return []
        self.db.require(COMM_TABLE)
        group, wait = (
            self._optional("COMMUNICATION_OP", "op", "groupName"),
            self._optional("COMMUNICATION_OP", "op", "waitNs"),
        )
        device = self._communication_device()
        rows = self.db.query(
            f"SELECT op.opName, op.opType, {group}, op.startNs, op.endNs, {wait}, {device} "
            "FROM COMMUNICATION_OP AS op ORDER BY op.startNs"
        )
        ops = []
        for name, op_type, grp, start, end, wait_ns, dev in rows:
            start, end = self._ns(start, end, f"COMMUNICATION_OP {self._string(name)!r}")
            ops.append(
                CommOp(
                    op_name=self._string(name) or "",
                    op_type=self._string(op_type) or "",
                    group=self._string(grp),
                    start_us=start / NS_PER_US,
                    duration_us=(end - start) / NS_PER_US,
                    wait_us=None if wait_ns is None else wait_ns / NS_PER_US,
                    step_id=self._step_at(start),
                    device_id=None if dev is None else str(dev),
                )
            )
        return ops

    def tasks(self) -> list[Task]:
        """What kernel_details / op_summary hold: compute tasks and communication ops, by start time."""
        core = COMM_CORE.get(self.kind, "HCCL")
        comm = [
            Task(
                op_name=c.op_name,
                op_type=c.op_type or c.op_name,
                task_type=core,
                start_us=c.start_us,
                duration_us=c.duration_us,
                wait_us=c.wait_us,
                device_id=c.device_id,
                block_dim=0,
                step_id=c.step_id,
            )
            for c in self.communication()
        ]
        return sorted(self.compute_tasks() + comm, key=lambda t: t.start_us)

    def compute_totals(self) -> pl.DataFrame:
        """Per (Device_id, OP Type, Core Type, Input Shapes) of the compute tasks: count, total/min/max µs.

        Grouped by SQLite on the string ids, so a database of millions of tasks never becomes Python rows;
        a large TASK table is grouped in parts on parallel read-only connections (SQLite runs a query
        on one core), the parts merged in polars. Kept per file: asked twice, it is computed once.
        """
        return _kept(self.path, "compute_totals", self._compute_totals)

    def _compute_totals(self) -> pl.DataFrame:
        self.db.require(TASK_TABLES)
        device = self._optional("TASK", "t", "deviceId")
        shapes = self._optional("COMPUTE_TASK_INFO", "c", "inputShapes")
        duration = "(t.endNs - t.startNs)"
        sql = self._compute_select(
            f"{device}, c.opType, c.name, c.taskType, {shapes}, count(*), sum({duration}), min({duration}), "
            f"max({duration})"
        )
        rows = self._parallel_groups(sql, f"GROUP BY {device}, c.opType, c.name, c.taskType, {shapes}")
        return self._totals(
            (
                dev,
                self._string(op_type) or self._string(name) or "",
                self._string(core) or "N/A",
                self._string(shape),
                count,
                total,
                low,
                high,
            )
            for dev, op_type, name, core, shape, count, total, low, high in rows
        )

    def _totals(self, rows) -> pl.DataFrame:
        records = []
        for dev, op_type, core, shape, count, total, low, high in rows:
            if low is None or low < 0:
                raise LabError(f"{self.path}: a {op_type} task ends before it starts", DAMAGED)
            records.append(
                (
                    None if dev is None else str(dev),
                    op_type,
                    core,
                    shape,
                    count,
                    total / NS_PER_US,
                    low / NS_PER_US,
                    high / NS_PER_US,
                )
            )
        if not records:
            return task_totals_empty()
        schema = {
            **dict.fromkeys(TOTALS_KEYS, pl.String),
            "count": pl.UInt32,
            "total_us": pl.Float64,
            "min_us": pl.Float64,
            "max_us": pl.Float64,
        }
        return merge_totals(pl.DataFrame(records, schema=schema, orient="row"))

    def _parallel_groups(self, select: str, group_by: str) -> list[tuple]:
        """``select`` + ``group_by`` over TASK, in rowid ranges on parallel connections when it is large."""
        ((low, high),) = self.db.query("SELECT min(rowid), max(rowid) FROM TASK")
        parts = min(PARALLEL_QUERIES, os.cpu_count() or 1)
        if low is None or high - low < PARALLEL_MIN_ROWS or parts < 2:
            return self.db.query(f"{select} {group_by}")
        step = (high - low) // parts + 1
        ranges = [(low + i * step, min(high, low + (i + 1) * step - 1)) for i in range(parts)]
        with ThreadPoolExecutor(parts) as pool:  # sqlite3 lets go of the GIL while a query runs
            results = pool.map(lambda r: self.db.query(f"{select} WHERE t.rowid BETWEEN ? AND ? {group_by}", r), ranges)
            return [row for rows in results for row in rows]

    def _communication_totals(self) -> list[tuple] | None:
        """Per (device, OP Type or name) of COMMUNICATION_OP: count and total/min/max ns, grouped by SQLite.

        None when an op's start or end is not a whole number or it ends before it starts: the per-op
        reader then names it.
        """
        bad = self.db.query(
            "SELECT count(*) FROM COMMUNICATION_OP WHERE typeof(startNs) != 'integer' "
            "OR typeof(endNs) != 'integer' OR endNs < startNs"
        )[0][0]
        if bad:
            return None
        device, duration = self._communication_device(), "(op.endNs - op.startNs)"
        rows = self.db.query(
            f"SELECT {device}, op.opType, op.opName, count(*), sum({duration}), min({duration}), "
            f"max({duration}) FROM COMMUNICATION_OP AS op GROUP BY 1, op.opType, op.opName"
        )
        per: dict[tuple, tuple] = {}
        for dev, op_type, name, count, total, low, high in rows:
            key = (None if dev is None else str(dev), self._string(op_type) or self._string(name) or "")
            c0, t0, l0, h0 = per.get(key, (0, 0, low, high))
            per[key] = (c0 + count, t0 + total, min(l0, low), max(h0, high))
        return [(*key, *values) for key, values in per.items()]

    def task_totals(self) -> pl.DataFrame:
        """:meth:`compute_totals` plus the communication ops: the totals of kernel_details / op_summary."""
        core = COMM_CORE.get(self.kind, "HCCL")
        grouped = self._communication_totals() if "COMMUNICATION_OP" in self.db.schema else []
        if grouped is not None:
            comm = self._totals((dev, name, core, None, *values) for dev, name, *values in grouped)
            return merge_totals(pl.concat([self.compute_totals(), comm]))
        per: dict[tuple, list] = {}
        for c in self.communication():
            key = (c.device_id, c.op_type or c.op_name, core, None)
            ns = round(c.duration_us * NS_PER_US)
            count, total, low, high = per.get(key, (0, 0, ns, ns))
            per[key] = (count + 1, total + ns, min(low, ns), max(high, ns))
        comm = self._totals((*key, *values) for key, values in per.items())
        return merge_totals(pl.concat([self.compute_totals(), comm]))

    def op_statistic(self) -> list[OpStat]:
        """op_statistic as msprof builds it: compute tasks only, by (OP Type, Core Type), largest first."""
        return op_statistic_from_totals(self.compute_totals())

    # --- steps ---------------------------------------------------------------------------------
    @functools.cached_property
    def _device(self) -> str | None:
        return str(self.devices[0]) if len(self.devices) == 1 else None

    def analysis_steps(self) -> list[StepTime] | None:
        """analysis.db's StepTraceTime (torch_npu's step_trace_time.csv, same columns); None without it."""
        if not self.analysis_path.is_file():
            return None
        analysis = SqliteFile(self.analysis_path, WRITER["torch_npu_db"])
        if not analysis.has("StepTraceTime", *STEP_TRACE_COLUMNS):
            return None
        preparing = analysis.column("StepTraceTime", "preparing") or "NULL"
        device = analysis.column("StepTraceTime", "deviceId", "device_id") or "NULL"
        rows = analysis.query(f"SELECT {', '.join(STEP_TRACE_COLUMNS)}, {preparing}, {device} FROM StepTraceTime")
        out = []
        for i, (step, *values, prep, dev) in enumerate(rows):
            where = f"StepTraceTime row {i + 1}"
            numbers = [_finite(v, analysis.path, f"{where} {name}") for v, name in zip(values, STEP_TRACE_COLUMNS[1:])]
            out.append(
                StepTime(
                    _step_of(step),
                    *numbers,
                    preparing_us=_finite(prep, analysis.path, where, False),
                    device_id=str(dev) if dev is not None else self._device,
                )
            )
        return sorted(out, key=lambda s: (s.device_id or "", -1 if s.step is None else s.step))

    def overlap(self) -> OverlapEvents | None:
        """OVERLAP_ANALYSIS as the timeline's Overlap Analysis events (steps from STEP_TIME); None without it."""
        if not self.db.has("OVERLAP_ANALYSIS", *OVERLAP_TABLE["OVERLAP_ANALYSIS"]):
            return None
        return _kept(self.path, "overlap", self._overlap)

    def _overlap(self) -> OverlapEvents:
        where = "FROM OVERLAP_ANALYSIS WHERE type BETWEEN 0 AND ?"
        kinds_max = (len(OVERLAP_EVENTS) - 1,)
        bad = self.db.query(
            f"SELECT count(*) {where} AND (typeof(startNs) != 'integer' OR typeof(endNs) != 'integer' "
            "OR endNs < startNs)",
            kinds_max,
        )[0][0]
        rows = self.db.query(f"SELECT type, startNs, endNs {where} ORDER BY startNs", kinds_max)
        if bad:
            for _, start, end in rows:
                self._ns(start, end, "an OVERLAP_ANALYSIS event")
        table = np.array(rows, dtype=np.int64).reshape(-1, 3)
        kinds, starts, ends = table[:, 0].astype(np.int8), table[:, 1], table[:, 2]
        # Times relative to the first step or event, so that µs differences keep every ns digit
        # (an absolute 1.7e15 µs float keeps only ~0.25 µs).
        firsts = [start for _, start, _ in self.step_ranges] + ([int(starts.min())] if len(starts) else [])
        base = min(firsts, default=0)
        receive = (
            [c for c in self.communication() if c.op_name.startswith("hcom_receive")] if self._has_receives() else []
        )
        return OverlapEvents(
            kind=kinds,
            ts_us=(starts - base) / NS_PER_US,
            dur_us=(ends - starts) / NS_PER_US,
            steps=[(step, (start - base) / NS_PER_US) for step, start, _ in self.step_ranges],
            bubble_ts_us=np.array([c.start_us - base / NS_PER_US for c in receive]),
            bubble_dur_us=np.array([c.duration_us for c in receive]),
            labels=[f"NPU {self._device}"] if self._device is not None else [],
        )

    @functools.cached_property
    def steps_and_source(self) -> tuple[list[StepTime], str]:
        analysed = self.analysis_steps()
        if analysed:
            return analysed, f"{ANALYSIS_DB} StepTraceTime"
        overlap = self.overlap()
        rows = overlap_step_times(overlap) if overlap is not None else []
        if not rows:
            return [], f"{self.path.name}: no step table (no {ANALYSIS_DB} StepTraceTime, no OVERLAP_ANALYSIS events)"
        per = "per STEP_TIME step" if self.step_ranges else "whole trace (no STEP_TIME)"
        return rows, f"{self.path.name} OVERLAP_ANALYSIS events, {per} (no {ANALYSIS_DB} StepTraceTime)"

    def steps(self) -> list[StepTime]:
        """step_trace_time rows: analysis.db's StepTraceTime, else rebuilt from OVERLAP_ANALYSIS as from a timeline."""
        return self.steps_and_source[0]

    # --- memory --------------------------------------------------------------------------------
    def memory_records(self) -> list[MemoryRecord]:
        """MEMORY_RECORD as memory_record.csv rows (MB); empty when memory was not profiled."""
        table = "MEMORY_RECORD"
        if table not in self.db.schema:
            return []
        self.db.require({table: ("component", "timestamp", "totalAllocated", "totalReserved")})
        opt = functools.partial(self._optional, table, "m")
        rows = self.db.query(
            f"SELECT component, timestamp, totalAllocated, totalReserved, {opt('totalActive')}, "
            f"{opt('streamPtr')}, {opt('deviceId')} FROM {table} AS m ORDER BY timestamp"
        )
        return [
            MemoryRecord(
                component=self._string(component) or "",
                timestamp_us=_finite(ts, self.path, f"{table} timestamp") / NS_PER_US,
                total_allocated_mb=_mb(allocated),
                total_reserved_mb=_mb(reserved),
                total_active_mb=_mb(active),
                stream_ptr=None if stream is None else str(stream),
                device=None if dev is None else f"NPU:{dev}",
            )
            for component, ts, allocated, reserved, active, stream, dev in rows
        ]

    def op_memory(self) -> list[OpMemory]:
        """OP_MEMORY as operator_memory.csv rows (KB, µs, MB); empty when memory was not profiled."""
        table = "OP_MEMORY"
        if table not in self.db.schema:
            return []
        self.db.require({table: ("name", "size", "allocationTime")})
        opt = functools.partial(self._optional, table, "o")
        columns = [
            "releaseTime",
            "duration",
            "allocationTotalAllocated",
            "allocationTotalReserved",
            "releaseTotalAllocated",
            "releaseTotalReserved",
            "streamPtr",
            "deviceId",
        ]
        rows = self.db.query(
            f"SELECT name, size, allocationTime, {', '.join(opt(c) for c in columns)} "
            f"FROM {table} AS o ORDER BY allocationTime"
        )
        return [
            OpMemory(
                name=self._string(name) or "",
                size_kb=_finite(size, self.path, f"{table} size") / 1024.0,
                allocation_us=_finite(alloc, self.path, f"{table} allocationTime") / NS_PER_US,
                release_us=_us(release),
                duration_us=_us(duration),
                allocation_total_allocated_mb=_mb(a_alloc),
                allocation_total_reserved_mb=_mb(a_res),
                release_total_allocated_mb=_mb(r_alloc),
                release_total_reserved_mb=_mb(r_res),
                stream_ptr=None if stream is None else str(stream),
                device=None if dev is None else f"NPU:{dev}",
            )
            for name, size, alloc, release, duration, a_alloc, a_res, r_alloc, r_res, stream, dev in rows
        ]


def _mb(value: object) -> float | None:
    return None if value is None or value == "" else float(value) / BYTES_PER_MB


def _us(value: object) -> float | None:
    return None if value is None or value == "" else float(value) / NS_PER_US
