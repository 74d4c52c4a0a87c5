"""``python -m common.bench make|run|loop``: generate profiles at real-model scale; measure the lab beside other
tools; ``loop``: where the card command's time goes (common/bench/loop.py).

``run`` prints, in one run, every comparison side by side: a 1,000,000-row op_summary (the lab's
``report`` vs polars alone vs pandas), a 0.53 GB trace_view.json (the lab vs a whole msgspec
decode vs ``msprof-analyze advisor``), a 1,000,000-task ascend_pytorch_profiler.db, and a
64-rank capture (``python -m common cluster`` vs ``msprof-analyze cluster``; ``--ranks 64,256,1024,4096``: one
table over those sizes, the ms per rank and the ratio to msprof-analyze at each). Every tool runs
in a child process of its own: wall time of the whole process (start to exit, imports
included), the wall time of its work measured inside it, its CPU time (user + system, all
threads: CPU/wall above 1 means more than one core was used), its peak RSS (the child's
high-water mark, from wait4; this process imports nothing large, so it carries none of its
own) and the totals it reports, which must agree within 0.1%. Figures are printed, never
asserted: they depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from common.bench import children, sections
from common.bench.measure import DEFAULT_RANK_TASKS, ROOT, cluster_folder
from common.errors import ArgumentParser, LabError, run_cli

DEFAULT_OUT = ROOT / "bench" / "out"  # gitignored: generated files are never committed
DEFAULT_ROWS = 1_000_000
DEFAULT_EVENTS = 2_750_000  # about 0.53 GB of trace_view.json
DEFAULT_TASKS = 1_000_000  # tasks in the generated ascend_pytorch_profiler.db
DEFAULT_RANKS = (64,)
SCALE_RANKS = (64, 256, 1024, 4096, 16384)  # python -m common.bench cluster
SCALE_RANK_TASKS = 20
TINY = {"rows": 3_000, "events": 20_000, "tasks": 5_000, "ranks": (4,)}  # --tiny: the CLI's own check
KINDS = ("op_summary", "kernel_details", "trace_view", "db", "cluster")


# --- generation (in a child: this process stays small) -----------------------------------------------
def make(
    out: Path,
    rows: int,
    events: int,
    tasks: int,
    ranks: tuple[int, ...],
    what: set[str],
    seed: int = 0,
    rank_tasks: int = DEFAULT_RANK_TASKS,
) -> dict[str, str]:
    """Write the asked-for profiles under ``out`` (one folder per kind and size); returns where."""
    from common.bench import cluster_capture, generate

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
        for n in ranks:
            folder = cluster_capture.write_cluster(
                cluster_folder(out, n, rank_tasks), n, tasks_per_step=rank_tasks, seed=seed
            )
            written[f"cluster_{n}"] = str(folder)
            print(f"cluster: {n} ranks under {folder}")
    return written


def _rank_counts(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give rank counts, comma-separated (e.g. 64,256)") from None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_child"]:
        return children.child(argv[1], argv[2])
    parser = ArgumentParser(
        prog="python -m common.bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=ArgumentParser)
    mk = sub.add_parser("make", help="write large profiles in msprof's / torch_npu's exact schema")
    rn = sub.add_parser("run", help="every comparison side by side: CSV, trace, database, cluster")
    lp = sub.add_parser("loop", help="the card command, process by process (whole-process wall time, imports)")
    cl = sub.add_parser(
        "cluster",
        help="python -m common cluster vs msprof-analyze cluster, 64 to 16,384 ranks, warm and cold page cache",
    )
    cl.add_argument(
        "--ranks",
        type=_rank_counts,
        default=SCALE_RANKS,
        help=f"rank counts, comma-separated ({','.join(map(str, SCALE_RANKS))})",
    )
    cl.add_argument(
        "--rank-tasks",
        type=int,
        default=SCALE_RANK_TASKS,
        help=f"tasks per step in each generated rank ({SCALE_RANK_TASKS}: the views read only the step and "
        "communication files; a 16,384-rank capture is then 6 GB)",
    )
    cl.add_argument("--repeat", type=int, default=3, help="rounds per cache state, the two tools in turns (3)")
    cl.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"where (default {DEFAULT_OUT.relative_to(ROOT)})")
    cl.add_argument(
        "--no-install",
        action="store_true",
        help="do not install msprof-analyze into .nox/ecosystem when it is missing (its rows become N/A)",
    )
    lp.add_argument("device", nargs="?", default="0", help="device id passed to the modes (default 0)")
    lp.add_argument("--cold", action="store_true", help="with an empty record folder, as after an edit of the model")
    lp.add_argument("--workload", metavar="FILE", help="the modes' --workload (default: TinyMLP)")
    for p in (mk, rn):
        p.add_argument("--rows", type=int, default=DEFAULT_ROWS, help="op_summary / kernel_details rows (1,000,000)")
        p.add_argument("--events", type=int, default=DEFAULT_EVENTS, help="trace_view.json events (2,750,000: 0.53 GB)")
        p.add_argument("--tasks", type=int, default=DEFAULT_TASKS, help="tasks in the database (1,000,000)")
        p.add_argument(
            "--ranks",
            type=_rank_counts,
            default=DEFAULT_RANKS,
            help="ranks of the cluster capture; several, comma-separated, give one table (64; e.g. 64,256,1024,4096)",
        )
        p.add_argument(
            "--rank-tasks",
            type=int,
            default=DEFAULT_RANK_TASKS,
            help=f"tasks per step in each generated rank ({DEFAULT_RANK_TASKS}; fewer keep a 16,384-rank "
            "capture's files small: the cluster views read step and communication files only)",
        )
        p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"where (default {DEFAULT_OUT.relative_to(ROOT)})")
    mk.add_argument("--what", default="op_summary,trace_view,db,cluster", help=f"comma-separated: {', '.join(KINDS)}")
    mk.add_argument("--seed", type=int, default=0)
    rn.add_argument("--repeat", type=int, default=3, help="runs of each lab measurement (interleaved; median shown)")
    rn.add_argument(
        "--skip", default="", help="comma-separated: csv, trace, db, cluster, pandas, msgspec, advisor, msprof-analyze"
    )
    rn.add_argument(
        "--no-install",
        action="store_true",
        help="do not install msprof-analyze into .nox/ecosystem when it is missing (its rows become N/A)",
    )
    rn.add_argument("--tiny", action="store_true", help="tiny sizes: checks that the benchmark runs, measures nothing")
    args = parser.parse_args(argv)
    if args.command == "cluster":
        from common.bench import cluster_sizes
        from common.bench.measure import ensure_tool

        if args.repeat < 1 or args.rank_tasks < 1 or min(args.ranks) < 1:
            raise LabError(
                "bad arguments: --ranks, --rank-tasks and --repeat must be >= 1",
                "see python -m common.bench cluster --help",
            )
        cluster_sizes.run(
            args.out,
            args.ranks,
            args.repeat,
            {"rank_tasks": args.rank_tasks, "rows": 1, "events": 1, "tasks": 1, "ranks": args.ranks},
            ensure_tool(not args.no_install),
        )
        return 0
    if args.command == "loop":
        from common.bench import loop

        workload = ["--workload", str(Path(args.workload).resolve())] if args.workload else []
        return loop.main(args.device, workload, args.cold)
    sizes = (
        dict(TINY)
        if getattr(args, "tiny", False)
        else {
            "rows": args.rows,
            "events": args.events,
            "tasks": args.tasks,
            "ranks": args.ranks,
            "rank_tasks": args.rank_tasks,
        }
    )
    if min(min(v) if isinstance(v, tuple) else v for v in sizes.values()) < 1 or (
        args.command == "run" and args.repeat < 1
    ):
        raise LabError(
            "bad arguments: sizes and --repeat must be >= 1", f"see python -m common.bench {args.command} --help"
        )
    if args.command == "make":
        what = {w.strip() for w in args.what.split(",") if w.strip()}
        unknown = what - set(KINDS)
        if unknown:
            raise LabError(
                f"bad arguments: unknown kind(s) {', '.join(sorted(unknown))}", "see python -m common.bench make --help"
            )
        make(
            args.out,
            sizes["rows"],
            sizes["events"],
            sizes["tasks"],
            sizes["ranks"],
            what,
            args.seed,
            sizes.get("rank_tasks", DEFAULT_RANK_TASKS),
        )
        return 0
    skip = {w.strip() for w in args.skip.split(",") if w.strip()}
    if args.tiny:
        skip |= {"advisor", "msprof-analyze"}
    return sections.run(args.out, args.repeat, sizes, skip, not args.no_install)


if __name__ == "__main__":
    run_cli(main)
