"""``python -m common.bench make|run``: generate large profiles; time the lab against a pandas baseline.

Every measurement runs in a child process of its own, so each gets its own peak RSS (the
child's VmHWM, imports included) and its own wall time (the work only, imports
excluded). Figures are printed, never asserted: they depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common.errors import ArgumentParser, LabError, run_cli

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / "bench" / "out"  # gitignored: generated files are never committed
DEFAULT_ROWS = 1_000_000
DEFAULT_EVENTS = 5_500_000  # about 1.1 GB of trace_view.json
SCALING_ROWS = (100_000, 1_000_000, 10_000_000)


def make(out: Path, rows: int, events: int, what: set[str], seed: int = 0) -> dict[str, str]:
    """Write the asked-for files under ``out`` (one folder per kind); returns what was written."""
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
    return written


# --- measurements, each in its own child process ----------------------------------------------------
def _lab_totals(folder: str) -> dict:
    from common.formats.datasets import find_datasets

    start = time.perf_counter()
    (ds,) = find_datasets(folder)
    rows = ds.task_count
    return {"seconds": time.perf_counter() - start, "rows": rows}


def _lab_report(folder: str) -> dict:
    from common.cli.reports import directory_report

    start = time.perf_counter()
    text, _ = directory_report(folder)
    return {"seconds": time.perf_counter() - start, "lines": len(text.splitlines())}


def _pandas(folder: str) -> dict:
    import pandas as pd

    files = sorted(Path(folder).rglob("op_summary_*.csv"))
    start = time.perf_counter()
    frame = pd.concat([pd.read_csv(f) for f in files]) if len(files) > 1 else pd.read_csv(files[0])
    totals = frame.groupby(["OP Type", "Task Type"])["Task Duration(us)"].agg(["count", "sum", "min", "max"])
    return {"seconds": time.perf_counter() - start, "rows": int(totals["count"].sum())}


def _trace(path: str) -> dict:
    import polars as pl

    from common.formats import overlap, readers

    start = time.perf_counter()
    steps = overlap.overlap_step_times(readers.read_overlap(path))
    seconds = time.perf_counter() - start
    expected = pl.read_csv(Path(path).parent / "expected_steps.csv")
    got = {s.step: (s.computing_us, s.free_us) for s in steps}
    worst = max(
        max(abs(got[step][0] - c), abs(got[step][1] - f)) if step in got else float("inf")
        for step, c, f in expected.select("step", "computing_us", "free_us").iter_rows()
    )
    return {"seconds": seconds, "steps": len(steps), "expected_steps": expected.height, "max_abs_diff_us": worst}


MEASURES = {"lab-totals": _lab_totals, "lab-report": _lab_report, "pandas": _pandas, "trace": _trace}


def measure(kind: str, target: str) -> dict:
    """Run one measurement in a fresh child; its result plus the child's peak RSS (MiB)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "common.bench", "_child", kind, target], env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise LabError(f"benchmark step {kind} on {target} failed: {proc.stderr.strip().splitlines()[-1:]}",
                       "see the message above")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["peak_mib"] = result.pop("maxrss_kib") / 1024
    return result


def _peak_rss_kib() -> int:
    """This process's peak RSS since its exec: VmHWM of its own address space.

    ``ru_maxrss`` is not used where VmHWM exists: Linux carries the parent's high-water mark
    across fork + exec into it, so a child of a large parent would report the parent's peak.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _child(kind: str, target: str) -> int:
    result = MEASURES[kind](target)
    result["maxrss_kib"] = _peak_rss_kib()
    print(json.dumps(result))
    return 0


def _median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def run(out: Path, repeat: int, skip_trace: bool, skip_scaling: bool, events: int) -> int:
    print(f"machine: {platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"load average {os.getloadavg()[0]:.2f} at start")
    folder = out / f"op_summary_{DEFAULT_ROWS}"
    if not folder.is_dir():
        make(out, DEFAULT_ROWS, events, {"op_summary"})
    print(f"\n1. op_summary, {DEFAULT_ROWS:,} rows: lab vs pandas.read_csv + groupby, {repeat} runs each, interleaved")
    lab, report, base = [], [], []
    for _ in range(repeat):
        lab.append(measure("lab-totals", str(folder)))
        report.append(measure("lab-report", str(folder)))
        base.append(measure("pandas", str(folder)))
    for name, runs in (("lab aggregation (Dataset.task_totals)", lab), ("lab report (python -m common report)", report),
                       ("pandas read_csv + groupby", base)):
        walls = ", ".join(f"{r['seconds']:.2f}" for r in runs)
        print(f"   {name:40s} wall {_median(runs, 'seconds'):6.2f} s (runs {walls})  peak RSS "
              f"{_median(runs, 'peak_mib'):7.0f} MiB")
    for name, runs in (("aggregation", lab), ("report", report)):
        speed = _median(base, "seconds") / _median(runs, "seconds")
        memory = _median(runs, "peak_mib") / _median(base, "peak_mib")
        print(f"   {name}: {speed:.1f}x faster than pandas, {memory:.2f} of its peak memory "
              f"(targets: >= 3x, <= 0.33, aggregation <= 1.5 s)")

    if not skip_trace:
        trace = out / f"trace_view_{events}"
        path = next(trace.rglob("trace_view.json"), None) if trace.is_dir() else None
        if path is None:
            path = Path(make(out, DEFAULT_ROWS, events, {"trace_view"})["trace_view"])
        result = measure("trace", str(path))
        print(f"\n2. trace_view.json, {path.stat().st_size / 1e9:.2f} GB: per-step Computing/Free in "
              f"{result['seconds']:.1f} s, peak RSS {result['peak_mib']:.0f} MiB (targets: <= 15 s, <= 1536 MiB); "
              f"{result['steps']} steps (generator wrote {result['expected_steps']}), largest difference from "
              f"the generator's own sums {result['max_abs_diff_us']:.3g} us")

    if not skip_scaling:
        print("\n3. scaling of the lab aggregation (op_summary sliced at 1,000,000 rows as msprof does)")
        previous = None
        for rows in SCALING_ROWS:
            folder = out / f"op_summary_{rows}"
            if not folder.is_dir():
                make(out, rows, events, {"op_summary"})
            result = measure("lab-totals", str(folder))
            per_row = 1e9 * result["seconds"] / rows
            growth = f", x{result['seconds'] / previous:.1f} for x10 rows" if previous else ""
            print(f"   {rows:>11,} rows: {result['seconds']:7.2f} s, {per_row:6.0f} ns/row, peak RSS "
                  f"{result['peak_mib']:5.0f} MiB{growth}")
            previous = result["seconds"]
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_child"]:
        return _child(argv[1], argv[2])
    parser = ArgumentParser(prog="python -m common.bench", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=ArgumentParser)
    mk = sub.add_parser("make", help="write large profiles in msprof's / torch_npu's exact schema")
    mk.add_argument("--rows", type=int, default=DEFAULT_ROWS, help="op_summary / kernel_details rows (default 1e6)")
    mk.add_argument("--events", type=int, default=DEFAULT_EVENTS, help="trace_view.json events (default 5,500,000, ~1.1 GB)")
    mk.add_argument("--what", default="op_summary,kernel_details,trace_view", help="comma-separated kinds")
    mk.add_argument("--seed", type=int, default=0)
    mk.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"where (default {DEFAULT_OUT.relative_to(ROOT)})")
    rn = sub.add_parser("run", help="the benchmark: lab vs pandas, the 1 GB trace, scaling 1e5..1e7 rows")
    rn.add_argument("--out", type=Path, default=DEFAULT_OUT)
    rn.add_argument("--repeat", type=int, default=3)
    rn.add_argument("--events", type=int, default=DEFAULT_EVENTS)
    rn.add_argument("--skip-trace", action="store_true")
    rn.add_argument("--skip-scaling", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "make":
        what = {w.strip() for w in args.what.split(",")}
        unknown = what - {"op_summary", "kernel_details", "trace_view"}
        if unknown or args.rows < 1 or args.events < 1:
            raise LabError(f"bad arguments: {', '.join(sorted(unknown)) or 'rows and events must be >= 1'}",
                           "see python -m common.bench make --help")
        make(args.out, args.rows, args.events, what, args.seed)
        return 0
    return run(args.out, args.repeat, args.skip_trace, args.skip_scaling, args.events)


if __name__ == "__main__":
    run_cli(main)
