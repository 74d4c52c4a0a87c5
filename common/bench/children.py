"""What runs inside each measured child of ``python -m common.bench run``: the lab's own measurements
(``python -m common.bench _child <kind> <target>``) and the other tools' baselines, as scripts.

Each child prints one JSON line last: the seconds its work took inside it, what it totalled, and
its peak RSS, which the parent compares (common/bench/measure.py).
"""

from __future__ import annotations

import json
import time
from pathlib import Path


def _hwm_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _quiet_cli(argv: list[str]) -> float:
    """``python -m common <argv>`` in this process, its output discarded; the seconds it took."""
    import contextlib
    import io

    from common.cli import commands

    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        commands.main(argv)
    return time.perf_counter() - start


def _lab_csv(folder: str) -> dict:
    seconds = _quiet_cli(["report", folder])
    from common.formats.datasets import find_datasets

    (ds,) = find_datasets(folder)
    totals = ds.task_totals
    return {"seconds": seconds, "rows": int(totals["count"].sum()), "total_us": float(totals["total_us"].sum())}


def _lab_trace(path: str) -> dict:
    from common.formats import overlap, readers

    start = time.perf_counter()
    steps = overlap.overlap_step_times(readers.read_overlap(path))
    seconds = time.perf_counter() - start
    import polars as pl

    expected = pl.read_csv(Path(path).parent / "expected_steps.csv")
    got = {s.step: (s.computing_us, s.free_us) for s in steps}
    worst = max(
        (
            max(abs(got[step][0] - c), abs(got[step][1] - f)) if step in got else float("inf")
            for step, c, f in expected.select("step", "computing_us", "free_us").iter_rows()
        ),
        default=0.0,
    )
    return {
        "seconds": seconds,
        "steps": len(steps),
        "computing_ms": sum(s.computing_us for s in steps) / 1000,
        "free_ms": sum(s.free_us for s in steps) / 1000,
        "communication_ms": sum(s.communication_us for s in steps) / 1000,
        "expected_computing_ms": float(expected["computing_us"].sum()) / 1000,
        "max_abs_diff_us": worst,
    }


def _lab_db(folder: str) -> dict:
    seconds = _quiet_cli(["report", folder])
    import polars as pl

    from common.formats.datasets import find_datasets

    (ds,) = find_datasets(folder)
    totals = ds.task_totals
    expected = pl.read_csv(ds.db.parent / "expected_totals.csv")
    return {
        "seconds": seconds,
        "rows": int(totals["count"].sum()),
        "total_us": float(totals["total_us"].sum()),
        "expected_rows": int(expected["count"].sum()),
        "expected_total_us": float(expected["total_us"].sum()),
        "steps": len(ds.steps),
        "computing_ms": sum(s.computing_us for s in ds.steps) / 1000,
    }


def _lab_cluster(folder: str) -> dict:
    from common.analyze.slow_rank import find_slow_rank, rank_summaries
    from common.formats.cluster import load_cluster

    start = time.perf_counter()
    view = load_cluster(folder)
    summaries = rank_summaries(view)
    slow = find_slow_rank(summaries, view.steps)
    seconds = time.perf_counter() - start
    values = {
        f"{rank}:{s.step}": [s.computing_us, s.communication_not_overlapped_us, s.free_us]
        for rank, rows in view.steps.items()
        for s in rows
    }
    return {
        "seconds": seconds,
        "ranks": len(view.ranks),
        "slow_rank": slow.rank,
        "values": values,
        "computing_ms": sum(v[0] for v in values.values()) / 1000,
    }


MEASURES = {"lab-csv": _lab_csv, "lab-trace": _lab_trace, "lab-db": _lab_db, "lab-cluster": _lab_cluster}

# Baselines as their users would write them: one script each, run as `python -c <script> <path>`.
# The CSV baselines compute the totals the report shows: per Device_id, OP Type, Task Type and Input
# Shapes, the count, sum, min and max of Task Duration(us). POLARS_TYPES is the smallest grouping
# (OP Type x Task Type, sums only), printed for reference.
POLARS_ALONE = """
import json, sys, time
import polars as pl
t = time.perf_counter()
d = pl.col("Task Duration(us)").cast(pl.Float64)
totals = (pl.scan_csv(sys.argv[1] + "/**/op_summary_*.csv", infer_schema=False)
          .group_by("Device_id", "OP Type", "Task Type", "Input Shapes")
          .agg(pl.len().alias("count"), d.sum().alias("total_us"), d.min().alias("min_us"), d.max().alias("max_us"))
          .collect())
print(json.dumps({"seconds": time.perf_counter() - t, "rows": int(totals["count"].sum()),
                  "total_us": float(totals["total_us"].sum())}))
"""
POLARS_TYPES = """
import json, sys, time
import polars as pl
t = time.perf_counter()
totals = (pl.scan_csv(sys.argv[1] + "/**/op_summary_*.csv", infer_schema=False)
          .group_by("OP Type", "Task Type")
          .agg(pl.len().alias("count"), pl.col("Task Duration(us)").cast(pl.Float64).sum().alias("total_us"))
          .collect())
print(json.dumps({"seconds": time.perf_counter() - t, "rows": int(totals["count"].sum()),
                  "total_us": float(totals["total_us"].sum())}))
"""
PANDAS = """
import glob, json, sys, time
import pandas as pd
t = time.perf_counter()
files = sorted(glob.glob(sys.argv[1] + "/**/op_summary_*.csv", recursive=True))
frame = pd.concat([pd.read_csv(f) for f in files]) if len(files) > 1 else pd.read_csv(files[0])
totals = (frame.groupby(["Device_id", "OP Type", "Task Type", "Input Shapes"], dropna=False)["Task Duration(us)"]
          .agg(["count", "sum", "min", "max"]))
print(json.dumps({"seconds": time.perf_counter() - t, "rows": int(totals["count"].sum()),
                  "total_us": float(totals["sum"].sum())}))
"""
MSGSPEC_DECODE = """
import json, sys, time
import msgspec
t = time.perf_counter()
with open(sys.argv[1], "rb") as f:
    events = msgspec.json.decode(f.read())
overlap = {e["pid"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"
           and (e.get("args") or {}).get("name") == "Overlap Analysis"}
sums = {}
for e in events:
    if e.get("ph") == "X" and e.get("pid") in overlap:
        sums[e["name"]] = sums.get(e["name"], 0.0) + float(e.get("dur") or 0)
print(json.dumps({"seconds": time.perf_counter() - t, "computing_ms": sums.get("Computing", 0.0) / 1000,
                  "free_ms": sums.get("Free", 0.0) / 1000, "hwm_kib": int([l for l in open("/proc/self/status")
                  if l.startswith("VmHWM")][0].split()[1])}))
"""


def child(kind: str, target: str) -> int:
    result = MEASURES[kind](target)
    result["hwm_kib"] = _hwm_kib()
    print(json.dumps(result))
    return 0
