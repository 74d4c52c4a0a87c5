"""The torch_npu.profiler output layout, written by the portable backend from torch.profiler data.

``{worker}_{YYYYmmddHHMMSSfff}_ascend_pt/`` with ``profiler_info.json`` and
``ASCEND_PROFILER_OUTPUT/{kernel_details,op_statistic,api_statistic,step_trace_time}.csv``
plus ``trace_view.json``. The trace has torch_npu's process structure: a host process with
the steps and the ops Python called, a process for the measured tasks (labelled CPU, never
an NPU), and ``Overlap Analysis`` with the Computing / Free tracks the step table sums.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
from pathlib import Path

from common.collect.torch_ops import StepRange
from common.formats import writers
from common.formats.records import ApiStat, StepTime, Task
from common.intervals import gaps, merge

OUTPUT_SUBDIR = "ASCEND_PROFILER_OUTPUT"
# Thread ids torch_npu gives the Overlap Analysis tracks.
OVERLAP_TIDS = {"Computing": 0, "Communication": 1, "Communication(Not Overlapped)": 2, "Free": 3}


def new_ascend_pt_dir(parent: Path, when: dt.datetime | None = None) -> Path:
    """``<hostname>_<pid>_<17-digit ts>_ascend_pt/ASCEND_PROFILER_OUTPUT`` under ``parent``; returns the run folder."""
    when = when or dt.datetime.now()
    stamp = when.strftime("%Y%m%d%H%M%S") + f"{when.microsecond // 1000:03d}"
    run = parent / f"{socket.gethostname()}_{os.getpid()}_{stamp}_ascend_pt"
    (run / OUTPUT_SUBDIR).mkdir(parents=True)
    return run


def trace_view(tasks: list[Task], ranges: list[StepRange], host_pid: int) -> list[dict]:
    """trace_view.json events: host steps, the measured tasks, and Overlap Analysis tracks."""
    task_pid, overlap_pid = host_pid * 100 + 1, host_pid * 100 + 2
    events = [
        {"name": "process_name", "pid": host_pid, "tid": 0, "ph": "M", "args": {"name": "Python"}},
        {"name": "process_labels", "pid": host_pid, "tid": 0, "ph": "M", "args": {"labels": "CPU"}},
        {"name": "process_name", "pid": overlap_pid, "tid": 0, "ph": "M", "args": {"name": "Overlap Analysis"}},
        {"name": "process_labels", "pid": overlap_pid, "tid": 0, "ph": "M", "args": {"labels": "CPU"}},
    ]
    events += [
        {"name": "thread_name", "pid": overlap_pid, "tid": tid, "ph": "M", "args": {"name": name}}
        for name, tid in OVERLAP_TIDS.items()
    ]
    for r in ranges:
        events.append({
            "ph": "X", "name": f"ProfilerStep#{r.step}", "pid": host_pid, "tid": host_pid, "ts": writers.trace_ts(r.start_us),
            "dur": round(r.end_us - r.start_us, 3), "cat": "cpu_op", "args": {},
        })
        busy = merge([(t.start_us, t.end_us) for t in tasks if t.step_id == r.step])
        for name, spans in (("Computing", busy), ("Free", gaps(busy, r.start_us, r.end_us))):
            events += [
                {"name": name, "pid": overlap_pid, "tid": OVERLAP_TIDS[name], "ts": writers.trace_ts(s),
                 "dur": round(e - s, 3), "ph": "X"}
                for s, e in spans
            ]
    events += writers.timeline_events(tasks, task_pid, "CPU ops (portable)")
    return events


def write_ascend_pt(
    parent: Path,
    tasks: list[Task],
    ranges: list[StepRange],
    steps: list[StepTime],
    api: list[ApiStat],
    profiler_info: dict,
) -> Path:
    """Write one portable ``*_ascend_pt`` folder; returns it."""
    run = new_ascend_pt_dir(parent)
    out = run / OUTPUT_SUBDIR
    writers.write_kernel_details(out / "kernel_details.csv", tasks)
    writers.write_op_statistic(out / "op_statistic.csv", writers.aggregate_op_statistic(tasks))
    writers.write_api_statistic(out / "api_statistic.csv", api)
    writers.write_step_trace_time(out / "step_trace_time.csv", steps)
    writers.write_trace(out / "trace_view.json", trace_view(tasks, ranges, os.getpid()))
    (run / "profiler_info.json").write_text(json.dumps(profiler_info, indent=4) + "\n")
    return run
