"""The bench's multi-rank capture: what ``python -m common cluster`` and ``msprof-analyze cluster`` read.

``ranks`` torch_npu rank folders with the files of a real capture, the op mix of :mod:`common.bench.generate`'s
single-device profiles, one all-reduce per step that every rank leaves together, and one slow rank.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from common.bench.generate import KINDS
from common.bench.measure import DEFAULT_RANK_TASKS

CLUSTER_SLOW_RANK_FACTOR = 1.4  # the last rank's compute takes this much longer: the rank the others wait for


def write_cluster(
    out: Path, ranks: int, steps: int = 20, tasks_per_step: int = DEFAULT_RANK_TASKS, seed: int = 0
) -> Path:
    """``ranks`` torch_npu rank folders (``*_ascend_pt/`` with ``profiler_info_{rank}.json``) under ``out``.

    Each rank: kernel_details.csv, op_statistic.csv, step_trace_time.csv, trace_view.json and
    communication.json, written by the same layout code as the portable backend's DDP ranks, communication.json
    then completed with the fields a real capture has (:func:`_complete_communication`). Every
    step ends with one all-reduce that all ranks leave together: a rank waits in it for the slowest
    one (the last rank, whose compute is :data:`CLUSTER_SLOW_RANK_FACTOR` longer). The ranks are
    written by a process pool (one process per core); each rank's jitter has a seed of its own, so
    the output does not depend on which process wrote it.
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    rng = np.random.default_rng(seed)
    compute = [k for k in KINDS if k.task_type != "COMMUNICATION"]
    shares = np.array([k.share for k in compute]) / sum(k.share for k in compute)
    kinds = rng.choice(len(compute), size=(steps, tasks_per_step), p=shares)
    base = rng.lognormal(np.log([[compute[k].mean_us for k in row] for row in kinds]), 0.25)
    # the step's busy time of every rank, to know when the slowest one reaches each all-reduce
    busy_max = np.max(
        [(_rank_durations(base, r, ranks, seed) + CLUSTER_GAP_US).sum(axis=1) for r in range(ranks)], axis=0
    )
    jobs = [(out, r, ranks, seed, kinds, base, busy_max) for r in range(ranks)]
    # spawned, not forked: a fork of a process that runs threads (polars', a test runner's) can hang in a lock
    with ProcessPoolExecutor(
        max_workers=min(os.cpu_count() or 1, ranks), mp_context=multiprocessing.get_context("spawn")
    ) as pool:
        list(pool.map(_write_cluster_rank, jobs, chunksize=max(1, ranks // 64)))
    return out


CLUSTER_GAP_US = 15.0  # host gap after each task
CLUSTER_ALLREDUCE_US = 300.0
CLUSTER_ALLREDUCE_MB = 4.718592  # the gradient bucket each all-reduce moves (HCCS), ~15.7 GB/s in 300 us
BANDWIDTH_LINKS = ("RDMA", "HCCS", "PCIE", "SDMA", "SIO")  # the links torch_npu lists for every op


def _rank_durations(base: np.ndarray, r: int, ranks: int, seed: int) -> np.ndarray:
    jitter = np.random.default_rng([seed, r]).normal(1.0, 0.01, size=base.shape).clip(0.9, 1.1)
    return base * jitter * (CLUSTER_SLOW_RANK_FACTOR if r == ranks - 1 else 1.0)


def _write_cluster_rank(job: tuple) -> None:
    from common.collect import torch_npu_layout, torch_ops
    from common.formats.records import Task

    out, r, ranks, seed, kinds, base, busy_max = job
    steps = len(kinds)
    info = {
        "config": {
            "common_config": {
                "activities": ["ProfilerActivity.CPU", "ProfilerActivity.NPU"],
                "schedule": {"wait": 0, "warmup": 1, "active": steps, "repeat": 1, "skip_first": 0},
            }
        },
        "start_info": None,
        "end_info": None,
        "torch_npu_version": None,
        "cann_version": None,
        "launch_id": f"bench-{seed}",
    }
    compute = [k for k in KINDS if k.task_type != "COMMUNICATION"]
    durations = _rank_durations(base, r, ranks, seed)
    tasks, ranges, start = [], [], 0.0
    for s in range(steps):
        step_start, t = start, start + 20.0
        for k, d in zip(kinds[s], durations[s]):
            kind = compute[k]
            tasks.append(
                Task(
                    kind.op_name,
                    kind.op_type,
                    kind.task_type,
                    round(t, 3),
                    round(float(d), 3),
                    0.0,
                    str(r % 8),
                    kind.block_dim,
                    kind.inputs[0],
                    kind.inputs[1],
                    kind.outputs[0],
                    kind.outputs[1],
                    step_id=s + 1,
                )
            )
            t += float(d) + CLUSTER_GAP_US
        # every rank leaves the all-reduce together: the slowest rank's arrival plus the transfer
        leave = step_start + 20.0 + float(busy_max[s]) + CLUSTER_ALLREDUCE_US
        tasks.append(
            Task(
                "hcom_allReduce_",
                "hcom_allReduce_",
                torch_ops.COMMUNICATION,
                round(t, 3),
                round(leave - t, 3),
                0.0,
                str(r % 8),
                0,
                step_id=s + 1,
            )
        )
        start = leave + 50.0
        ranges.append(torch_ops.StepRange(s + 1, step_start, start))
    step_rows = torch_ops.step_times(tasks, ranges, device_id=str(r % 8))
    folder = out / f"rank{r:0{max(2, len(str(ranks - 1)))}d}"
    folder.mkdir(parents=True, exist_ok=True)
    torch_npu_layout.write_ascend_pt(folder, tasks, ranges, step_rows, [], info, rank=r)
    _complete_communication(next(folder.glob("*_ascend_pt")) / "ASCEND_PROFILER_OUTPUT" / "communication.json")


def _complete_communication(path: Path) -> None:
    """communication.json with every field a real capture's has (the layout code writes only what the portable
    backend measures: the start and the elapsed time). Each all-reduce moves its bucket in
    :data:`CLUSTER_ALLREDUCE_US`; the rest of its time is waiting for the slowest rank, all of it before the first
    transfer (so Synchronization = Wait, Idle = 0); the ratios as torch_npu computes them, Wait / (Wait + Transit)."""
    data = json.loads(path.read_text())
    transit_ms = CLUSTER_ALLREDUCE_US / 1000.0
    for step in data.values():
        ops = {name: op for name, op in step["collective"].items() if name != "Total Op Info"}
        for op in ops.values():
            times = op["Communication Time Info"]
            wait_ms = max(0.0, times["Elapse Time(ms)"] - transit_ms)
            ratio = round(wait_ms / (wait_ms + transit_ms), 4)
            times.update(
                {
                    "Transit Time(ms)": transit_ms,
                    "Wait Time(ms)": round(wait_ms, 6),
                    "Synchronization Time(ms)": round(wait_ms, 6),
                    "Idle Time(ms)": 0.0,
                    "Wait Time Ratio": ratio,
                    "Synchronization Time Ratio": ratio,
                }
            )
            op["Communication Bandwidth Info"] = _bandwidth(CLUSTER_ALLREDUCE_MB, transit_ms, 1)
        total = step["collective"]["Total Op Info"]["Communication Time Info"]
        for field in ("Transit Time(ms)", "Wait Time(ms)", "Synchronization Time(ms)", "Idle Time(ms)"):
            total[field] = round(sum(op["Communication Time Info"][field] for op in ops.values()), 6)
        for field in ("Wait Time Ratio", "Synchronization Time Ratio"):
            waited = total["Wait Time(ms)"]
            total[field] = round(waited / (waited + total["Transit Time(ms)"]), 4) if waited else 0.0
        step["collective"]["Total Op Info"]["Communication Bandwidth Info"] = _bandwidth(
            CLUSTER_ALLREDUCE_MB * len(ops), transit_ms * len(ops), len(ops)
        )
    path.write_text(json.dumps(data, indent=4) + "\n")


def _bandwidth(size_mb: float, transit_ms: float, count: int) -> dict:
    """Communication Bandwidth Info as torch_npu writes it: every link, HCCS carrying the bucket."""
    empty = {
        "Transit Size(MB)": 0,
        "Transit Time(ms)": 0,
        "Bandwidth(GB/s)": 0,
        "Large Packet Ratio": 0,
        "Size Distribution": {},
    }
    info = {link: dict(empty) for link in BANDWIDTH_LINKS}
    info["HCCS"] = {
        "Transit Size(MB)": round(size_mb, 6),
        "Transit Time(ms)": round(transit_ms, 6),
        "Bandwidth(GB/s)": round(size_mb / transit_ms, 4),
        "Large Packet Ratio": 0.0,
        "Size Distribution": {f"{CLUSTER_ALLREDUCE_MB:g}": [count, round(transit_ms, 6)]},
    }
    return info
