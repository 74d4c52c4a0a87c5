"""The report of ``python -m common.bench run``: one section per comparison (CSV, trace, database,
cluster), each a table of the lab beside the other tools on a generated profile.
"""

from __future__ import annotations

import os
import platform
import re
import tempfile
from pathlib import Path

from common.bench.children import MSGSPEC_DECODE, PANDAS, POLARS_ALONE, POLARS_TYPES
from common.bench.measure import (
    HEADER,
    agree,
    ensure_profile,
    ensure_tool,
    lab_runs,
    median_run,
    python_argv,
    spawn,
    table_row,
)
from common.environments import compile_lab_code


def run(out: Path, repeat: int, sizes: dict, skip: set[str], install: bool) -> int:
    load = os.getloadavg()
    print(
        f"machine: {platform.node()}, {os.cpu_count()} CPUs, {platform.machine()}, Python "
        f"{platform.python_version()}; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the start"
    )
    print(
        "columns: whole = wall time of the process, start to exit (imports included); inside = wall time of "
        "the work measured inside it;\n CPU/wall = (user + system) / whole (above 1: more than one core); peak = "
        f"largest resident set (wait4). Medians of {repeat} interleaved runs where marked.\n"
    )
    compile_lab_code()  # as pip does for an installed package, and as the nox sessions do
    unwritten = (
        " (PYTHONDONTWRITEBYTECODE is set here: without this, every run would compile it again)"
        if os.environ.get("PYTHONDONTWRITEBYTECODE")
        else ""
    )
    print(f"bytecode: the lab's modules byte-compiled before measuring{unwritten}")
    tool = ensure_tool(install) if not {"advisor", "msprof-analyze"} & skip else None
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
    folder = ensure_profile(out, "op_summary", sizes["rows"], sizes)
    size = sum(p.stat().st_size for p in folder.rglob("op_summary_*.csv")) / 1e6
    print(
        f"1. op_summary, {sizes['rows']:,} rows ({size:,.0f} MB): count, total, min, max per Device_id / OP Type / "
        "Task Type / Input Shapes"
    )
    print(HEADER)
    report, inside, alone, types, base = [], [], [], [], []
    pandas = (
        "pandas" not in skip
        and spawn(
            python_argv("-c", "import importlib.util as u; print(int(bool(u.find_spec('pandas'))))")
        ).output.strip()
        == "1"
    )
    for _ in range(repeat):
        report.append(spawn(python_argv("-m", "common", "report", str(folder))))
        inside.append(spawn(python_argv("-m", "common.bench", "_child", "lab-csv", str(folder))))
        alone.append(spawn(python_argv("-c", POLARS_ALONE, str(folder))))
        types.append(spawn(python_argv("-c", POLARS_TYPES, str(folder))))
        if pandas:
            base.append(spawn(python_argv("-c", PANDAS, str(folder))))
    lab = median_run(inside).result

    def total(result: dict) -> str:
        return f"{result['rows']:,} tasks, {result['total_us'] / 1e6:,.3f} s"

    print(table_row("lab: python -m common report", report, total(lab), "(the same process)"))
    print(table_row("lab: the report, in one process", inside, total(lab), "-"))
    for name, runs in (("polars alone: the same totals", alone), ("polars alone: OP Type x Task Type sum", types)):
        got = median_run(runs).result
        print(table_row(name, runs, total(got), agree(lab["total_us"], got["total_us"])))
    if base:
        print(
            table_row(
                "pandas: read_csv + groupby, same totals",
                base,
                total(median_run(base).result),
                agree(lab["total_us"], median_run(base).result["total_us"]),
            )
        )
    else:
        print("  pandas: N/A (not installed: python -m pip install --group bench)")
    r, a, t = median_run(report), median_run(alone), median_run(types)
    print(
        f"  report / polars alone (the same totals), whole process: {r.wall_s / a.wall_s:.2f}x the time "
        f"(target <= 1.5x); / polars alone (types only): {r.wall_s / t.wall_s:.2f}x"
    )
    if base:
        pb = median_run(base)
        print(
            f"  report vs pandas, whole process: {pb.wall_s / r.wall_s:.1f}x faster (target >= 3x), "
            f"{pb.peak_mib / r.peak_mib:.1f}x leaner in peak RSS (target >= 3x)"
        )
    print(f"  report CPU/wall {r.cpu_s / r.wall_s:.2f} (above 1: both cores used)\n")


def _trace_section(out: Path, repeat: int, sizes: dict, skip: set[str], tool: Path | None) -> None:
    path = ensure_profile(out, "trace_view", sizes["events"], sizes)
    gb = path.stat().st_size / 1e9
    print(f"2. trace_view.json, {gb:.2f} GB: per-step Computing / Communication / Free")
    print(HEADER)
    folder = path.parent.parent  # the *_ascend_pt folder
    report, inside = lab_runs(repeat, ["report", str(folder)], "lab-trace", path)
    lab = median_run(inside).result
    total = f"Computing {lab['computing_ms']:,.3f} ms"
    print(table_row("lab: python -m common report", report, total, "(the same process)"))
    print(
        table_row(
            "lab: the step table, in one process",
            inside,
            total,
            agree(lab["computing_ms"], lab["expected_computing_ms"]) + " gen",
        )
    )
    if "msgspec" not in skip:
        decoded = spawn(python_argv("-c", MSGSPEC_DECODE, str(path)))
        print(
            table_row(
                "msgspec: decode all, sum Overlap",
                [decoded],
                f"Computing {decoded.result['computing_ms']:,.3f} ms",
                agree(lab["computing_ms"], decoded.result["computing_ms"]),
            )
        )
    if "advisor" not in skip and tool is not None:
        with tempfile.TemporaryDirectory(prefix="bench_advisor_") as tmp:
            advisor = spawn([str(tool), "advisor", "all", "-d", str(folder), "-l", "en"], cwd=Path(tmp), timeout=3600)
        found = dict(re.findall(r"-- (Computing|Free) Time is ([0-9.]+)ms", advisor.output))
        computing = float(found["Computing"]) if "Computing" in found else None
        print(
            table_row(
                "msprof-analyze advisor all",
                [advisor],
                f"Computing {computing:,.3f} ms" if computing is not None else "no Overall Summary",
                agree(lab["computing_ms"], computing),
            )
        )
    elif "advisor" not in skip:
        print("  msprof-analyze advisor: N/A (not installed: run without --no-install)")
    r = median_run(report)
    print(
        f"  report: {gb * 1e3 / r.wall_s:,.0f} MB/s whole process (target >= 250 MB/s), peak {r.peak_mib:,.0f} MiB; "
        f"{lab['steps']:,} steps, largest difference from the generator's own sums {lab['max_abs_diff_us']:.3g} us\n"
    )


def _db_section(out: Path, repeat: int, sizes: dict) -> None:
    folder = ensure_profile(out, "db", sizes["tasks"], sizes)
    db = next(folder.glob("ascend_pytorch_profiler_*.db"))
    print(f"3. ascend_pytorch_profiler.db, {sizes['tasks']:,} tasks ({db.stat().st_size / 1e6:,.0f} MB)")
    print(HEADER)
    report, inside = lab_runs(repeat, ["report", str(folder)], "lab-db", folder)
    lab = median_run(inside).result
    total = f"{lab['rows']:,} tasks, {lab['total_us'] / 1e6:,.3f} s"
    print(table_row("lab: python -m common report", report, total, "(the same process)"))
    print(table_row("lab: the report, in one process", inside, total, "-"))
    print(
        f"  {'generator (what it wrote)':38s} {'':>7s} {'':>7s} {'':>5s} {'':>8s}  "
        f"{lab['expected_rows']:,} tasks, {lab['expected_total_us'] / 1e6:,.3f} s  "
        f"{agree(lab['total_us'], lab['expected_total_us']):>20s}"
    )
    print(f"  report: {median_run(report).wall_s:.2f} s whole process (target <= 2 s); {lab['steps']:,} steps\n")


def _cluster_section(out: Path, repeat: int, sizes: dict, tool: Path | None) -> None:
    from common.bench import cluster_sizes

    print("4. ", end="")
    cluster_sizes.run(out, sizes["ranks"], repeat, sizes, tool)
    print()
