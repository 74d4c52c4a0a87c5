"""Readers for every msprof / torch_npu file the lab uses. Each returns typed rows."""

from __future__ import annotations

import json
from pathlib import Path

from common.errors import LabError
from common.formats.records import ApiStat, OpStat, StepTime, Task, TaskTimeRow, TraceEvent
from common.formats.schema import PMU_COLUMNS
from common.formats.table import Table, read_table

MSPROF = "msprof (mindstudio_profiler_output)"
TORCH_NPU = "torch_npu.profiler (ASCEND_PROFILER_OUTPUT)"


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


def _tasks(table: Table, names: dict[str, str]) -> list[Task]:
    pmu_columns = [c for c in PMU_COLUMNS if table.has(c)]
    tasks = []
    for r in range(len(table.rows)):
        tasks.append(
            Task(
                op_name=table.text(r, names["name"]) or "",
                op_type=table.text(r, names["type"]) or table.text(r, names["name"]) or "",
                task_type=table.text(r, names["core"]) or "N/A",
                start_us=table.required_number(r, names["start"]),
                duration_us=table.required_number(r, names["duration"]),
                wait_us=table.number(r, names["wait"]),
                device_id=table.text(r, "Device_id"),
                block_dim=_int(table.number(r, "Block Dim")),
                input_shapes=table.text(r, "Input Shapes"),
                input_dtypes=table.text(r, "Input Data Types"),
                output_shapes=table.text(r, "Output Shapes"),
                output_dtypes=table.text(r, "Output Data Types"),
                step_id=_int(table.number(r, "Step Id")) if table.has("Step Id") else None,
                pmu={c: table.number(r, c) for c in pmu_columns},
            )
        )
    return tasks


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


def read_op_statistic(path: Path | str) -> list[OpStat]:
    """op_statistic(_*).csv: per OP Type and Core Type totals."""
    columns = ["OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)", "Avg Time(us)", "Max Time(us)", "Ratio(%)"]
    t = read_table(path, columns, f"{MSPROF} or {TORCH_NPU}")
    return [
        OpStat(
            op_type=t.text(r, "OP Type") or "",
            core_type=t.text(r, "Core Type") or "N/A",
            count=int(t.required_number(r, "Count")),
            total_us=t.required_number(r, "Total Time(us)"),
            min_us=t.required_number(r, "Min Time(us)"),
            avg_us=t.required_number(r, "Avg Time(us)"),
            max_us=t.required_number(r, "Max Time(us)"),
            ratio_pct=t.required_number(r, "Ratio(%)"),
            device_id=t.text(r, "Device_id"),
        )
        for r in range(len(t.rows))
    ]


def read_api_statistic(path: Path | str) -> list[ApiStat]:
    """api_statistic(_*).csv: host API call totals."""
    columns = ["Level", "API Name", "Time(us)", "Count", "Avg(us)", "Min(us)", "Max(us)"]
    t = read_table(path, columns, MSPROF)
    return [
        ApiStat(
            level=t.text(r, "Level") or "",
            api_name=t.text(r, "API Name") or "",
            time_us=t.required_number(r, "Time(us)"),
            count=int(t.required_number(r, "Count")),
            avg_us=t.required_number(r, "Avg(us)"),
            min_us=t.required_number(r, "Min(us)"),
            max_us=t.required_number(r, "Max(us)"),
            variance=t.number(r, "Variance"),
        )
        for r in range(len(t.rows))
    ]


def read_task_time(path: Path | str) -> list[TaskTimeRow]:
    """task_time(_*).csv: every hardware task, compute or not."""
    columns = ["kernel_name", "kernel_type", "stream_id", "task_id", "task_time(us)", "task_start(us)", "task_stop(us)"]
    t = read_table(path, columns, MSPROF)
    return [
        TaskTimeRow(
            kernel_name=t.text(r, "kernel_name"),
            kernel_type=t.text(r, "kernel_type") or "N/A",
            stream_id=t.text(r, "stream_id") or "",
            task_id=t.text(r, "task_id") or "",
            task_time_us=t.required_number(r, "task_time(us)"),
            start_us=t.required_number(r, "task_start(us)"),
            stop_us=t.required_number(r, "task_stop(us)"),
        )
        for r in range(len(t.rows))
    ]


def read_step_trace_time(path: Path | str) -> list[StepTime]:
    """step_trace_time.csv, with (torch_npu 7.1+) or without (6.0/7.0) the leading Device_id."""
    columns = ["Step", "Computing", "Communication(Not Overlapped)", "Overlapped", "Communication", "Free", "Stage", "Bubble"]
    t = read_table(path, columns, TORCH_NPU)
    return [
        StepTime(
            step=_int(t.number(r, "Step")),
            computing_us=t.required_number(r, "Computing"),
            communication_not_overlapped_us=t.required_number(r, "Communication(Not Overlapped)"),
            overlapped_us=t.required_number(r, "Overlapped"),
            communication_us=t.required_number(r, "Communication"),
            free_us=t.required_number(r, "Free"),
            stage_us=t.required_number(r, "Stage"),
            bubble_us=t.required_number(r, "Bubble"),
            preparing_us=t.number(r, "Preparing"),
            device_id=t.text(r, "Device_id"),
        )
        for r in range(len(t.rows))
    ]


def _float_or_none(value: object, path: Path, where: str) -> float | None:
    if value is None:
        return None
    try:
        return float(str(value).strip())
    except ValueError:
        raise LabError(f"{path}: {where} is {value!r}, not a number", "the trace is damaged; re-export it") from None


def read_trace(path: Path | str) -> list[TraceEvent]:
    """msprof_*.json or trace_view.json: a Chrome-trace array (``ts`` may be a string)."""
    path = Path(path)
    if not path.is_file():
        raise LabError(f"{path}: file not found", "run the mode that writes it")
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise LabError(f"{path}: not valid JSON ({err})", "the trace is truncated or damaged; re-export it") from None
    if isinstance(data, dict):
        data = data.get("traceEvents")
    if not isinstance(data, list):
        raise LabError(f"{path}: expected a JSON array of trace events", "this is not an msprof/torch_npu timeline")
    events = []
    for i, item in enumerate(data):
        if not isinstance(item, dict) or "ph" not in item:
            raise LabError(f"{path}: event {i} has no 'ph' field", "this is not a Chrome-trace timeline")
        events.append(
            TraceEvent(
                name=str(item.get("name", "")),
                ph=str(item["ph"]),
                pid=item.get("pid", ""),
                tid=item.get("tid", ""),
                ts_us=_float_or_none(item.get("ts"), path, f"event {i} 'ts'"),
                dur_us=_float_or_none(item.get("dur"), path, f"event {i} 'dur'"),
                cat=item.get("cat"),
                args=item.get("args") or {},
            )
        )
    return events
