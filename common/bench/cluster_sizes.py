"""``python -m common.bench cluster``: the cluster view against ``msprof-analyze cluster`` from 64 to 16,384 ranks.

At each size, on the bench generator's capture (:mod:`common.bench.cluster_capture`), the command a user
runs — ``python -m common cluster DIR``, its defaults — and ``msprof-analyze cluster -d DIR -m all``
run in turns (the order alternating from one round to the next), ``repeat`` rounds with a warm page
cache (every file the tools read is read first) and as many with a cold one (``posix_fadvise``
DONTNEED on every file of the capture first: the kernel drops its cached pages). Each figure is a
whole process, start to exit: the median and the range of the runs. The lab's own peak memory and
its workers' are sampled from /proc while it runs; the totals both report are held against each
other (every rank-step's Computing, Communication(Not Overlapped) and Free). Figures are printed,
never asserted.
"""

from __future__ import annotations

import csv
import os
import statistics
import tempfile
from pathlib import Path

from common.bench.measure import DEFAULT_RANK_TASKS, Run, ensure_profile, python_argv, spawn

COLUMNS = ("Computing", "Communication(Not Overlapped)", "Free")
READ_BY_BOTH = (
    "profiler_info_*.json",
    "profiler_metadata.json",
    "step_trace_time.csv",
    "communication.json",
    "communication_matrix.json",
)


def warm(folder: Path) -> None:
    """Read every file both tools read, so that both find them in the page cache."""
    for pattern in READ_BY_BOTH:
        for path in folder.rglob(pattern):
            path.read_bytes()


def cold(folder: Path) -> None:
    """Ask the kernel to drop the cached pages of every file of the capture (no privileges needed)."""
    for directory, _, files in os.walk(folder):
        for name in files:
            fd = os.open(os.path.join(directory, name), os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def _span(runs: list[Run]) -> str:
    walls = sorted(r.wall_s for r in runs)
    return f"{statistics.median(walls):7.2f} [{walls[0]:.2f}-{walls[-1]:.2f}]"


def _msa_values(table: Path) -> dict[str, list[float]]:
    values = {}
    if table.is_file():
        with table.open(newline="", encoding="utf-8-sig") as f:
            for row in csv.DictReader(f):
                if row.get("Type") == "rank":
                    values[f"{row['Index']}:{row['Step']}"] = [float(row[c]) for c in COLUMNS]
    return values


def _mib(value: float | None) -> str:
    return "N/A" if value is None else f"{value:.0f}"


def size_rows(out: Path, ranks: int, repeat: int, sizes: dict, tool: Path | None) -> dict:
    """One size: ``repeat`` interleaved rounds per cache state; prints its rows, returns the medians."""
    folder = ensure_profile(out, "cluster", ranks, sizes)
    runs: dict[tuple[str, str], list[Run]] = {}
    msa_values: dict[str, list[float]] = {}
    lab_argv = python_argv("-m", "common", "cluster", str(folder))
    with tempfile.TemporaryDirectory(prefix="bench_cluster_") as tmp:
        msa_argv = [str(tool), "cluster", "-d", str(folder.resolve()), "-m", "all", "-o", tmp] if tool else None
        for state, prepare in (("warm", warm), ("cold", cold)):
            for i in range(repeat):
                order = [("lab", lab_argv), ("msprof-analyze", msa_argv)]
                for name, argv in order if i % 2 == 0 else order[::-1]:
                    if argv is None:
                        continue
                    prepare(folder)
                    runs.setdefault((name, state), []).append(spawn(argv, cwd=Path(tmp), timeout=7200))
        if tool:
            msa_values = _msa_values(Path(tmp) / "cluster_analysis_output" / "cluster_step_trace_time.csv")
    lab = spawn(python_argv("-m", "common.bench", "_child", "lab-cluster", str(folder))).result
    common = msa_values.keys() & lab["values"].keys()
    worst = max((abs(a - b) for k in common for a, b in zip(msa_values[k], lab["values"][k])), default=float("nan"))
    agree = (
        f"{len(common):,} of {len(lab['values']):,} rank-steps, largest difference {worst:.4g} us"
        if tool
        else "N/A (msprof-analyze not installed)"
    )
    lines = max(r.output.count("\n") for r in runs[("lab", "warm")])
    medians = {}
    for state in ("warm", "cold"):
        mine = runs[("lab", state)]
        theirs = runs.get(("msprof-analyze", state))
        medians[state] = (
            statistics.median(r.wall_s for r in mine),
            statistics.median(r.wall_s for r in theirs) if theirs else None,
        )
        lab_s, msa_s = medians[state]
        if theirs:
            clear = max(r.wall_s for r in mine) < min(r.wall_s for r in theirs)
            verdict = f"{lab_s / msa_s:.2f}x its time, " + (
                "ahead in every run"
                if clear
                else "ahead in the median, the ranges overlap"
                if lab_s < msa_s
                else "BEHIND"
            )
        else:
            verdict = "N/A"
        own = max((r.own_peak_mib or 0) for r in mine)
        workers = max((r.child_peak_mib or 0) for r in mine)
        msa_peak = _mib(max(r.peak_mib for r in theirs)) if theirs else "N/A"
        print(
            f"  {ranks:>6}  {state:4s}  {_span(mine)}  {_span(theirs) if theirs else '    N/A':>22s}  "
            f"{verdict:42s}  {own:6.0f} / {workers:<6.0f}  {msa_peak:>6s}"
        )
    print(f"          totals: {agree}; the lab's terminal summary: {lines} lines")
    return {
        "ranks": ranks,
        **{f"{s}_lab_s": medians[s][0] for s in medians},
        **{f"{s}_msa_s": medians[s][1] for s in medians},
    }


def run(out: Path, ranks: tuple[int, ...], repeat: int, sizes: dict, tool: Path | None) -> list[dict]:
    print(
        f"cluster at scale: `python -m common cluster DIR` (defaults) vs `msprof-analyze cluster -d DIR -m all`; "
        f"generated ranks of 20 steps, {sizes.get('rank_tasks', DEFAULT_RANK_TASKS)} tasks a step;\n {repeat} rounds per cache state, "
        "the two tools in turns (the order alternating); whole process, start to exit: median [range] (s);\n"
        " peak (MiB): the lab's own process / its largest worker, and msprof-analyze's (with its children)"
    )
    print(
        f"  {'ranks':>6}  cache  {'lab':>22s}  {'msprof-analyze':>22s}  {'the lab takes':42s}  "
        f"{'lab peak':>15s}  {'msa peak':>6s}"
    )
    return [size_rows(out, n, repeat, sizes, tool) for n in ranks]
