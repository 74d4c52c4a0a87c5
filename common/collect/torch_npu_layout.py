"""The torch_npu.profiler output layout, written by the portable backend from torch.profiler data.

``{worker}_{YYYYmmddHHMMSSfff}_ascend_pt/`` with ``profiler_info.json`` and
``ASCEND_PROFILER_OUTPUT/{kernel_details,op_statistic,api_statistic,step_trace_time}.csv``
plus ``trace_view.json``. The trace has torch_npu's process structure: a host process with
the steps and the ops Python called, a process for the measured tasks (labelled CPU, never
an NPU), and ``Overlap Analysis`` with the Computing / Free tracks the step table sums.

One rank of a torch.distributed job (``rank=`` given) writes what torch_npu writes per rank:
``profiler_info_{rank}.json`` (with ``rank_id``), a ``Communication`` process and the
Communication / Communication(Not Overlapped) tracks in the trace, and ``communication.json``
in HCCL's schema with the fields the portable backend measures (see :func:`communication_json`).
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from common.collect import torch_ops
from common.collect.torch_ops import COMMUNICATION, StepRange
from common.formats import writers
from common.formats.intervals import gaps, merge
from common.formats.records import ApiStat, StepTime, Task, TxRange

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


def trace_view(tasks: list[Task], ranges: list[StepRange], host_pid: int, user: list[TxRange] = ()) -> list[dict]:
    """trace_view.json events: host steps and the program's own ranges (``record_function``, the optimizer's
    ``Optimizer.step#<name>.step``), the measured tasks, and Overlap Analysis tracks."""
    task_pid, overlap_pid, comm_pid = host_pid * 100 + 1, host_pid * 100 + 2, host_pid * 100 + 3
    compute_tasks = [t for t in tasks if t.task_type != COMMUNICATION]
    comm_tasks = [t for t in tasks if t.task_type == COMMUNICATION]
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
    events += [
        {
            "ph": "X",
            "name": r.message,
            "pid": host_pid,
            "tid": host_pid,
            "ts": writers.trace_ts(r.start_us),
            "dur": round(r.end_us - r.start_us, 3),
            "cat": "user_annotation",
            "args": {},
        }
        for r in user
    ]
    for r in ranges:
        events.append(
            {
                "ph": "X",
                "name": f"ProfilerStep#{r.step}",
                "pid": host_pid,
                "tid": host_pid,
                "ts": writers.trace_ts(r.start_us),
                "dur": round(r.end_us - r.start_us, 3),
                "cat": "cpu_op",
                "args": {},
            }
        )
        busy = merge([(t.start_us, t.end_us) for t in compute_tasks if t.step_id == r.step])
        comm = merge(
            [(max(t.start_us, r.start_us), min(t.end_us, r.end_us)) for t in comm_tasks if t.step_id == r.step]
        )
        tracks = [("Computing", busy), ("Free", gaps(merge(busy + comm), r.start_us, r.end_us))]
        if comm:
            tracks += [
                ("Communication", comm),
                ("Communication(Not Overlapped)", [g for s, e in comm for g in gaps(busy, s, e)]),
            ]
        for name, spans in tracks:
            events += [
                {
                    "name": name,
                    "pid": overlap_pid,
                    "tid": OVERLAP_TIDS[name],
                    "ts": writers.trace_ts(s),
                    "dur": round(e - s, 3),
                    "ph": "X",
                }
                for s, e in spans
            ]
    events += writers.timeline_events(compute_tasks, task_pid, "CPU ops (portable)")
    if comm_tasks:
        events += writers.timeline_events(comm_tasks, comm_pid, "Communication")
    return events


# HCCL's per-op record. Measured on the portable backend: when the collective started and how
# long it took (transfer and waiting for peers together). Not measurable there, so absent: the
# split into Transit / Wait / Synchronization / Idle time, and any per-link bandwidth (HCCS,
# RDMA/RoCE, PCIE, SDMA, SIO): gloo moves the bytes over loopback TCP.
COMM_GROUP = "world"


TOTAL_OP_INFO = "Total Op Info"  # torch_npu's per-step summary entry inside "collective": not a collective


def communication_json(tasks: list[Task]) -> dict:
    """``communication.json`` for one rank: ``{"step<N>": {"collective": {"<op>_<N>_<k>@<group>": ...,
    "Total Op Info": ...}, "p2p": {}}}``.

    The k-th collective of a step gets the same name on every rank, which is how
    msprof-analyze matches one collective across ranks. As torch_npu does (its communication
    parser's ``compute_total_info``), each step's collectives are summed into a ``Total Op Info``
    entry: every time field but the start timestamp, so here the elapsed time only.
    """
    steps: dict[str, dict] = {}
    counters: dict[int, int] = {}
    for task in sorted(
        (t for t in tasks if t.task_type == COMMUNICATION and t.step_id is not None), key=lambda t: t.start_us
    ):
        k = counters.get(task.step_id, 0)
        counters[task.step_id] = k + 1
        name = f"{task.op_name.replace(':', '_')}_{task.step_id}_{k}@{COMM_GROUP}"
        step = steps.setdefault(f"step{task.step_id}", {"collective": {}, "p2p": {}})
        step["collective"][name] = {
            "Communication Time Info": {
                "Start Timestamp(us)": round(task.start_us, 3),
                "Elapse Time(ms)": round(task.duration_us / 1000.0, 6),
            },
            "Communication Bandwidth Info": {},
        }
    for step in steps.values():
        ops = step["collective"].values()
        step["collective"][TOTAL_OP_INFO] = {
            "Communication Time Info": {
                "Elapse Time(ms)": round(sum(op["Communication Time Info"]["Elapse Time(ms)"] for op in ops), 6)
            },
            "Communication Bandwidth Info": {},
        }
    return steps


def write_ascend_pt(
    parent: Path,
    tasks: list[Task],
    ranges: list[StepRange],
    steps: list[StepTime],
    api: list[ApiStat],
    profiler_info: dict,
    rank: int | None = None,
    user: list[TxRange] = (),
) -> Path:
    """Write one portable ``*_ascend_pt`` folder (one rank's, when ``rank`` is given); returns it."""
    run = new_ascend_pt_dir(parent)
    out = run / OUTPUT_SUBDIR
    writers.write_kernel_details(out / "kernel_details.csv", tasks)
    writers.write_op_statistic(out / "op_statistic.csv", writers.aggregate_op_statistic(tasks))
    writers.write_api_statistic(out / "api_statistic.csv", api)
    writers.write_step_trace_time(out / "step_trace_time.csv", steps)
    writers.write_trace(out / "trace_view.json", trace_view(tasks, ranges, os.getpid(), user))
    if rank is None:
        (run / "profiler_info.json").write_text(json.dumps(profiler_info, indent=4) + "\n")
    else:
        info = {**profiler_info, "rank_id": str(rank)}  # a string, as torch_npu writes it (from RANK)
        (run / f"profiler_info_{rank}.json").write_text(json.dumps(info, indent=4) + "\n")
        (out / "communication.json").write_text(json.dumps(communication_json(tasks), indent=4) + "\n")
    return run


def portable_profiler_info(wait: int, warmup: int, active: int) -> dict:
    """profiler_info.json as torch_npu writes it, for a CPU-only torch.profiler run.

    The keys are torch_npu's (``profiler_interface.py``); what only an NPU run can fill stays null:
    ``start_info`` / ``end_info`` (the device's system counter), ``torch_npu_version`` and
    ``cann_version`` (neither is installed). ``config.experimental_config`` is left out: there is no
    torch_npu configuration, and a null there stops msprof-analyze's overall summary.
    """
    import torch

    return {
        "config": {
            "common_config": {
                "activities": ["ProfilerActivity.CPU"],
                "schedule": {"wait": wait, "warmup": warmup, "active": active, "repeat": 1, "skip_first": 0},
                "record_shapes": True,
                "profile_memory": True,
                "with_stack": False,
                "with_flops": False,
                "with_modules": False,
            }
        },
        "start_info": None,
        "end_info": None,
        "torch_npu_version": None,
        "cann_version": None,
        "backend": "portable (torch.profiler on CPU; no NPU, no PMU)",
        "torch_version": torch.__version__,
    }


def write_op_tree(
    roots: list[torch_ops.OpNode],
    trace_start_us: float,
    allocations: list[Allocation],
    parent: Path,
    first_step: int,
    profiler_info: dict,
    rank: int | None = None,
) -> Path:
    """A profile's op tree (times in µs from ``trace_start_us``) and allocator calls -> a portable
    ``*_ascend_pt`` folder; returns it. ``first_step`` is the number of the first active step (wait +
    warmup of the schedule). The reader is :mod:`common.collect.torch_trace` (torch.profiler's trace)."""
    tasks = torch_ops.tasks_from_nodes(roots, trace_start_us) + torch_ops.communication_tasks(roots, trace_start_us)
    ranges = torch_ops.step_ranges(roots, trace_start_us, first_step=first_step)
    torch_ops.assign_steps(tasks, ranges)
    tasks = writers.with_wait_times([t for t in tasks if t.task_type != COMMUNICATION]) + sorted(
        (t for t in tasks if t.task_type == COMMUNICATION), key=lambda t: t.start_us
    )
    steps = torch_ops.step_times(tasks, ranges)
    api = torch_ops.api_statistic(torch_ops.api_calls(roots))
    run = write_ascend_pt(
        parent,
        sorted(tasks, key=lambda t: t.start_us),
        ranges,
        steps,
        api,
        profiler_info,
        rank,
        torch_ops.user_ranges(roots, trace_start_us),
    )
    write_memory_files(run / OUTPUT_SUBDIR, allocations)
    return run


# --- memory (profile_memory=True): memory_record.csv and operator_memory.csv ---------------------------
MEMORY_RECORD_HEADER = [
    "Component",
    "Timestamp(us)",
    "Total Allocated(MB)",
    "Total Reserved(MB)",
    "Total Active(MB)",
    "Stream Ptr",
    "Device Type",
]
OPERATOR_MEMORY_HEADER = [
    "Name",
    "Size(KB)",
    "Allocation Time(us)",
    "Release Time(us)",
    "Active Release Time(us)",
    "Duration(us)",
    "Active Duration(us)",
    "Allocation Total Allocated(MB)",
    "Allocation Total Reserved(MB)",
    "Allocation Total Active(MB)",
    "Release Total Allocated(MB)",
    "Release Total Reserved(MB)",
    "Release Total Active(MB)",
    "Stream Ptr",
    "Device Type",
]
MEMORY_COMPONENT = "PTA"  # torch_npu's name for the PyTorch allocator's records
_MB = float(1 << 20)


@dataclass(frozen=True)
class Allocation:
    """One allocator event of torch.profiler (profile_memory=True): bytes > 0 allocates, < 0 frees."""

    ts_us: float
    ptr: int
    nbytes: int
    total_allocated: int
    total_reserved: int | None  # None: the allocator keeps no cache (the CPU's)
    device: str  # "CPU", "NPU:0" ...
    op: str | None  # the innermost op that made the call


def _cell(value: float | int | None, ts: bool = False) -> str:
    if value is None:
        return ""
    return f"{value:.3f}\t" if ts else repr(float(value)) if isinstance(value, float) else str(value)


def write_memory_files(out: Path, events: list[Allocation]) -> list[Path]:
    """memory_record.csv (the allocator's totals after every event) and operator_memory.csv (one row per
    allocation an op made, paired with its release by address), in torch_npu's columns.

    What torch.profiler does not measure stays empty, as torch_npu leaves it: Total Active and
    Stream Ptr always, Total Reserved on the CPU (its allocator keeps no cache). On the CPU the
    totals count what was allocated while the profiler recorded (the weights, made before, are
    not in them). An allocation
    made before the profile started is released without a row; one still held at the end has
    no release. Nothing is written when the profile has no allocator events.
    """
    if not events:
        return []
    record, operators, open_by_ptr = [], [], {}
    for e in events:
        reserved = None if e.total_reserved is None else e.total_reserved / _MB
        record.append(
            [
                MEMORY_COMPONENT,
                _cell(e.ts_us, ts=True),
                _cell(e.total_allocated / _MB),
                _cell(reserved),
                "",
                "",
                e.device,
            ]
        )
        if e.nbytes > 0:
            open_by_ptr[e.ptr] = row = {
                "Name": e.op,
                "Size(KB)": e.nbytes / 1024.0,
                "Allocation Time(us)": e.ts_us,
                "Allocation Total Allocated(MB)": e.total_allocated / _MB,
                "Allocation Total Reserved(MB)": reserved,
                "Device Type": e.device,
            }
            operators.append(row)
        elif (row := open_by_ptr.pop(e.ptr, None)) is not None:
            row.update(
                {
                    "Release Time(us)": e.ts_us,
                    "Duration(us)": e.ts_us - row["Allocation Time(us)"],
                    "Release Total Allocated(MB)": e.total_allocated / _MB,
                    "Release Total Reserved(MB)": reserved,
                }
            )
    paths = [out / "memory_record.csv", out / "operator_memory.csv"]
    with paths[0].open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(MEMORY_RECORD_HEADER)
        w.writerows(record)
    with paths[1].open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(OPERATOR_MEMORY_HEADER)
        for row in operators:
            if row["Name"] is None:  # an allocation outside any op: memory_record has it, no op to name
                continue
            w.writerow(
                [
                    row["Name"]
                    if c == "Name"
                    else row["Device Type"]
                    if c == "Device Type"
                    else _cell(row.get(c), ts=c.endswith("Time(us)") or c == "Duration(us)")
                    for c in OPERATOR_MEMORY_HEADER
                ]
            )
    return paths
