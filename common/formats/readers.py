"""Readers for every msprof / torch_npu file the lab uses. Each returns typed rows.

The CSV files are read here (through :mod:`common.formats.table`); timelines are decoded by
:mod:`common.formats.chrome_trace` and, for the step table, scanned by :mod:`common.formats.trace_scan`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from pathlib import Path

from common.errors import LabError
from common.formats.chrome_trace import event_args, iter_trace, overlap_events, trace_number
from common.formats.engine import pl
from common.formats.records import ApiStat, OpStat, OverlapEvents, StepTime, Task, TaskTimeRow, TraceEvent, TxRange
from common.formats.schema import PMU_COLUMNS
from common.formats.table import CsvFile, Table, checked_numbers, cleaned, read_table
from common.formats.trace_scan import Unsure, scan_blocks

MSPROF = "msprof (mindstudio_profiler_output)"
TORCH_NPU = "torch_npu.profiler (ASCEND_PROFILER_OUTPUT)"


def _ints(values: list[float | None]) -> list[int | None]:
    return [None if v is None else int(v) for v in values]


def _tasks(table: Table, names: dict[str, str]) -> list[Task]:
    pmu_columns = [c for c in PMU_COLUMNS if table.has(c)]
    op_name = table.strings(names["name"]).to_list()
    op_type = table.strings(names["type"]).to_list()
    columns = {
        "op_name": [n or "" for n in op_name],
        "op_type": [t or n or "" for t, n in zip(op_type, op_name)],
        "task_type": [c or "N/A" for c in table.strings(names["core"]).to_list()],
        "start_us": table.numbers(names["start"], required=True).to_list(),
        "duration_us": table.numbers(names["duration"], required=True, minimum=0).to_list(),
        "wait_us": table.numbers(names["wait"], minimum=0).to_list(),
        "device_id": table.strings("Device_id").to_list(),
        "block_dim": _ints(table.numbers("Block Dim", integer=True, minimum=0).to_list()),
        "op_state": table.strings("OP State").to_list(),
        "input_shapes": table.strings("Input Shapes").to_list(),
        "input_dtypes": table.strings("Input Data Types").to_list(),
        "output_shapes": table.strings("Output Shapes").to_list(),
        "output_dtypes": table.strings("Output Data Types").to_list(),
        "step_id": _ints(table.numbers("Step Id", integer=True).to_list()),
    }
    pmu = {c: table.numbers(c).to_list() for c in pmu_columns}
    fields = list(columns)
    return [
        Task(**dict(zip(fields, values)), pmu={c: pmu[c][r] for c in pmu_columns})
        for r, values in enumerate(zip(*columns.values()))
    ]


_OP_SUMMARY_NAMES = {
    "name": "Op Name",
    "type": "OP Type",
    "core": "Task Type",
    "start": "Task Start Time(us)",
    "duration": "Task Duration(us)",
    "wait": "Task Wait Time(us)",
}
_KERNEL_NAMES = {
    "name": "Name",
    "type": "Type",
    "core": "Accelerator Core",
    "start": "Start Time(us)",
    "duration": "Duration(us)",
    "wait": "Wait Time(us)",
}


def read_op_summary(path: Path | str) -> list[Task]:
    """op_summary_*.csv: one row per task, PMU columns when collected."""
    required = ["Op Name", "Task Type", "Task Start Time(us)", "Task Duration(us)"]
    return _tasks(read_table(path, required, MSPROF), _OP_SUMMARY_NAMES)


def read_kernel_details(path: Path | str) -> list[Task]:
    """kernel_details.csv: op_summary renamed by torch_npu, with ``Step Id`` when a schedule ran."""
    required = ["Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)"]
    return _tasks(read_table(path, required, TORCH_NPU), _KERNEL_NAMES)


TOTALS_KEYS = ["device_id", "op_type", "task_type", "input_shapes"]


FAST_BLOCK_BYTES = 16 << 20  # the fast aggregation parses this much at a time, on every core (below
# glibc's largest mmap threshold, 32 MiB: a block's buffer is reused, not mapped and faulted in afresh)
FAST_BLOCKS_AT_ONCE = 2  # blocks parsed at the same time: the memory bound is this many blocks
_TOTALS_CACHE: dict[tuple, pl.DataFrame] = {}  # (file identity, kind) -> totals: a report reads a file once
_TOTALS_CACHE_MAX = 256


def task_totals(path: Path | str, kind: str) -> pl.DataFrame:
    """Per (Device_id, OP Type, Core Type, Input Shapes) of op_summary / kernel_details: count, total, min, max µs.

    Computed in polars on raw cells, a large block at a time on every core (:func:`_fast_totals`);
    a file with any row the fast pass cannot vouch for (a short or long row, a duration that is not a
    plain number >= 0, a missing OP Type, text polars refuses) is read again by the exact block reader,
    which names the file, the line and the column of the problem. The result is kept per file
    (path, size, mtime, inode), so a report that looks at a dataset twice parses it once.
    """
    names, required, writer = (
        (_OP_SUMMARY_NAMES, ["Op Name", "Task Type", "Task Start Time(us)", "Task Duration(us)"], MSPROF)
        if kind == "op_summary"
        else (_KERNEL_NAMES, ["Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)"], TORCH_NPU)
    )
    file = CsvFile(path, writer)
    key = _identity(file.path, kind)
    if key is not None and key in _TOTALS_CACHE:
        return _TOTALS_CACHE[key]
    file.require(required)
    totals = _fast_totals(file, names)
    if totals is None:
        totals = exact_task_totals(file, names)
    if key is not None:
        if len(_TOTALS_CACHE) >= _TOTALS_CACHE_MAX:
            _TOTALS_CACHE.clear()
        _TOTALS_CACHE[key] = totals
    return totals


def _identity(path: Path, kind: str) -> tuple | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (str(path.resolve()), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, kind)


def _fast_totals(file: CsvFile, names: dict[str, str]) -> pl.DataFrame | None:
    """The totals in multi-threaded polars passes over large blocks; None when a row needs the exact reader.

    Rows are grouped on raw text (only the few group keys are cleaned, afterwards). The pass vouches
    for every row: the last field is never empty (a short row or a blank line would be), a longer
    row fills the field past the header, every duration casts to a finite number >= 0 and every OP
    Type is present (the exact reader falls back to Op Name). Anything else returns None. Two
    blocks are parsed at once (polars releases the GIL), which keeps both cores busy between the
    parallel parts of each parse; at most two blocks are held.
    """
    from concurrent.futures import ThreadPoolExecutor

    width = len(file.header)
    schema = {f"f{i}": pl.String for i in range(width + 1)}  # one field past the header finds long rows
    key_columns = ("Device_id", names["type"], names["core"], "Input Shapes")
    index = {c: file.index(c) for c in (*key_columns, names["duration"])}
    wanted = sorted({i for i in (*index.values(), width - 1, width) if i is not None})
    keys = [pl.col(f"f{index[c]}") if index[c] is not None else pl.lit(None, pl.String) for c in key_columns]
    duration = pl.col(f"f{index[names['duration']]}").cast(pl.Float64, strict=False)
    last, past = pl.col(f"f{width - 1}"), pl.col(f"f{width}")
    short = last.is_null() | (last == "") | (past.is_not_null() & (past != ""))

    def block_totals(chunk: bytes) -> pl.DataFrame | None:
        try:
            frame = pl.read_csv(
                chunk,
                has_header=False,
                schema=schema,
                columns=wanted,
                empty_string_is_null=False,
                quote_char='"',
                raise_if_empty=False,
                missing_columns="insert",
            )
        except pl.exceptions.PolarsError:
            return None
        return (
            frame.lazy()
            .select(*[k.alias(f"k{i}") for i, k in enumerate(keys)], duration=duration, short=short)
            .group_by("k0", "k1", "k2", "k3")
            .agg(
                count=pl.len(),
                numbers=pl.col("duration").count(),
                total_us=pl.col("duration").sum(),
                min_us=pl.col("duration").min(),
                max_us=pl.col("duration").max(),
                short=pl.col("short").any(),
            )
            .collect()
        )

    parts: list[pl.DataFrame | None] = []
    with ThreadPoolExecutor(FAST_BLOCKS_AT_ONCE) as pool:
        pending = deque()
        for _, chunk in file.large_chunks(FAST_BLOCK_BYTES):
            pending.append(pool.submit(block_totals, chunk))
            del chunk
            if len(pending) >= FAST_BLOCKS_AT_ONCE:
                parts.append(pending.popleft().result())
                if parts[-1] is None:
                    break
        parts += [p.result() for p in pending]
    if any(p is None for p in parts):
        return None
    if not parts:
        return task_totals_empty()
    merged = pl.concat(parts)
    vouched = merged.select(
        ok=(pl.col("count") == pl.col("numbers")).all()
        & ~pl.col("short").any()
        & pl.col("total_us").is_finite().all()
        & (pl.col("min_us") >= 0).all()
        & (pl.col("max_us").is_finite()).all()
    ).item()
    if not vouched:
        return None
    totals = merged.with_columns(
        device_id=cleaned(pl.col("k0")),
        op_type=cleaned(pl.col("k1")),
        task_type=pl.coalesce(cleaned(pl.col("k2")), pl.lit("N/A")),
        input_shapes=cleaned(pl.col("k3")),
    )
    if totals["op_type"].null_count():  # the exact reader names such rows by their Op Name
        return None
    return merge_totals(totals)


def exact_task_totals(file: CsvFile, names: dict[str, str]) -> pl.DataFrame:
    """:func:`task_totals` by the exact block reader: every problem stops with its file, line and column."""
    columns = [names["name"], names["type"], names["core"], names["duration"], "Device_id", "Input Shapes"]
    present = {c: file.header[i] for c in columns if (i := file.index(c)) is not None}
    parts = []
    for block in file.blocks(columns, clean=False):
        duration = checked_numbers(file, block, names["duration"], required=True, minimum=0)
        keys = [
            pl.col(present[c]) if c in present else pl.lit(None, pl.String)
            for c in ("Device_id", names["type"], names["name"], names["core"], "Input Shapes")
        ]
        parts.append(
            block.select(*[k.alias(f"k{i}") for i, k in enumerate(keys)], duration=duration)
            .group_by("k0", "k1", "k2", "k3", "k4")
            .agg(
                count=pl.len(),
                total_us=pl.col("duration").sum(),
                min_us=pl.col("duration").min(),
                max_us=pl.col("duration").max(),
            )
        )
    if not parts:
        return task_totals_empty()
    keys = [cleaned(pl.col(f"k{i}")) for i in range(5)]
    return merge_totals(
        pl.concat(parts).with_columns(
            device_id=keys[0],
            op_type=pl.coalesce(keys[1], keys[2], pl.lit("")),
            task_type=pl.coalesce(keys[3], pl.lit("N/A")),
            input_shapes=keys[4],
        )
    )


def cpu_only(task_types: Iterable[str | None]) -> bool:
    """Whether tasks were recorded and every one ran on the CPU (the portable backend's data).

    A capture without tasks (a trace or step table alone, from elsewhere) is not CPU data: the
    report has no per-op bounds to compute for it, so nothing needs this machine's calibration.
    """
    seen = False
    for core in task_types:
        if core != "CPU":
            return False
        seen = True
    return seen


def task_totals_empty() -> pl.DataFrame:
    schema = {"count": pl.UInt32, "total_us": pl.Float64, "min_us": pl.Float64, "max_us": pl.Float64}
    return pl.DataFrame(schema={**dict.fromkeys(TOTALS_KEYS, pl.String), **schema})


def merge_totals(parts: pl.DataFrame) -> pl.DataFrame:
    """Partial totals (blocks, slices) of the same groups combined into one row per group."""
    return parts.group_by(TOTALS_KEYS).agg(
        pl.col("count").sum(), pl.col("total_us").sum(), pl.col("min_us").min(), pl.col("max_us").max()
    )


def op_statistic_from_totals(totals: pl.DataFrame) -> list[OpStat]:
    """op_statistic rows as msprof builds them: by (OP Type, Core Type), ratio of all time, largest first."""
    totals = merge_totals(totals.with_columns(input_shapes=pl.lit(None, pl.String)))
    grand = totals["total_us"].sum() or 1.0
    rows = totals.sort(["total_us", "op_type", "task_type"], descending=[True, False, False], nulls_last=True)
    return [
        OpStat(
            op_type=r["op_type"],
            core_type=r["task_type"],
            count=int(r["count"]),
            total_us=r["total_us"],
            min_us=r["min_us"],
            avg_us=r["total_us"] / r["count"],
            max_us=r["max_us"],
            ratio_pct=100.0 * r["total_us"] / grand,
            device_id=r["device_id"],
        )
        for r in rows.iter_rows(named=True)
    ]


def read_op_statistic(path: Path | str) -> list[OpStat]:
    """op_statistic(_*).csv: per OP Type and Core Type totals."""
    columns = [
        "OP Type",
        "Core Type",
        "Count",
        "Total Time(us)",
        "Min Time(us)",
        "Avg Time(us)",
        "Max Time(us)",
        "Ratio(%)",
    ]
    t = read_table(path, columns, f"{MSPROF} or {TORCH_NPU}", ["Device_id"])
    times = {c: t.numbers(c, required=True, minimum=0).to_list() for c in columns[3:]}
    return [
        OpStat(op_type or "", core or "N/A", int(count), *(times[c][r] for c in columns[3:]), device_id=device)
        for r, (op_type, core, count, device) in enumerate(
            zip(
                t.strings("OP Type"),
                t.strings("Core Type"),
                t.numbers("Count", required=True, integer=True, minimum=0),
                t.strings("Device_id"),
            )
        )
    ]


def read_api_statistic(path: Path | str) -> list[ApiStat]:
    """api_statistic(_*).csv: host API call totals."""
    columns = ["Level", "API Name", "Time(us)", "Count", "Avg(us)", "Min(us)", "Max(us)"]
    t = read_table(path, columns, MSPROF, ["Variance"])
    times = {c: t.numbers(c, required=True, minimum=0).to_list() for c in ("Time(us)", "Avg(us)", "Min(us)", "Max(us)")}
    return [
        ApiStat(
            level or "",
            name or "",
            times["Time(us)"][r],
            int(count),
            times["Avg(us)"][r],
            times["Min(us)"][r],
            times["Max(us)"][r],
            variance,
        )
        for r, (level, name, count, variance) in enumerate(
            zip(
                t.strings("Level"),
                t.strings("API Name"),
                t.numbers("Count", required=True, integer=True, minimum=0),
                t.numbers("Variance", minimum=0),
            )
        )
    ]


def read_task_time(path: Path | str) -> list[TaskTimeRow]:
    """task_time(_*).csv: every hardware task, compute or not."""
    columns = ["kernel_name", "kernel_type", "stream_id", "task_id", "task_time(us)", "task_start(us)", "task_stop(us)"]
    t = read_table(path, columns, MSPROF)
    return [
        TaskTimeRow(name, kind or "N/A", stream or "", task or "", time_us, start, stop)
        for name, kind, stream, task, time_us, start, stop in zip(
            t.strings("kernel_name"),
            t.strings("kernel_type"),
            t.strings("stream_id"),
            t.strings("task_id"),
            t.numbers("task_time(us)", required=True, minimum=0),
            t.numbers("task_start(us)", required=True),
            t.numbers("task_stop(us)", required=True),
        )
    ]


TX_COLUMNS = ["message", "Start_time(us)", "End_time(us)"]
TX_DEVICE_COLUMNS = ["Device Start_time(us)", "Device End_time(us)"]


def read_msprof_tx(path: Path | str) -> list[TxRange]:
    """msprof_tx(_*).csv: the application's own ranges (``--msproftx=on``), marks without an end left out."""
    t = read_table(path, TX_COLUMNS, MSPROF)
    starts, ends = t.numbers("Start_time(us)", required=True), t.numbers("End_time(us)")
    device_starts, device_ends = (t.numbers(c) for c in TX_DEVICE_COLUMNS)
    return [
        TxRange(message or "", start, end, device_start, device_end)
        for message, start, end, device_start, device_end in zip(
            t.strings("message"), starts, ends, device_starts, device_ends
        )
        if end is not None and end >= start
    ]


def read_step_trace_time(path: Path | str) -> list[StepTime]:
    """step_trace_time.csv, with (torch_npu 7.1+) or without (6.0/7.0) the leading Device_id."""
    columns = [
        "Step",
        "Computing",
        "Communication(Not Overlapped)",
        "Overlapped",
        "Communication",
        "Free",
        "Stage",
        "Bubble",
    ]
    t = read_table(path, columns, TORCH_NPU, ["Preparing", "Device_id"])
    # Overlapped and Preparing are differences of timestamps and may come out slightly negative.
    times = [t.numbers(c, required=True, minimum=None if c == "Overlapped" else 0).to_list() for c in columns[1:]]
    return [
        StepTime(step, *values, preparing_us=preparing, device_id=device)
        for step, *values, preparing, device in zip(
            _ints(t.numbers("Step", integer=True).to_list()), *times, t.numbers("Preparing"), t.strings("Device_id")
        )
    ]


# --- timelines: msprof_*.json, trace_view.json (decoded by chrome_trace, scanned by trace_scan) ----


def read_trace(path: Path | str) -> list[TraceEvent]:
    """msprof_*.json or trace_view.json: every event of a Chrome-trace array (``ts`` may be a string)."""
    path = Path(path)
    events = []
    for i, e in enumerate(e for block in iter_trace(path) for e in block):
        dur = trace_number(e.dur, path, f"event {i} 'dur'")
        if dur is not None and dur < 0:
            raise LabError(
                f"{path}: event {i} ({e.name!r}) has a negative 'dur' ({dur:g})", "the trace is damaged; re-export it"
            )
        events.append(
            TraceEvent(
                name=e.name,
                ph=e.ph,
                pid=e.pid,
                tid=e.tid,
                ts_us=trace_number(e.ts, path, f"event {i} 'ts'"),
                dur_us=dur,
                cat=e.cat,
                args=event_args(e),
            )
        )
    return events


def read_overlap(path: Path | str) -> OverlapEvents:
    """The Overlap Analysis / ProfilerStep events of trace_view.json or msprof_*.json, streamed.

    The one reader of timelines for the step table. The byte scanner (:func:`trace_scan.scan_blocks`)
    decodes only the events the step table can use; a trace it cannot vouch for is decoded whole,
    a block at a time (:func:`chrome_trace.iter_trace`), which also names the line of any damage.
    Either way the same :func:`chrome_trace.overlap_events` keeps them, so the numbers are the same.
    The result is kept per file (path, size, mtime, inode): a report that asks twice reads the
    trace once.
    """
    path = Path(path)
    key = _identity(path, "overlap")
    if key is not None and key in _OVERLAP_CACHE:
        return _OVERLAP_CACHE[key]
    try:
        overlap = overlap_events(scan_blocks(path), path)
    except Unsure:
        overlap = overlap_events(iter_trace(path, timed=True), path)
    if key is not None:
        if len(_OVERLAP_CACHE) >= _TOTALS_CACHE_MAX:
            _OVERLAP_CACHE.clear()
        _OVERLAP_CACHE[key] = overlap
    return overlap


_OVERLAP_CACHE: dict[tuple, OverlapEvents] = {}
