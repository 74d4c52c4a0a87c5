"""Writers the portable backend uses, producing msprof's and torch_npu's exact columns and quirks."""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path

from common.formats import readers, schema
from common.formats.engine import pl
from common.formats.records import ApiStat, OpStat, StepTime, Task, TaskTimeRow, TxRange


def format_cell(value: object, column: str = "") -> str:
    """msprof's cell text: µs with 3 decimals, ``N/A`` for missing, a TAB after timestamps."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return schema.NA
    if isinstance(value, bool):
        return "YES" if value else "NO"
    if isinstance(value, float):
        text = f"{value:.3f}"
    else:
        text = str(value)
    return text + "\t" if column in schema.TIMESTAMP_COLUMNS else text


def write_csv(path: Path, header: list[str], rows: Iterable[Mapping[str, object]]) -> Path:
    """Write rows (dicts keyed by column name; absent keys are N/A) in ``header`` order."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(header)
        for row in rows:
            writer.writerow([format_cell(row.get(c), c) for c in header])
    return path


def _shapes(text: str | None) -> str | None:
    # msprof keeps the DB's quotes around shapes; csv quoting then makes them """...""".
    return f'"{text}"' if text else None


def _task_row(task: Task) -> dict[str, object]:
    row: dict[str, object] = {
        "Device_id": task.device_id,
        "Model ID": schema.MODEL_ID_SINGLE_OP,
        "Op Name": task.op_name,
        "OP Type": task.op_type,
        "OP State": "N/A",
        "Task Type": task.task_type,
        "Task Start Time(us)": task.start_us,
        "Task Duration(us)": task.duration_us,
        "Task Wait Time(us)": task.wait_us,
        "Block Dim": task.block_dim,
        "Input Shapes": _shapes(task.input_shapes),
        "Input Data Types": task.input_dtypes,
        "Output Shapes": _shapes(task.output_shapes),
        "Output Data Types": task.output_dtypes,
    }
    row.update(task.pmu)
    return row


def with_wait_times(tasks: list[Task]) -> list[Task]:
    """Fill Task Wait Time as msprof defines it: max(0, start - previous end), per device, by start."""
    by_device: dict[str | None, list[Task]] = defaultdict(list)
    for task in tasks:
        by_device[task.device_id].append(task)
    for group in by_device.values():
        group.sort(key=lambda t: t.start_us)
        previous_end = None
        for task in group:
            task.wait_us = 0.0 if previous_end is None else max(0.0, task.start_us - previous_end)
            previous_end = task.end_us
    return sorted(tasks, key=lambda t: t.start_us)


def write_op_summary(path: Path, tasks: list[Task]) -> Path:
    return write_csv(path, schema.OP_SUMMARY, (_task_row(t) for t in tasks))


def write_kernel_details(path: Path, tasks: list[Task]) -> Path:
    renames = dict(zip(schema.OP_SUMMARY, schema.KERNEL_DETAILS[1:]))

    def row(task: Task) -> dict[str, object]:
        out = {renames[k]: v for k, v in _task_row(task).items() if k in renames}
        out["Step Id"] = task.step_id if task.step_id is not None else ""
        return out

    return write_csv(path, schema.KERNEL_DETAILS, (row(t) for t in tasks))


def aggregate_op_statistic(tasks: list[Task]) -> list[OpStat]:
    """op_statistic from tasks, as msprof builds it: by (OP Type, Core Type), sorted by total time.

    The same engine aggregation the readers use on op_summary / kernel_details at scale.
    """
    frame = pl.DataFrame(
        {
            "device_id": [t.device_id for t in tasks],
            "op_type": [t.op_type for t in tasks],
            "task_type": [t.task_type for t in tasks],
            "duration": [t.duration_us for t in tasks],
        },
        schema={"device_id": pl.String, "op_type": pl.String, "task_type": pl.String, "duration": pl.Float64},
    )
    totals = frame.group_by("device_id", "op_type", "task_type").agg(
        count=pl.len(),
        total_us=pl.col("duration").sum(),
        min_us=pl.col("duration").min(),
        max_us=pl.col("duration").max(),
        input_shapes=pl.lit(None, pl.String),
    )
    return readers.op_statistic_from_totals(totals)


def write_op_statistic(path: Path, stats: list[OpStat]) -> Path:
    rows = (
        {
            "Device_id": s.device_id,
            "OP Type": s.op_type,
            "Core Type": s.core_type,
            "Count": s.count,
            "Total Time(us)": s.total_us,
            "Min Time(us)": s.min_us,
            "Avg Time(us)": s.avg_us,
            "Max Time(us)": s.max_us,
            "Ratio(%)": s.ratio_pct,
        }
        for s in stats
    )
    return write_csv(path, schema.OP_STATISTIC, rows)


def write_api_statistic(path: Path, stats: list[ApiStat], device_id: str = "host") -> Path:
    rows = (
        {
            "Device_id": device_id,
            "Level": s.level,
            "API Name": s.api_name,
            "Time(us)": s.time_us,
            "Count": s.count,
            "Avg(us)": s.avg_us,
            "Min(us)": s.min_us,
            "Max(us)": s.max_us,
            "Variance": s.variance,
        }
        for s in stats
    )
    return write_csv(path, schema.API_STATISTIC, rows)


def write_task_time(path: Path, rows: list[TaskTimeRow], device_id: str = "host") -> Path:
    out = (
        {
            "Device_id": device_id,
            "kernel_name": r.kernel_name,
            "kernel_type": r.kernel_type,
            "stream_id": r.stream_id,
            "task_id": r.task_id,
            "task_time(us)": r.task_time_us,
            "task_start(us)": r.start_us,
            "task_stop(us)": r.stop_us,
        }
        for r in rows
    )
    return write_csv(path, schema.TASK_TIME, out)


MSPROF_TX_HEADER = [
    "pid",
    "tid",
    "category",
    "event_type",
    "payload_type",
    "payload_value",
    "Start_time(us)",
    "End_time(us)",
    "message_type",
    "message",
    "domain",
    "Device Start_time(us)",
    "Device End_time(us)",
]


def write_msprof_tx(path: Path, ranges: list[TxRange], pid: int) -> Path:
    """msprof_tx: one row per application range, in msprof's merged columns (``N/A`` where a CPU has no value)."""
    rows = [
        {
            "pid": pid,
            "tid": 0,
            "event_type": "start/end",
            "Start_time(us)": r.start_us,
            "End_time(us)": r.end_us,
            "message_type": "string",
            "message": r.message,
            "domain": "default",
            "Device Start_time(us)": r.device_start_us,
            "Device End_time(us)": r.device_end_us,
        }
        for r in ranges
    ]
    return write_csv(path, MSPROF_TX_HEADER, rows)


def write_step_trace_time(path: Path, steps: list[StepTime]) -> Path:
    out = (
        {
            "Device_id": s.device_id,
            "Step": s.step if s.step is not None else "",
            "Computing": s.computing_us,
            "Communication(Not Overlapped)": s.communication_not_overlapped_us,
            "Overlapped": s.overlapped_us,
            "Communication": s.communication_us,
            "Free": s.free_us,
            "Stage": s.stage_us,
            "Bubble": s.bubble_us,
            "Communication(Not Overlapped and Exclude Receive)": max(
                0.0, s.communication_not_overlapped_us - s.bubble_us
            ),
            "Preparing": s.preparing_us,
        }
        for s in steps
    )
    return write_csv(path, schema.STEP_TRACE_TIME, out)


def trace_ts(us: float) -> str:
    """Timeline ``ts``: a string of µs with 3 decimals, as msprof writes it."""
    return f"{us:.3f}"


def write_trace(path: Path, events: list[dict]) -> Path:
    """A Chrome-trace JSON array (opens in Perfetto or chrome://tracing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        json.dump(events, f, separators=(",", ":"))
    return path


def timeline_events(tasks: list[Task], pid: int, process_name: str, label: str = "CPU") -> list[dict]:
    """msprof_*.json-style events for tasks: metadata naming the process, then one ``X`` per task."""
    events: list[dict] = [
        {"name": "process_name", "pid": pid, "tid": 0, "ph": "M", "args": {"name": process_name}},
        {"name": "process_labels", "pid": pid, "tid": 0, "ph": "M", "args": {"labels": label}},
        {"name": "thread_name", "pid": pid, "tid": 0, "ph": "M", "args": {"name": "Ops"}},
    ]
    for task in tasks:
        args = {"Task Type": task.task_type, "Model Id": int(schema.MODEL_ID_SINGLE_OP)}
        if task.input_shapes:
            args["Input Shapes"] = task.input_shapes
        if task.step_id is not None:
            args["Step Id"] = task.step_id
        events.append(
            {
                "name": task.op_name,
                "pid": pid,
                "tid": 0,
                "ts": trace_ts(task.start_us),
                "dur": round(task.duration_us, 3),
                "ph": "X",
                "args": args,
            }
        )
    return events
