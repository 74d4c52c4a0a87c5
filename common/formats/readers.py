"""Readers for every msprof / torch_npu file the lab uses. Each returns typed rows."""

from __future__ import annotations

import codecs
import math
import mmap
import re
from array import array
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path

from common.errors import LabError
from common.formats.engine import msgspec, np, pl
from common.formats.records import (
    OVERLAP_EVENTS,
    OVERLAP_PROCESS,
    ApiStat,
    OpStat,
    OverlapEvents,
    StepTime,
    Task,
    TaskTimeRow,
    TraceEvent,
    TxRange,
)
from common.formats.schema import PMU_COLUMNS
from common.formats.table import CsvFile, Table, checked_numbers, cleaned, line_at, read_table

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
    "name": "Op Name", "type": "OP Type", "core": "Task Type", "start": "Task Start Time(us)",
    "duration": "Task Duration(us)", "wait": "Task Wait Time(us)",
}
_KERNEL_NAMES = {
    "name": "Name", "type": "Type", "core": "Accelerator Core", "start": "Start Time(us)",
    "duration": "Duration(us)", "wait": "Wait Time(us)",
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
        if kind == "op_summary" else
        (_KERNEL_NAMES, ["Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)"], TORCH_NPU)
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
            frame = pl.read_csv(chunk, has_header=False, schema=schema, columns=wanted,
                                empty_string_is_null=False, quote_char='"', raise_if_empty=False,
                                missing_columns="insert")
        except pl.exceptions.PolarsError:
            return None
        return (
            frame.lazy()
            .select(*[k.alias(f"k{i}") for i, k in enumerate(keys)], duration=duration, short=short)
            .group_by("k0", "k1", "k2", "k3")
            .agg(count=pl.len(), numbers=pl.col("duration").count(), total_us=pl.col("duration").sum(),
                 min_us=pl.col("duration").min(), max_us=pl.col("duration").max(), short=pl.col("short").any())
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
        ok=(pl.col("count") == pl.col("numbers")).all() & ~pl.col("short").any() & pl.col("total_us").is_finite().all()
        & (pl.col("min_us") >= 0).all() & (pl.col("max_us").is_finite()).all()
    ).item()
    if not vouched:
        return None
    totals = merged.with_columns(
        device_id=cleaned(pl.col("k0")), op_type=cleaned(pl.col("k1")),
        task_type=pl.coalesce(cleaned(pl.col("k2")), pl.lit("N/A")), input_shapes=cleaned(pl.col("k3")),
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
        keys = [pl.col(present[c]) if c in present else pl.lit(None, pl.String) for c in
                ("Device_id", names["type"], names["name"], names["core"], "Input Shapes")]
        parts.append(
            block.select(*[k.alias(f"k{i}") for i, k in enumerate(keys)], duration=duration)
            .group_by("k0", "k1", "k2", "k3", "k4")
            .agg(count=pl.len(), total_us=pl.col("duration").sum(), min_us=pl.col("duration").min(),
                 max_us=pl.col("duration").max())
        )
    if not parts:
        return task_totals_empty()
    keys = [cleaned(pl.col(f"k{i}")) for i in range(5)]
    return merge_totals(pl.concat(parts).with_columns(
        device_id=keys[0], op_type=pl.coalesce(keys[1], keys[2], pl.lit("")),
        task_type=pl.coalesce(keys[3], pl.lit("N/A")), input_shapes=keys[4],
    ))


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
        pl.col("count").sum(), pl.col("total_us").sum(), pl.col("min_us").min(), pl.col("max_us").max(),
    )


def op_statistic_from_totals(totals: pl.DataFrame) -> list[OpStat]:
    """op_statistic rows as msprof builds them: by (OP Type, Core Type), ratio of all time, largest first."""
    totals = merge_totals(totals.with_columns(input_shapes=pl.lit(None, pl.String)))
    grand = totals["total_us"].sum() or 1.0
    rows = totals.sort(["total_us", "op_type", "task_type"], descending=[True, False, False], nulls_last=True)
    return [
        OpStat(op_type=r["op_type"], core_type=r["task_type"], count=int(r["count"]), total_us=r["total_us"],
               min_us=r["min_us"], avg_us=r["total_us"] / r["count"], max_us=r["max_us"],
               ratio_pct=100.0 * r["total_us"] / grand, device_id=r["device_id"])
        for r in rows.iter_rows(named=True)
    ]


def read_op_statistic(path: Path | str) -> list[OpStat]:
    """op_statistic(_*).csv: per OP Type and Core Type totals."""
    columns = ["OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)", "Avg Time(us)", "Max Time(us)", "Ratio(%)"]
    t = read_table(path, columns, f"{MSPROF} or {TORCH_NPU}", ["Device_id"])
    times = {c: t.numbers(c, required=True, minimum=0).to_list() for c in columns[3:]}
    return [
        OpStat(op_type or "", core or "N/A", int(count), *(times[c][r] for c in columns[3:]), device_id=device)
        for r, (op_type, core, count, device) in enumerate(zip(
            t.strings("OP Type"), t.strings("Core Type"), t.numbers("Count", required=True, integer=True, minimum=0),
            t.strings("Device_id"),
        ))
    ]


def read_api_statistic(path: Path | str) -> list[ApiStat]:
    """api_statistic(_*).csv: host API call totals."""
    columns = ["Level", "API Name", "Time(us)", "Count", "Avg(us)", "Min(us)", "Max(us)"]
    t = read_table(path, columns, MSPROF, ["Variance"])
    times = {c: t.numbers(c, required=True, minimum=0).to_list() for c in ("Time(us)", "Avg(us)", "Min(us)", "Max(us)")}
    return [
        ApiStat(level or "", name or "", times["Time(us)"][r], int(count), times["Avg(us)"][r], times["Min(us)"][r],
                times["Max(us)"][r], variance)
        for r, (level, name, count, variance) in enumerate(zip(
            t.strings("Level"), t.strings("API Name"), t.numbers("Count", required=True, integer=True, minimum=0),
            t.numbers("Variance", minimum=0),
        ))
    ]


def read_task_time(path: Path | str) -> list[TaskTimeRow]:
    """task_time(_*).csv: every hardware task, compute or not."""
    columns = ["kernel_name", "kernel_type", "stream_id", "task_id", "task_time(us)", "task_start(us)", "task_stop(us)"]
    t = read_table(path, columns, MSPROF)
    return [
        TaskTimeRow(name, kind or "N/A", stream or "", task or "", time_us, start, stop)
        for name, kind, stream, task, time_us, start, stop in zip(
            t.strings("kernel_name"), t.strings("kernel_type"), t.strings("stream_id"), t.strings("task_id"),
            t.numbers("task_time(us)", required=True, minimum=0), t.numbers("task_start(us)", required=True),
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
            t.strings("message"), starts, ends, device_starts, device_ends)
        if end is not None and end >= start
    ]


def read_step_trace_time(path: Path | str) -> list[StepTime]:
    """step_trace_time.csv, with (torch_npu 7.1+) or without (6.0/7.0) the leading Device_id."""
    columns = ["Step", "Computing", "Communication(Not Overlapped)", "Overlapped", "Communication", "Free", "Stage", "Bubble"]
    t = read_table(path, columns, TORCH_NPU, ["Preparing", "Device_id"])
    # Overlapped and Preparing are differences of timestamps and may come out slightly negative.
    times = [t.numbers(c, required=True, minimum=None if c == "Overlapped" else 0).to_list() for c in columns[1:]]
    return [
        StepTime(step, *values, preparing_us=preparing, device_id=device)
        for step, *values, preparing, device in zip(
            _ints(t.numbers("Step", integer=True).to_list()), *times, t.numbers("Preparing"), t.strings("Device_id"),
        )
    ]


# --- timelines: msprof_*.json, trace_view.json ---------------------------------------------------------
TRACE_BLOCK_BYTES = 16 << 20  # the trace is decoded this much at a time: the memory bound of a read
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_STEP_EVENT = re.compile(r"^ProfilerStep#(\d+)$")


class _Event(msgspec.Struct):
    """The fields of a Chrome-trace event the lab uses; ``args`` stays undecoded until asked for."""

    ph: str
    name: str = ""
    pid: int | str = ""
    tid: int | str = ""
    ts: str | float | None = None
    dur: str | float | None = None
    cat: str | None = None
    args: msgspec.Raw = msgspec.Raw(b"{}")


_DECODER = msgspec.json.Decoder(list[_Event])


class _TimedEvent(msgspec.Struct):
    """What the step table reads of an event, ``ts``/``dur`` parsed to floats while decoding (string or not)."""

    ph: str
    name: str = ""
    pid: int | str = ""
    ts: float | None = None
    dur: float | None = None
    args: msgspec.Raw = msgspec.Raw(b"{}")


# strict=False lets msgspec turn msprof's string timestamps into floats without a Python str per event.
_TIMED_DECODER = msgspec.json.Decoder(list[_TimedEvent], strict=False)


def finite_number(value: object, path: Path, where: str, fix: str) -> float:
    """``value`` as a finite float, or one LabError naming the file, the place and the value."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number):
        raise LabError(f"{path}: {where} is {value!r}, not a number", fix)
    return number


def _number(value: str | float | None, path: Path, where: str) -> float | None:
    return None if value is None else finite_number(value, path, where, "the trace is damaged; re-export it")


def iter_trace(path: Path | str, timed: bool = False) -> Iterator[list[_Event] | list[_TimedEvent]]:
    """The events of a Chrome-trace JSON array, a decoded block at a time (bounded memory).

    Blocks are cut at ``}, {`` and decoded with msgspec; a cut that fell inside a string or a
    nested object cannot decode (unbalanced quotes or braces), so the block is joined with the
    next one and tried again. A file that does not decode stops with the line where it broke.
    ``timed``: events carry float ``ts``/``dur`` (a block whose times are not numbers is decoded
    as text instead, so the error can name the value).
    """
    path = Path(path)
    if not path.is_file():
        raise LabError(f"{path}: file not found", "run the mode that writes it")
    damaged = "the trace is truncated or damaged; re-export it"
    with path.open("rb") as f:
        head = f.read(TRACE_BLOCK_BYTES)
        body = head.removeprefix(codecs.BOM_UTF8)
        body = body.lstrip()
        if body.startswith(b"{"):  # {"traceEvents": [...]}: small files only, decode whole
            yield _decode_object(path, body + f.read())
            return
        if not body:
            raise LabError(f"{path}: file is empty", "re-run the collection")
        if not body.startswith(b"["):
            raise LabError(f"{path}: expected a JSON array of trace events", "this is not an msprof/torch_npu timeline")
        offset = len(head) - len(body) + 1  # file offset of ``pending``
        pending, done = body[1:], False
        while not done:
            block = f.read(TRACE_BLOCK_BYTES)
            done = not block
            pending += block
            if done:
                piece = pending.rstrip()
                if not piece.endswith(b"]"):
                    line = line_at(path, offset + len(piece))
                    raise LabError(f"{path}:{line}: not valid JSON: the trace ends before its closing ']'", damaged)
                piece, cut = piece[:-1], len(pending)
            else:
                cut = _last_boundary(pending)
                if cut is None:
                    continue
                piece = pending[:cut]
            text = piece.lstrip(b" \t\r\n,").rstrip()
            try:
                events = _decode_block(b"[" + text + b"]", timed) if text else []
            except (msgspec.DecodeError, msgspec.ValidationError) as err:
                if not done and len(pending) < _TRACE_MAX_PENDING:
                    continue  # a cut inside a string or nested object: join with the next block
                where = offset + len(piece) - len(piece.lstrip(b" \t\r\n,")) + _error_byte(err)
                raise LabError(f"{path}:{line_at(path, where)}: not valid JSON ({err})", damaged) from None
            yield events
            offset += cut
            pending = pending[cut:]


_TRACE_MAX_PENDING = 8 * TRACE_BLOCK_BYTES  # one event longer than this is taken as damage


def _decode_block(data: bytes, timed: bool) -> list[_Event] | list[_TimedEvent]:
    if timed:
        try:
            return _TIMED_DECODER.decode(data)
        except msgspec.ValidationError:
            pass  # a time that is not a number: the text decoder keeps it for the error message
    return _DECODER.decode(data)


def _error_byte(err: Exception) -> int:
    match = re.search(r"at byte (\d+)", str(err))
    return max(0, int(match[1]) - 1) if match else 0


def _last_boundary(data: bytes) -> int | None:
    """Offset just past the ``}`` of the last ``}, {`` in ``data``, or None."""
    end = len(data)
    while end > 0:
        start = max(0, end - (1 << 16))
        matches = list(_BOUNDARY.finditer(data, start, end))
        if matches:
            return matches[-1].start() + 1
        if start == 0:
            return None
        end = start + 64  # overlap so a boundary split by the window is still seen


def _decode_object(path: Path, data: bytes) -> list[_Event]:
    try:
        events = msgspec.json.decode(data, type=dict[str, msgspec.Raw]).get("traceEvents")
        if events is None:
            raise LabError(f"{path}: expected a JSON array of trace events", "this is not an msprof/torch_npu timeline")
        return _DECODER.decode(events)
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        raise LabError(f"{path}: not valid JSON ({err})", "the trace is truncated or damaged; re-export it") from None


def _args(event: _Event | _TimedEvent | TraceEvent) -> dict:
    if isinstance(event, TraceEvent):
        return event.args
    try:
        args = msgspec.json.decode(event.args)
    except msgspec.DecodeError:
        args = None
    return args if isinstance(args, dict) else {}


def read_trace(path: Path | str) -> list[TraceEvent]:
    """msprof_*.json or trace_view.json: every event of a Chrome-trace array (``ts`` may be a string)."""
    path = Path(path)
    events = []
    for i, e in enumerate(e for block in iter_trace(path) for e in block):
        dur = _number(e.dur, path, f"event {i} 'dur'")
        if dur is not None and dur < 0:
            raise LabError(f"{path}: event {i} ({e.name!r}) has a negative 'dur' ({dur:g})",
                           "the trace is damaged; re-export it")
        events.append(TraceEvent(
            name=e.name, ph=e.ph, pid=e.pid, tid=e.tid, ts_us=_number(e.ts, path, f"event {i} 'ts'"),
            dur_us=dur, cat=e.cat, args=_args(e),
        ))
    return events


def overlap_events(blocks: Iterable[list[_Event] | list[_TimedEvent] | list[TraceEvent]], path: Path) -> OverlapEvents:
    """Keep only what the step table needs from blocks of events: Overlap Analysis, ProfilerStep, hcom_receive."""
    overlap_pids: set = set()
    labels: dict = {}
    steps: list[tuple[int, float]] = []
    kinds = {name: i for i, name in enumerate(OVERLAP_EVENTS)}
    pid_of: list = []
    kind_of, ts_of, dur_of = array("b"), array("d"), array("d")
    bubble_ts, bubble_dur = array("d"), array("d")
    for block in blocks:
        # One C-speed pass drops the host and device events (nearly all of a trace) before any Python work.
        kept = [e for e in block if e.name in kinds or e.ph == "M" or e.name.startswith(_KEPT_PREFIXES)]
        spans = [e for e in kept if e.name in kinds and e.ph == "X"]
        times = [e.ts for e in spans] if spans and all(type(e) is _TimedEvent for e in spans) else None
        if times is not None and None not in times:  # the common case, a list at a time
            pid_of.extend([e.pid for e in spans])
            kind_of.extend([kinds[e.name] for e in spans])
            ts_of.extend(times)
            dur_of.extend([e.dur or 0.0 for e in spans])
            kept = [e for e in kept if not (e.name in kinds and e.ph == "X")]
        for e in kept:
            if e.ph == "M":
                args = _args(e)
                if e.name == "process_name" and args.get("name") == OVERLAP_PROCESS:
                    overlap_pids.add(e.pid)
                elif e.name == "process_labels":
                    labels[e.pid] = str(args.get("labels", ""))
                continue
            if e.ph != "X":
                continue
            if isinstance(e, _TimedEvent) and e.ts is not None:
                ts, dur = e.ts, e.dur or 0.0  # checked for finite / negative below, all at once
            else:
                ts, dur = _event_times(e, path)
            kind = kinds.get(e.name)
            if kind is not None:
                pid_of.append(e.pid)
                kind_of.append(kind)
                ts_of.append(ts)
                dur_of.append(dur)
            elif e.name.startswith("hcom_receive"):
                bubble_ts.append(ts)
                bubble_dur.append(dur)
            elif (m := _STEP_EVENT.match(e.name)) is not None:
                steps.append((int(m[1]), ts))
    keep = np.fromiter((p in overlap_pids for p in pid_of), dtype=bool, count=len(pid_of))
    for times, durations in ((ts_of, dur_of), (bubble_ts, bubble_dur)):
        ts, dur = np.frombuffer(times), np.frombuffer(durations)
        bad = ~np.isfinite(ts) | ~np.isfinite(dur) | (dur < 0)
        if bad.any():
            i = int(np.argmax(bad))
            raise LabError(f"{path}: an event at ts {ts[i]!r} has 'dur' {dur[i]!r} (must be a finite number >= 0)",
                           "the trace is damaged; re-export it")
    steps_ts = np.array([start for _, start in steps])
    if not np.isfinite(steps_ts).all():
        raise LabError(f"{path}: a ProfilerStep event has 'ts' {steps_ts[~np.isfinite(steps_ts)][0]!r}",
                       "the trace is damaged; re-export it")
    return OverlapEvents(
        kind=np.frombuffer(kind_of, dtype=np.int8)[keep], ts_us=np.frombuffer(ts_of)[keep],
        dur_us=np.frombuffer(dur_of)[keep], steps=sorted(steps, key=lambda s: s[1]),
        bubble_ts_us=np.frombuffer(bubble_ts), bubble_dur_us=np.frombuffer(bubble_dur),
        labels=sorted({labels[p] for p in overlap_pids if p in labels}),
    )


_KEPT_PREFIXES = ("ProfilerStep#", "hcom_receive")


def _event_times(e: _Event | _TimedEvent | TraceEvent, path: Path) -> tuple[float, float]:
    """(ts, dur) of a kept event: finite, dur >= 0 (missing dur = 0); anything else stops with the event."""
    raw_ts, raw_dur = (e.ts_us, e.dur_us) if isinstance(e, TraceEvent) else (e.ts, e.dur)
    where = f"event {e.name!r} at ts {raw_ts!r}"
    ts = _number(raw_ts, path, f"{where}: 'ts'")
    dur = _number(raw_dur, path, f"{where}: 'dur'")
    if ts is None:
        raise LabError(f"{path}: {where} has no 'ts'", "the trace is damaged; re-export it")
    if dur is not None and dur < 0:
        raise LabError(f"{path}: {where} has a negative 'dur' ({dur:g})", "the trace is damaged; re-export it")
    return ts, dur or 0.0


def read_overlap(path: Path | str) -> OverlapEvents:
    """The Overlap Analysis / ProfilerStep events of trace_view.json or msprof_*.json, streamed.

    The one reader of timelines for the step table. The byte scanner (:func:`scan_overlap_events`)
    decodes only the events the step table can use; a trace it cannot vouch for is decoded whole,
    a block at a time (:func:`iter_trace`), which also names the line of any damage. Either way
    the same :func:`overlap_events` keeps them, so the numbers are the same. The result is kept per
    file (path, size, mtime, inode): a report that asks twice reads the trace once.
    """
    path = Path(path)
    key = _identity(path, "overlap")
    if key is not None and key in _OVERLAP_CACHE:
        return _OVERLAP_CACHE[key]
    try:
        overlap = overlap_events(_scanned(path), path)
    except _Unsure:
        overlap = overlap_events(iter_trace(path, timed=True), path)
    if key is not None:
        if len(_OVERLAP_CACHE) >= _TOTALS_CACHE_MAX:
            _OVERLAP_CACHE.clear()
        _OVERLAP_CACHE[key] = overlap
    return overlap


_OVERLAP_CACHE: dict[tuple, OverlapEvents] = {}
SCAN_BLOCK_BYTES = 16 << 20  # the scanner looks at this much of the map at a time, then lets its pages go
SCAN_BATCH = 16_384  # events decoded (and handed on) at a time
# The events the step table reads, found by their name: Overlap Analysis spans, steps, receives, process metadata.
_WANTED = re.compile(
    rb'"name"[ \t\r\n]*:[ \t\r\n]*"(?:Computing"|Communication|Free"|ProfilerStep#|hcom_receive|process_name"'
    rb'|process_labels")'
)
_SPACE = b" \t\r\n"


class _Unsure(Exception):
    """The byte scanner met something it cannot vouch for: the trace is decoded whole instead."""


def scan_overlap_events(path: Path) -> list[list[_TimedEvent]] | None:
    """Every block :func:`_scanned` yields, or None where it gives up (for tests and tools)."""
    try:
        return list(_scanned(path))
    except _Unsure:
        return None


def _scanned(path: Path) -> Iterator[list[_TimedEvent]]:
    """The events :func:`overlap_events` keeps, decoded from byte slices of the file, a window at a time.

    A JSON array of events is searched for ``"name": "<wanted>"``; each hit's event runs from the
    ``{`` that opens it (the first one before the hit that follows ``,`` or ``[``, so an ``args``
    object is passed over) to the next ``}, {``. Only those slices are decoded, with the typed
    decoder. Anything unexpected raises :class:`_Unsure`, and the caller decodes the whole trace: not an
    array, no closing ``]``, a slice that does not decode as exactly one event (a cut inside a
    string or a nested object), a time that is not a number. Not seen: a wanted name written with
    JSON escapes, or an event-like object nested in another event's args.
    """
    try:
        size = path.stat().st_size
        f = path.open("rb")
    except OSError:
        raise _Unsure
    with f:
        if size == 0:
            raise _Unsure
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            head = mm[: min(size, 4096)]
            body = head.removeprefix(codecs.BOM_UTF8)
            tail = mm[max(0, size - 4096):].rstrip(_SPACE)
            if not body.lstrip(_SPACE).startswith(b"[") or not tail.endswith(b"]"):
                raise _Unsure
            last = size - (len(mm[max(0, size - 4096):]) - len(tail)) - 1  # offset of the closing ']'
            previous = -1
            find, rfind, boundary = mm.find, mm.rfind, _BOUNDARY.search
            for window in range(0, last, SCAN_BLOCK_BYTES):
                slices = []
                stop = window + SCAN_BLOCK_BYTES
                for hit in _WANTED.finditer(mm, window, min(stop + 128, last)):
                    at = hit.start()
                    if at >= stop:
                        break
                    start = rfind(b"{", 0, at)
                    if start < 1 or mm[start - 1] not in b",[":  # whitespace before it, or an args object
                        start = _event_start(mm, at)
                        if start is None:
                            raise _Unsure
                    if start == previous:  # a second wanted name in the same event
                        continue
                    previous = start
                    end = find(b"}", at, last) + 1
                    if end == 0 or find(b"{", start + 1, end) >= 0:  # the event holds an object (args)
                        match = boundary(mm, at, last)
                        end = match.start() + 1 if match else last
                    slices.append(mm[start:end])
                    if len(slices) >= SCAN_BATCH:
                        yield _decoded(slices)
                        slices = []
                if slices:
                    yield _decoded(slices)
                _release(mm, window + SCAN_BLOCK_BYTES - (1 << 20))


def _decoded(slices: list[bytes]) -> list[_TimedEvent]:
    """The events of ``slices``, each of which must decode as exactly one event."""
    try:
        events = _TIMED_DECODER.decode(b"[" + b",".join(slices) + b"]")
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise _Unsure from None
    if len(events) != len(slices):
        raise _Unsure
    return events


def _event_start(mm: mmap.mmap, at: int) -> int | None:
    """Offset of the ``{`` that opens the top-level event holding byte ``at``, or None."""
    start = at
    while True:
        start = mm.rfind(b"{", 0, start)
        if start < 0:
            return None
        before = start - 1
        while before >= 0 and mm[before] in _SPACE:
            before -= 1
        if before < 0:
            return None
        if mm[before] in b",[":
            return start


def _release(mm: mmap.mmap, end: int) -> None:
    """Drop the map's pages before ``end`` from this process (they stay in the page cache)."""
    end -= end % mmap.PAGESIZE
    if end > 0 and hasattr(mm, "madvise"):
        try:
            mm.madvise(mmap.MADV_DONTNEED, 0, min(end, len(mm) - len(mm) % mmap.PAGESIZE))
        except (OSError, ValueError):
            pass
