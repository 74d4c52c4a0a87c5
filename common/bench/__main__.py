"""``python -m common.bench make|run|loop``: generate profiles at real-model scale; measure the lab beside other
tools; ``loop``: where the card command's time goes (common/bench/loop.py).

``run`` prints, in one run, every comparison side by side: a 1,000,000-row op_summary (the lab's
``report`` vs polars alone vs pandas), a 0.53 GB trace_view.json (the lab vs a whole msgspec
decode vs ``msprof-analyze advisor``), a 1,000,000-task ascend_pytorch_profiler.db, and a
64-rank capture (``python -m common cluster`` vs ``msprof-analyze cluster``). Every tool runs
in a child process of its own: wall time of the whole process (start to exit, imports
included), the wall time of its work measured inside it, its CPU time (user + system, all
threads: CPU/wall above 1 means more than one core was used), its peak RSS (the child's
high-water mark, from wait4; this process imports nothing large, so it carries none of its
own) and the totals it reports, which must agree within 0.1%. Figures are printed, never
asserted: they depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from common.environments import compile_lab_code
from common.errors import ArgumentParser, LabError, run_cli

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / "bench" / "out"  # gitignored: generated files are never committed
DEFAULT_ROWS = 1_000_000
DEFAULT_EVENTS = 2_750_000  # about 0.53 GB of trace_view.json
DEFAULT_TASKS = 1_000_000  # tasks in the generated ascend_pytorch_profiler.db
DEFAULT_RANKS = 64
TINY = {"rows": 3_000, "events": 20_000, "tasks": 5_000, "ranks": 4}  # --tiny: the CLI's own check
AGREE_REL = 1e-3  # totals of two tools agree when within 0.1%
MSA_EXE_VAR = "MSPROF_ANALYZE"  # common.collect.msprof_analyze's override; set to nothing to skip the lab's cross-check
MSA_DEFAULT = ROOT / ".nox" / "ecosystem" / "bin" / "msprof-analyze"
KINDS = ("op_summary", "kernel_details", "trace_view", "db", "cluster")


# --- generation (in a child: this process stays small) -----------------------------------------------
def make(out: Path, rows: int, events: int, tasks: int, ranks: int, what: set[str], seed: int = 0) -> dict[str, str]:
    """Write the asked-for profiles under ``out`` (one folder per kind and size); returns where."""
    from common.bench import generate

    written: dict[str, str] = {}
    if "op_summary" in what:
        folder = out / f"op_summary_{rows}"
        paths = generate.write_op_summary(folder, rows, seed)
        written["op_summary"] = str(folder)
        size = sum(p.stat().st_size for p in paths) / 1e6
        print(f"op_summary: {rows:,} rows in {len(paths)} file(s), {size:,.0f} MB under {folder}")
    if "kernel_details" in what:
        path = generate.write_kernel_details(out / f"kernel_details_{rows}", rows, seed)
        written["kernel_details"] = str(path)
        print(f"kernel_details: {rows:,} rows, {path.stat().st_size / 1e6:,.0f} MB: {path}")
    if "trace_view" in what:
        path, expected = generate.write_trace_view(out / f"trace_view_{events}", events, seed)
        expected.write_csv(path.parent / "expected_steps.csv")
        written["trace_view"] = str(path)
        print(f"trace_view: ~{events:,} events, {path.stat().st_size / 1e9:.2f} GB, {expected.height} steps: {path}")
    if "db" in what:
        path, expected = generate.write_profiler_db(out / f"db_{tasks}", tasks, seed)
        expected.write_csv(path.parent / "expected_totals.csv")
        written["db"] = str(path)
        print(f"db: {tasks:,} tasks, {path.stat().st_size / 1e6:,.0f} MB: {path}")
    if "cluster" in what:
        folder = generate.write_cluster(out / f"cluster_{ranks}", ranks, seed=seed)
        written["cluster"] = str(folder)
        print(f"cluster: {ranks} ranks under {folder}")
    return written


# --- what runs inside the children ------------------------------------------------------------------------
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
        (max(abs(got[step][0] - c), abs(got[step][1] - f)) if step in got else float("inf")
         for step, c, f in expected.select("step", "computing_us", "free_us").iter_rows()), default=0.0)
    return {"seconds": seconds, "steps": len(steps), "computing_ms": sum(s.computing_us for s in steps) / 1000,
            "free_ms": sum(s.free_us for s in steps) / 1000,
            "communication_ms": sum(s.communication_us for s in steps) / 1000,
            "expected_computing_ms": float(expected["computing_us"].sum()) / 1000,
            "max_abs_diff_us": worst}


def _lab_db(folder: str) -> dict:
    seconds = _quiet_cli(["report", folder])
    import polars as pl

    from common.formats.datasets import find_datasets

    (ds,) = find_datasets(folder)
    totals = ds.task_totals
    expected = pl.read_csv(ds.db.parent / "expected_totals.csv")
    return {"seconds": seconds, "rows": int(totals["count"].sum()), "total_us": float(totals["total_us"].sum()),
            "expected_rows": int(expected["count"].sum()), "expected_total_us": float(expected["total_us"].sum()),
            "steps": len(ds.steps), "computing_ms": sum(s.computing_us for s in ds.steps) / 1000}


def _lab_cluster(folder: str) -> dict:
    from common.analyze.slow_rank import find_slow_rank, rank_summaries
    from common.formats.cluster import load_cluster

    start = time.perf_counter()
    view = load_cluster(folder)
    summaries = rank_summaries(view)
    slow = find_slow_rank(summaries, view.steps)
    seconds = time.perf_counter() - start
    values = {f"{rank}:{s.step}": [s.computing_us, s.communication_not_overlapped_us, s.free_us]
              for rank, rows in view.steps.items() for s in rows}
    return {"seconds": seconds, "ranks": len(view.ranks), "slow_rank": slow.rank, "values": values,
            "computing_ms": sum(v[0] for v in values.values()) / 1000}


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


def _child(kind: str, target: str) -> int:
    result = MEASURES[kind](target)
    result["hwm_kib"] = _hwm_kib()
    print(json.dumps(result))
    return 0


# --- running and measuring the children -------------------------------------------------------------------
@dataclass
class Run:
    wall_s: float  # the whole process, start to exit
    cpu_s: float  # user + system of the process and its children
    peak_mib: float  # the largest resident set among the process and its children
    result: dict = field(default_factory=dict)  # what it printed as its last JSON line, if any
    output: str = ""

    @property
    def inside_s(self) -> float | None:
        return self.result.get("seconds")


def spawn(argv: list[str], env: dict | None = None, cwd: Path | None = None, timeout: float = 1800) -> Run:
    """Run ``argv`` (no shell) to its end; its wall time, CPU time and peak RSS (wait4), its output."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        deadline = start + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.005)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
    if proc.returncode != 0:
        raise LabError(f"benchmark step failed ({' '.join(map(str, argv[:4]))} ...): exit {proc.returncode}: "
                       f"{text.strip().splitlines()[-1:] if text.strip() else 'no output'}", "see the message above")
    result = {}
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            try:
                result = json.loads(line)
            except json.JSONDecodeError:
                continue
            break
    return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, result, text)


def _python(*args: str) -> list[str]:
    return [sys.executable, *args]


def _lab_runs(repeat: int, command: list[str], kind: str, target: Path, env: dict | None = None
              ) -> tuple[list[Run], list[Run]]:
    """``repeat`` interleaved runs of ``python -m common <command>`` (whole process) and of the lab's
    in-process measurement ``kind`` on ``target``."""
    whole, inside = [], []
    for _ in range(repeat):
        whole.append(spawn(_python("-m", "common", *command), env=env))
        inside.append(spawn(_python("-m", "common.bench", "_child", kind, str(target)), env=env))
    return whole, inside


def _median_run(runs: list[Run]) -> Run:
    """The run with the median whole-process wall time (its other figures with it)."""
    return sorted(runs, key=lambda r: r.wall_s)[len(runs) // 2]


def _agree(a: float | None, b: float | None) -> str:
    if a is None or b is None:
        return "N/A"
    diff = abs(a - b) / max(abs(a), abs(b), 1e-12)
    return f"{100 * diff:.4f}% ({'agree' if diff <= AGREE_REL else 'DIFFER'})"


def _row(name: str, runs: list[Run], total: str, vs: str) -> str:
    r = _median_run(runs)
    inside = f"{r.inside_s:7.2f}" if r.inside_s is not None else "    N/A"
    walls = "/".join(f"{x.wall_s:.2f}" for x in runs)
    return (f"  {name:38s} {r.wall_s:7.2f} {inside} {r.cpu_s / r.wall_s:5.2f} {r.peak_mib:8.0f}  {total:>26s}  {vs:>20s}"
            f"  [{len(runs)} run{'s' if len(runs) > 1 else ''}: {walls}]")


HEADER = (f"  {'':38s} {'whole':>7s} {'inside':>7s} {'CPU/':>5s} {'peak':>8s}  {'totals reported':>26s}  "
          f"{'vs the lab':>20s}\n  {'':38s} {'(s)':>7s} {'(s)':>7s} {'wall':>5s} {'(MiB)':>8s}")


def _tool() -> Path | None:
    given = os.environ.get(MSA_EXE_VAR)
    exe = Path(given) if given else MSA_DEFAULT
    return exe if exe.is_file() and os.access(exe, os.X_OK) else None


def _ensure_tool(install: bool) -> Path | None:
    if _tool() is None and install:
        spawn(_python("-c", "from common.collect.msprof_analyze import ensure_tool; ensure_tool()"), timeout=1800)
    return _tool()


def _ensure(out: Path, kind: str, size: int, sizes: dict) -> Path:
    """The generated profile of ``kind`` (made by a child when missing): its folder or file."""
    where = {"op_summary": out / f"op_summary_{size}", "trace_view": out / f"trace_view_{size}",
             "db": out / f"db_{size}", "cluster": out / f"cluster_{size}"}[kind]
    if not where.is_dir():
        args = ["--rows", str(sizes["rows"]), "--events", str(sizes["events"]), "--tasks", str(sizes["tasks"]),
                "--ranks", str(sizes["ranks"])]
        spawn(_python("-m", "common.bench", "make", "--what", kind, "--out", str(out), *args))
    if kind == "trace_view":
        return next(where.rglob("trace_view.json"))
    if kind == "db":
        return next(where.rglob("ascend_pytorch_profiler_*.db")).parent
    return where


def run(out: Path, repeat: int, sizes: dict, skip: set[str], install: bool) -> int:
    load = os.getloadavg()
    print(f"machine: {platform.node()}, {os.cpu_count()} CPUs, {platform.machine()}, Python "
          f"{platform.python_version()}; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the start")
    print("columns: whole = wall time of the process, start to exit (imports included); inside = wall time of "
          "the work measured inside it;\n CPU/wall = (user + system) / whole (above 1: more than one core); peak = "
          f"largest resident set (wait4). Medians of {repeat} interleaved runs where marked.\n")
    compile_lab_code()  # as pip does for an installed package, and as the nox sessions do
    unwritten = (" (PYTHONDONTWRITEBYTECODE is set here: without this, every run would compile it again)"
                 if os.environ.get("PYTHONDONTWRITEBYTECODE") else "")
    print(f"bytecode: the lab's modules byte-compiled before measuring{unwritten}")
    tool = _ensure_tool(install) if not {"advisor", "msprof-analyze"} & skip else None
    if "csv" not in skip:
        _csv_section(out, repeat, sizes, skip)
    if "trace" not in skip:
        _trace_section(out, repeat, sizes, skip, tool)
    if "db" not in skip:
        _db_section(out, repeat, sizes)
    if "cluster" not in skip:
        _cluster_section(out, repeat, sizes, tool)
    load = os.getloadavg()
    print(f"\nload average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end")
    return 0


def _csv_section(out: Path, repeat: int, sizes: dict, skip: set[str]) -> None:
    folder = _ensure(out, "op_summary", sizes["rows"], sizes)
    size = sum(p.stat().st_size for p in folder.rglob("op_summary_*.csv")) / 1e6
    print(f"1. op_summary, {sizes['rows']:,} rows ({size:,.0f} MB): count, total, min, max per Device_id / OP Type / "
          "Task Type / Input Shapes")
    print(HEADER)
    report, inside, alone, types, base = [], [], [], [], []
    pandas = "pandas" not in skip and spawn(_python("-c", "import importlib.util as u; print(int(bool("
                                                          "u.find_spec('pandas'))))")).output.strip() == "1"
    for _ in range(repeat):
        report.append(spawn(_python("-m", "common", "report", str(folder))))
        inside.append(spawn(_python("-m", "common.bench", "_child", "lab-csv", str(folder))))
        alone.append(spawn(_python("-c", POLARS_ALONE, str(folder))))
        types.append(spawn(_python("-c", POLARS_TYPES, str(folder))))
        if pandas:
            base.append(spawn(_python("-c", PANDAS, str(folder))))
    lab = _median_run(inside).result

    def total(result: dict) -> str:
        return f"{result['rows']:,} tasks, {result['total_us'] / 1e6:,.3f} s"

    print(_row("lab: python -m common report", report, total(lab), "(the same process)"))
    print(_row("lab: the report, in one process", inside, total(lab), "-"))
    for name, runs in (("polars alone: the same totals", alone), ("polars alone: OP Type x Task Type sum", types)):
        got = _median_run(runs).result
        print(_row(name, runs, total(got), _agree(lab["total_us"], got["total_us"])))
    if base:
        print(_row("pandas: read_csv + groupby, same totals", base, total(_median_run(base).result),
                   _agree(lab["total_us"], _median_run(base).result["total_us"])))
    else:
        print("  pandas: N/A (not installed: python -m pip install --group bench)")
    r, a, t = _median_run(report), _median_run(alone), _median_run(types)
    print(f"  report / polars alone (the same totals), whole process: {r.wall_s / a.wall_s:.2f}x the time "
          f"(target <= 1.5x); / polars alone (types only): {r.wall_s / t.wall_s:.2f}x")
    if base:
        pb = _median_run(base)
        print(f"  report vs pandas, whole process: {pb.wall_s / r.wall_s:.1f}x faster (target >= 3x), "
              f"{pb.peak_mib / r.peak_mib:.1f}x leaner in peak RSS (target >= 3x)")
    print(f"  report CPU/wall {r.cpu_s / r.wall_s:.2f} (above 1: both cores used)\n")


def _trace_section(out: Path, repeat: int, sizes: dict, skip: set[str], tool: Path | None) -> None:
    path = _ensure(out, "trace_view", sizes["events"], sizes)
    gb = path.stat().st_size / 1e9
    print(f"2. trace_view.json, {gb:.2f} GB: per-step Computing / Communication / Free")
    print(HEADER)
    folder = path.parent.parent  # the *_ascend_pt folder
    report, inside = _lab_runs(repeat, ["report", str(folder)], "lab-trace", path)
    lab = _median_run(inside).result
    total = f"Computing {lab['computing_ms']:,.3f} ms"
    print(_row("lab: python -m common report", report, total, "(the same process)"))
    print(_row("lab: the step table, in one process", inside, total,
               _agree(lab["computing_ms"], lab["expected_computing_ms"]) + " gen"))
    if "msgspec" not in skip:
        decoded = spawn(_python("-c", MSGSPEC_DECODE, str(path)))
        print(_row("msgspec: decode all, sum Overlap", [decoded], f"Computing {decoded.result['computing_ms']:,.3f} ms",
                   _agree(lab["computing_ms"], decoded.result["computing_ms"])))
    if "advisor" not in skip and tool is not None:
        with tempfile.TemporaryDirectory(prefix="bench_advisor_") as tmp:
            advisor = spawn([str(tool), "advisor", "all", "-d", str(folder), "-l", "en"], cwd=Path(tmp), timeout=3600)
        found = dict(re.findall(r"-- (Computing|Free) Time is ([0-9.]+)ms", advisor.output))
        computing = float(found["Computing"]) if "Computing" in found else None
        print(_row("msprof-analyze advisor all", [advisor],
                   f"Computing {computing:,.3f} ms" if computing is not None else "no Overall Summary",
                   _agree(lab["computing_ms"], computing)))
    elif "advisor" not in skip:
        print("  msprof-analyze advisor: N/A (not installed: run without --no-install)")
    r = _median_run(report)
    print(f"  report: {gb * 1e3 / r.wall_s:,.0f} MB/s whole process (target >= 250 MB/s), peak {r.peak_mib:,.0f} MiB; "
          f"{lab['steps']:,} steps, largest difference from the generator's own sums {lab['max_abs_diff_us']:.3g} us\n")


def _db_section(out: Path, repeat: int, sizes: dict) -> None:
    folder = _ensure(out, "db", sizes["tasks"], sizes)
    db = next(folder.glob("ascend_pytorch_profiler_*.db"))
    print(f"3. ascend_pytorch_profiler.db, {sizes['tasks']:,} tasks ({db.stat().st_size / 1e6:,.0f} MB)")
    print(HEADER)
    report, inside = _lab_runs(repeat, ["report", str(folder)], "lab-db", folder)
    lab = _median_run(inside).result
    total = f"{lab['rows']:,} tasks, {lab['total_us'] / 1e6:,.3f} s"
    print(_row("lab: python -m common report", report, total, "(the same process)"))
    print(_row("lab: the report, in one process", inside, total, "-"))
    print(f"  {'generator (what it wrote)':38s} {'':>7s} {'':>7s} {'':>5s} {'':>8s}  "
          f"{lab['expected_rows']:,} tasks, {lab['expected_total_us'] / 1e6:,.3f} s  "
          f"{_agree(lab['total_us'], lab['expected_total_us']):>20s}")
    print(f"  report: {_median_run(report).wall_s:.2f} s whole process (target <= 2 s); {lab['steps']:,} steps\n")


def _cluster_section(out: Path, repeat: int, sizes: dict, tool: Path | None) -> None:
    folder = _ensure(out, "cluster", sizes["ranks"], sizes)
    print(f"4. cluster: {sizes['ranks']} ranks (per rank and step: Computing, Communication(Not Overlapped), Free)")
    print(HEADER)
    no_tool = {MSA_EXE_VAR: str(folder / "no-msprof-analyze")}  # the lab's view alone, without its cross-check
    report, inside = _lab_runs(repeat, ["cluster", str(folder)], "lab-cluster", folder, env=no_tool)
    lab = _median_run(inside).result
    total = f"Computing {lab['computing_ms']:,.3f} ms"
    print(_row("lab: python -m common cluster", report, total, "(the same process)"))
    print(_row("lab: the cluster view, in one process", inside, total, f"slow rank {lab['slow_rank']}"))
    if tool is None:
        print("  msprof-analyze cluster: N/A (not installed: run without --no-install)\n")
        return
    with tempfile.TemporaryDirectory(prefix="bench_cluster_") as tmp:
        msa = spawn([str(tool), "cluster", "-d", str(folder.resolve()), "-m", "all", "-o", tmp], cwd=Path(tmp),
                    timeout=3600)
        table = Path(tmp) / "cluster_analysis_output" / "cluster_step_trace_time.csv"
        values = {}
        if table.is_file():
            with table.open(newline="", encoding="utf-8-sig") as f:
                for row in csv.DictReader(f):
                    if row.get("Type") == "rank":
                        values[f"{row['Index']}:{row['Step']}"] = [
                            float(row[c]) for c in ("Computing", "Communication(Not Overlapped)", "Free")]
    computing = sum(v[0] for v in values.values()) / 1000 if values else None
    common = values.keys() & lab["values"].keys()
    worst = max((abs(a - b) for k in common for a, b in zip(values[k], lab["values"][k])), default=float("nan"))
    print(_row("msprof-analyze cluster", [msa], f"Computing {computing:,.3f} ms" if computing else "no table",
               _agree(lab["computing_ms"], computing)))
    print(f"  {len(common):,} of {len(lab['values']):,} rank-steps matched, largest difference {worst:.4g} us over "
          f"Computing / Communication(Not Overlapped) / Free\n")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_child"]:
        return _child(argv[1], argv[2])
    parser = ArgumentParser(prog="python -m common.bench", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=ArgumentParser)
    mk = sub.add_parser("make", help="write large profiles in msprof's / torch_npu's exact schema")
    rn = sub.add_parser("run", help="every comparison side by side: CSV, trace, database, cluster")
    lp = sub.add_parser("loop", help="the card command, process by process (whole-process wall time, imports)")
    lp.add_argument("device", nargs="?", default="0", help="device id passed to the modes (default 0)")
    lp.add_argument("--cold", action="store_true", help="with an empty record folder, as after an edit of the model")
    lp.add_argument("--workload", metavar="FILE", help="the modes' --workload (default: TinyMLP)")
    for p in (mk, rn):
        p.add_argument("--rows", type=int, default=DEFAULT_ROWS, help="op_summary / kernel_details rows (1,000,000)")
        p.add_argument("--events", type=int, default=DEFAULT_EVENTS, help="trace_view.json events (2,750,000: 0.53 GB)")
        p.add_argument("--tasks", type=int, default=DEFAULT_TASKS, help="tasks in the database (1,000,000)")
        p.add_argument("--ranks", type=int, default=DEFAULT_RANKS, help="ranks of the cluster capture (64)")
        p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"where (default {DEFAULT_OUT.relative_to(ROOT)})")
    mk.add_argument("--what", default="op_summary,trace_view,db,cluster", help=f"comma-separated: {', '.join(KINDS)}")
    mk.add_argument("--seed", type=int, default=0)
    rn.add_argument("--repeat", type=int, default=3, help="runs of each lab measurement (interleaved; median shown)")
    rn.add_argument("--skip", default="", help="comma-separated: csv, trace, db, cluster, pandas, msgspec, advisor, "
                                               "msprof-analyze")
    rn.add_argument("--no-install", action="store_true",
                    help="do not install msprof-analyze into .nox/ecosystem when it is missing (its rows become N/A)")
    rn.add_argument("--tiny", action="store_true", help="tiny sizes: checks that the benchmark runs, measures nothing")
    args = parser.parse_args(argv)
    if args.command == "loop":
        from common.bench import loop

        workload = ["--workload", str(Path(args.workload).resolve())] if args.workload else []
        return loop.main(args.device, workload, args.cold)
    sizes = dict(TINY) if getattr(args, "tiny", False) else {
        "rows": args.rows, "events": args.events, "tasks": args.tasks, "ranks": args.ranks}
    if min(sizes.values()) < 1 or (args.command == "run" and args.repeat < 1):
        raise LabError("bad arguments: sizes and --repeat must be >= 1", f"see python -m common.bench {args.command} --help")
    if args.command == "make":
        what = {w.strip() for w in args.what.split(",") if w.strip()}
        unknown = what - set(KINDS)
        if unknown:
            raise LabError(f"bad arguments: unknown kind(s) {', '.join(sorted(unknown))}",
                           "see python -m common.bench make --help")
        make(args.out, sizes["rows"], sizes["events"], sizes["tasks"], sizes["ranks"], what, args.seed)
        return 0
    skip = {w.strip() for w in args.skip.split(",") if w.strip()}
    if args.tiny:
        skip |= {"advisor", "msprof-analyze"}
    return run(args.out, args.repeat, sizes, skip, not args.no_install)


if __name__ == "__main__":
    run_cli(main)
