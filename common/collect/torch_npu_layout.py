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

import datetime as dt
import json
import os
import socket
from pathlib import Path

from common.collect import torch_ops
from common.collect.torch_ops import COMMUNICATION, StepRange
from common.formats import writers
from common.formats.intervals import gaps, merge
from common.formats.records import ApiStat, StepTime, Task

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
    for r in ranges:
        events.append({
            "ph": "X", "name": f"ProfilerStep#{r.step}", "pid": host_pid, "tid": host_pid, "ts": writers.trace_ts(r.start_us),
            "dur": round(r.end_us - r.start_us, 3), "cat": "cpu_op", "args": {},
        })
        busy = merge([(t.start_us, t.end_us) for t in compute_tasks if t.step_id == r.step])
        comm = merge([
            (max(t.start_us, r.start_us), min(t.end_us, r.end_us)) for t in comm_tasks if t.step_id == r.step
        ])
        tracks = [("Computing", busy), ("Free", gaps(merge(busy + comm), r.start_us, r.end_us))]
        if comm:
            tracks += [("Communication", comm),
                       ("Communication(Not Overlapped)", [g for s, e in comm for g in gaps(busy, s, e)])]
        for name, spans in tracks:
            events += [
                {"name": name, "pid": overlap_pid, "tid": OVERLAP_TIDS[name], "ts": writers.trace_ts(s),
                 "dur": round(e - s, 3), "ph": "X"}
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


def communication_json(tasks: list[Task]) -> dict:
    """``communication.json`` for one rank: ``{"step<N>": {"collective": {"<op>_<N>_<k>@<group>": ...}, "p2p": {}}}``.

    The k-th collective of a step gets the same name on every rank, which is how
    msprof-analyze matches one collective across ranks.
    """
    steps: dict[str, dict] = {}
    counters: dict[int, int] = {}
    for task in sorted((t for t in tasks if t.task_type == COMMUNICATION and t.step_id is not None),
                       key=lambda t: t.start_us):
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
    return steps


def write_ascend_pt(
    parent: Path,
    tasks: list[Task],
    ranges: list[StepRange],
    steps: list[StepTime],
    api: list[ApiStat],
    profiler_info: dict,
    rank: int | None = None,
) -> Path:
    """Write one portable ``*_ascend_pt`` folder (one rank's, when ``rank`` is given); returns it."""
    run = new_ascend_pt_dir(parent)
    out = run / OUTPUT_SUBDIR
    writers.write_kernel_details(out / "kernel_details.csv", tasks)
    writers.write_op_statistic(out / "op_statistic.csv", writers.aggregate_op_statistic(tasks))
    writers.write_api_statistic(out / "api_statistic.csv", api)
    writers.write_step_trace_time(out / "step_trace_time.csv", steps)
    writers.write_trace(out / "trace_view.json", trace_view(tasks, ranges, os.getpid()))
    if rank is None:
        (run / "profiler_info.json").write_text(json.dumps(profiler_info, indent=4) + "\n")
    else:
        info = {**profiler_info, "rank_id": rank}
        (run / f"profiler_info_{rank}.json").write_text(json.dumps(info, indent=4) + "\n")
        (out / "communication.json").write_text(json.dumps(communication_json(tasks), indent=4) + "\n")
    return run


def portable_profiler_info(wait: int, warmup: int, active: int) -> dict:
    """profiler_info.json's ``config`` as torch_npu writes it, for a CPU-only torch.profiler run."""
    import torch

    return {
        "config": {"common_config": {"activities": ["ProfilerActivity.CPU"], "schedule": {
            "wait": wait, "warmup": warmup, "active": active, "repeat": 1, "skip_first": 0}, "record_shapes": True,
            "profile_memory": False, "with_stack": False, "with_flops": False, "with_modules": False}},
        "backend": "portable (torch.profiler on CPU; no NPU, no PMU)",
        "torch_version": torch.__version__,
    }


def write_torch_profile(prof, parent: Path, first_step: int, profiler_info: dict, rank: int | None = None) -> Path:
    """Turn a finished ``torch.profiler.profile`` into a portable ``*_ascend_pt`` folder; returns it.

    ``first_step`` is the number of the first active step (wait + warmup of the schedule).
    """
    trace_start_us = prof.profiler.kineto_results.trace_start_ns() / 1000.0
    roots = torch_ops.nodes_from_events(prof.events())
    tasks = torch_ops.tasks_from_nodes(roots, trace_start_us) + torch_ops.communication_tasks(roots, trace_start_us)
    ranges = torch_ops.step_ranges(roots, trace_start_us, first_step=first_step)
    torch_ops.assign_steps(tasks, ranges)
    tasks = writers.with_wait_times([t for t in tasks if t.task_type != COMMUNICATION]) + sorted(
        (t for t in tasks if t.task_type == COMMUNICATION), key=lambda t: t.start_us)
    steps = torch_ops.step_times(tasks, ranges)
    api = torch_ops.api_statistic(torch_ops.api_calls(roots))
    return write_ascend_pt(parent, sorted(tasks, key=lambda t: t.start_us), ranges, steps, api, profiler_info, rank)
