"""``python -m common <command>``: the lab's tools for any output directory.

report <dir>     top ops, op families, per-forward counts, step table, bottlenecks, integrity checks;
                 writes <dir>/report.md and report.html (a lab run's: rebuilt with the checks it recorded);
                 exit 1 when an integrity check fails (the files of an export disagree)
agree [dirs]     the four modes of one run side by side, and the cross-mode verdicts
compare <b> <c>  per-op and total deltas, baseline vs candidate (medians over repeated runs), and the step view
                 (per sample when the batches differ: --samples A B); exit 1 on a regression beyond --threshold
                 and the runs' noise; --json
(report, compare, baseline and cluster also read what a copied lesson writes off the NPU: torch.profiler traces,
 one or one per rank, ONNX Runtime's onnxruntime_profile_*.json, the kernel twin's timings CSV)
baseline save|check NAME <dir>
                 keep a run's step and per-op summary under a name (baselines/NAME.json), then judge a later
                 run against it as compare does: exit 1 on a regression beyond the threshold and the noise
cluster <dir>    per-rank Computing / Communication / Free of a multi-rank run, the slow rank and why
workload [file]  load a workload file and run its model once, as every mode will: one line if it is broken
precision [dev]  every op's output of each path (torch, 03's variants) against the fp32 reference of the same op:
                 the first op out of tolerance; writes precision_out/report.html; exit 1 when a path names one
                 (--cross-check: the torch fp16 table against msprobe's compare of the same paths)
profile --out DIR -- program [args]
                 profile any program as a black box: msprof on an NPU, else the portable launcher (torch's ops
                 of every Python process that imports torch), msprof's layout in DIR; then report DIR
advise <dir>     every msprof-analyze advisor rule on a capture: what fired (the ops, sizes, counts), what ran
                 clean, what could not run and why; the fix pair of each finding (--json, --out DIR)
backend          print which backend this machine gets and why
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from common.cli import advise as advise_p
from common.cli import profile as profile_p
from common.errors import ArgumentParser


EXIT_DAMAGED = 3  # report: a file of the capture was damaged and left out; the rest was reported
MAX_DAMAGED = 16  # files left out before the report gives up (a capture this broken is not worth reading)
DEFAULT_THRESHOLD_PCT = 10.0  # compare: percent slower that counts as a regression


def check_threshold(pct: float) -> None:
    """compare's and baseline's --threshold: a percentage in (0, 1000)."""
    from common.errors import LabError

    if not 0 < pct < 1000:
        raise LabError(f"--threshold {pct:g} is not a percentage in (0, 1000)", "e.g. --threshold 10")


def _damaged_file(err, datasets) -> object:
    """The file of ``datasets`` that ``err`` (a reader's LabError, which starts with the path) is about, when
    the report can go on without it: not a database, and not the task file of a capture without a step table."""
    for ds in datasets:
        if ds.is_db:
            continue
        for path in ds.all_files():
            if err.what.startswith((f"{path}:", f"{path} ")):
                steps = ds.has("step_trace_time") or ds.has("trace_view")
                return path if steps or path not in ds.files(ds.task_file) else None
    return None


def _report(args: argparse.Namespace) -> int:
    from common.cli.captures import readable, report_folder

    out = _out_dir(args.out) if args.out else report_folder(args.dir)  # before the work: a bad --out stops here
    with readable(args.dir) as source:  # a copied lesson's profile: read through the harness's conversion
        return _report_of(
            argparse.Namespace(**{**vars(args), "dir": source}), out, None if source == args.dir else args.dir
        )


def _report_of(args: argparse.Namespace, out: str, shown: str | None) -> int:
    from common.errors import LabError
    from common.formats.datasets import find_datasets
    from common.formats.rundir import RUN_INFO, read_run_info
    from common.modes.report_files import own_integrity, write_own_report, write_report_files
    from common.modes.reports import directory_report
    from common.render.text import render_text, render_verdicts
    from common.verdict import from_records

    # A lab run records its checks in run_info.json: its report.md / report.html are rebuilt with them. A folder
    # whose run recorded none (an older run, a run of several ranks) keeps its own report: this one goes beside it.
    info = read_run_info(Path(args.dir)) if (Path(args.dir) / RUN_INFO).is_file() else None
    recorded = from_records(info.get("checks")) if info else []
    rebuilt = bool(info and "checks" in info)
    name = "capture_report" if info and not rebuilt and not args.out else "report"
    if rebuilt and info.get("report_body"):  # a mode that renders its own report text (03's variant table)
        checked = own_integrity(Path(args.dir))
        body = str(info["report_body"])
        print(body, render_verdicts(recorded), sep="\n")
        text_lines, written = write_own_report(Path(args.dir), body, recorded, checked, _made(out))
        print(text_lines, *written, sep="\n")
        return 1 if any(not v.ok for v in checked.integrity) else 0
    notes = [str(n) for n in info.get("report_notes", [])] if rebuilt else []
    warnings = [str(w) for w in info.get("disturbed", [])] if rebuilt else []
    damaged: dict = {}  # a damaged text file is left out and the report made again from the others
    while True:
        datasets = [ds.without(damaged) for ds in find_datasets(args.dir)]
        lost = [f"DAMAGED, left out: {why}" for why in damaged.values()]
        try:
            report, integrity = directory_report(
                args.dir,
                recorded,
                soc=args.soc,
                datasets=datasets,
                warnings=warnings,
                name=shown,
                notes=notes,
                damaged=lost,
            )
            break
        except LabError as err:
            path = _damaged_file(err, datasets)
            if path is None or path in damaged or len(damaged) >= MAX_DAMAGED:
                raise
            damaged[path] = str(err)
    print(render_text(report))
    if rebuilt:
        print(f"checks: as the run recorded them in run_info.json ({info.get('start')}); the figures read again now")
    elif info:
        print(
            "note: this run recorded no checks in run_info.json (an older run, or one of several ranks), so its "
            f"own report.md stays as it is; this report is {name}.md beside it"
        )
    print(*write_report_files(_made(out), report, name), sep="\n")
    failed = [v for v in integrity if not v.ok]
    if failed:
        print(
            f"{len(failed)} integrity check(s) FAILED: the files of an export disagree (edited, cut short or "
            "mixed with another export); the numbers above are not trustworthy",
            file=sys.stderr,
        )
    if damaged:
        print(
            f"{len(damaged)} damaged file(s) left out ({', '.join(p.name for p in damaged)}): the report is "
            f"from the other files; exit {EXIT_DAMAGED}",
            file=sys.stderr,
        )
        return EXIT_DAMAGED
    return 1 if failed else 0


def _agree(args: argparse.Namespace) -> int:
    from pathlib import Path

    from common.analyze import cross_mode
    from common.cli.agree import default_dirs, load_runs, load_sweep, modes_not_in_run, workload_of
    from common.modes.report_files import write_agree_outputs
    from common.formats.rundir import REPO_ROOT, check_output_dir
    from common.render.agree import agree_report
    from common.render.text import render_text

    out = check_output_dir(Path(args.out) if args.out else REPO_ROOT / "agree_out")  # before the work
    dirs = [Path(d) for d in args.dirs] or default_dirs()
    if args.run_id:
        missing = modes_not_in_run(dirs, args.run_id)
        if missing:  # e.g. `nox -s pytorch`: one mode is not a cross-mode run
            print(
                f"agree: not run — mode {', '.join(missing)} did not run in this invocation; the cross-mode "
                "verdict needs all four (nox -s cmdline ascendc pyacl pytorch -- 0), or `nox -s agree` compares "
                "the latest outputs as they are"
            )
            return 0
    runs, failed, notes = load_runs(dirs, allow_mixed_runs=args.allow_mixed_runs)
    # the workload 01, 03 and 04 ran (one, checked by load_runs): its EXPECT, its reference outputs, computed here
    workload = workload_of(runs).expected(fp32="03" in runs)
    verdicts = cross_mode.verdicts(runs, workload, failed)
    notes = [cross_mode.workload_line(workload), *notes]
    if failed:
        notes.append(f"note: mode {', '.join(sorted(failed))} failed; the checks that need it are left out")
    info = next(iter(runs.values())).info if runs else {}
    line = (
        f"backend: {str(info['backend']).upper()} | run {str(info.get('run_id'))[:8]} | host {info.get('host')} | "
        f"modes started {min(r.info.get('start') or '' for r in runs.values())} .. "
        f"{max(r.info.get('start') or '' for r in runs.values())}"
    )
    cols = cross_mode.columns(runs, workload)
    report = agree_report(cols, verdicts, notes, line, cross_mode.chart_data(runs, load_sweep()))
    print(render_text(report))
    print("\n".join(write_agree_outputs(out, report)))
    return 0 if all(v.ok for v in verdicts) else 1


def _compare(args: argparse.Namespace) -> int:
    from pathlib import Path

    import json

    from common.analyze.compare import compare, comparison_json
    from common.analyze.checks import check_regressions
    from common.cli.captures import readable
    from common.formats.run_ops import load_side
    from common.errors import LabError
    from common.render.compare import comparison_report
    from common.render.text import render_text

    check_threshold(args.threshold)
    samples = None
    if args.samples is not None:
        if not all(n > 0 for n in args.samples):
            raise LabError(
                f"--samples {args.samples[0]} {args.samples[1]}: samples per step must be >= 1",
                "e.g. --samples 1 64 (the baseline's batch, then the candidate's)",
            )
        samples = tuple(args.samples)
    with readable(args.baseline) as base, readable(args.candidate) as cand:
        result = compare(load_side(base), load_side(cand), args.threshold, samples)
    verdict = check_regressions(result)
    if args.json:
        print(json.dumps(comparison_json(result, verdict), indent=1))
        return 0 if verdict.ok else 1
    print(render_text(comparison_report(result, args.baseline, args.candidate, verdict)))
    if Path(args.baseline).resolve() == Path(args.candidate).resolve():
        print("note: the baseline and the candidate are the same folder, so nothing could differ")
    return 0 if verdict.ok else 1


BASELINE_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}"


def _baseline(args: argparse.Namespace) -> int:
    import json
    import re

    from common.analyze.compare import compare
    from common.analyze.checks import check_regressions
    from common.cli.captures import readable
    from common.errors import LabError
    from common.formats.run_ops import load_side, side_from_json, side_to_json
    from common.render.compare import comparison_report
    from common.render.text import render_text

    if not re.fullmatch(BASELINE_NAME, args.name):
        raise LabError(
            f"baseline name {args.name!r} is not letters, digits, '.', '_' or '-' (up to 100)",
            "e.g. python -m common baseline save main-tinymlp 04_pyTorch/prof_out",
        )
    check_threshold(args.threshold)
    path = Path(args.store) / f"{args.name}.json"
    if args.action == "save":
        if path.exists() and not args.replace:
            raise LabError(
                f"{path} exists: a baseline of that name is kept already",
                "choose another name, or add --replace to overwrite it",
            )
        with readable(args.dir) as source:
            side = load_side(source)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(side_to_json(side), indent=1) + "\n")
        steps = sum(len(r.steps) for r in side)
        print(
            f"baseline {args.name}: {len(side)} run(s), {len(side[0].ops)} op keys, {steps} steps from {args.dir} "
            f"-> {path}"
        )
        return 0
    if not path.is_file():
        raise LabError(
            f"no baseline {args.name!r} in {args.store}/",
            f"save one first: python -m common baseline save {args.name} <dir>",
        )
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise LabError(f"{path}: not readable as JSON ({err})", "save the baseline again") from None
    base = side_from_json(data, str(path))
    with readable(args.dir) as source:
        result = compare(base, load_side(source), args.threshold)
    verdict = check_regressions(result)
    print(render_text(comparison_report(result, f"baseline {args.name} ({path})", args.dir, verdict)))
    return 0 if verdict.ok else 1


def _out_dir(path: str) -> Path:
    """``--out``: a folder for the report files, checked before the work: a new one, or one the lab made before;
    any other is refused (the lab writes only into folders it owns). Made when the files are written
    (:func:`_made`): a command that fails on its input leaves no empty folder behind."""
    from common.formats.rundir import check_output_dir

    return check_output_dir(path)


def _made(out: Path | str) -> Path:
    """``out`` (from :func:`_out_dir`, or an existing folder beside a capture), created and marked as the lab's
    when it does not exist yet."""
    from common.formats.rundir import prepare_output_dir

    return Path(out) if Path(out).exists() else prepare_output_dir(out)


def _cluster(args: argparse.Namespace) -> int:
    from common.cli.captures import readable
    from common.cli.scheduler import dask_executor, scheduler_address

    out = _out_dir(args.out) if args.out else None  # before the work: a bad --out stops here
    # the copied DDP lesson's per-rank traces: read through the conversion
    with readable(args.dir) as source, dask_executor(scheduler_address(args.scheduler)) as executor:
        return _cluster_of(source, out, args.cross_check, args.dir, executor)


def _cluster_of(folder: str, out, cross_check: bool, shown: str, executor=None) -> int:
    from common.analyze.cluster import cluster_report
    from common.modes.report_files import write_beside, write_lines_beside
    from common.collect.msprof_analyze import view_checks
    from common.formats.cluster import load_cluster
    from common.render.cluster import STEPS_CSV, cluster_view
    from common.render.html import report_page
    from common.render.text import render_text, text_lines

    view = load_cluster(folder, executor)
    view.label = shown
    verdicts, notes = view_checks(view, cross=cross_check)
    report = cluster_report(view)
    full = not report.summarized  # beyond a handful of ranks: the summary here, every row in --out's files
    view_report = cluster_view(report, verdicts, notes, full=full)
    print(render_text(view_report))
    if out is not None:  # the full text (every rank's lines), written line by line
        out = _made(out)
        text = view_report if full else cluster_view(report, verdicts, notes)
        print(write_lines_beside(out, "cluster_report.txt", text_lines(text)))
        if not full:
            print(_write_steps_csv(report, out / STEPS_CSV))
        print(write_beside(out, "report.html", report_page(view_report)))
    elif not full:
        print(
            f"every (step, rank) row and every rank's line: add --out DIR ({STEPS_CSV}, cluster_report.txt, "
            "report.html)"
        )
    return 0 if all(v.ok for v in verdicts) else 1


def _write_steps_csv(report, path) -> str:
    """Every (step, rank) row into ``path``, row by row from the step columns; says where, or why not."""
    from common.analyze.cluster import iter_step_rows
    from common.formats.writers import write_csv
    from common.render.cluster import steps_csv_header

    header = steps_csv_header()
    try:
        write_csv(path, header, (dict(zip(header, row)) for row in iter_step_rows(report.view)))
    except OSError as err:
        return f"({path.name} not written: {err.strerror} for {path})"
    return f"(written to {path})"


def _backend(args: argparse.Namespace) -> int:
    from common.backend import detect

    print(detect().banner())
    return 0


def _workload(args: argparse.Namespace) -> int:
    from common.errors import LabError
    from common.workload import load_workload

    work = load_workload(args.file)  # imports it, builds the model, runs one forward: any mistake stops here
    if args.train and work.loss is None:
        raise LabError(
            f"--train needs a loss, and {work.where} defines no loss()",
            "add loss(output, input) returning a scalar tensor (docs/own_model.md), or drop --train",
        )
    print(f"{work.summary()}: it loads and runs")
    return 0


def _precision(args: argparse.Namespace) -> int:
    from common.cli.precision import run_precision

    return run_precision(args.device, args.workload, args.out, torch_only=args.torch_only, cross_check=args.cross_check)


def command_parser() -> ArgumentParser:
    """The command line of ``python -m common``, every command and its options."""
    parser = ArgumentParser(
        prog="python -m common", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=ArgumentParser)
    report = sub.add_parser("report", help="report on a profile directory")
    report.add_argument(
        "dir", help="a mode's prof_out/, a PROF_*/ or *_ascend_pt/ folder, or any folder holding their files"
    )
    report.add_argument("--soc", help="NPU SoC of the data for lower bounds, e.g. Ascend910B3 (default: $SOC_VERSION)")
    report.add_argument(
        "--out",
        help="where to write report.md and report.html (default: beside the capture, when that folder is writable)",
    )
    report.set_defaults(func=_report)
    agree_p = sub.add_parser("agree", help="check that the four modes of one run agree")
    agree_p.add_argument("dirs", nargs="*", help="the modes' prof_out/ folders (default: all four in this checkout)")
    agree_p.add_argument(
        "--allow-mixed-runs",
        action="store_true",
        help="compare folders from different runs (same backend) instead of refusing them",
    )
    agree_p.add_argument("--out", help="where to write cross_mode.md and report.html (default: agree_out/)")
    agree_p.add_argument(
        "--run-id",
        help="only when all four modes ran in this run (the id nox gives every mode of "
        "one invocation); otherwise say which did not, and stop",
    )
    agree_p.set_defaults(func=_agree)
    compare_p = sub.add_parser("compare", help="compare a candidate run against a baseline")
    compare_p.add_argument("baseline", help="an output folder, or a folder of repeated runs (<mode>/prof_runs)")
    compare_p.add_argument("candidate", help="the same, for the run to judge")
    compare_p.add_argument(
        "--threshold",
        type=float,
        default=DEFAULT_THRESHOLD_PCT,
        help=f"percent slower that counts as a regression (default {DEFAULT_THRESHOLD_PCT:g})",
    )
    compare_p.add_argument(
        "--samples",
        nargs=2,
        type=int,
        metavar=("BASE", "CAND"),
        help="samples per step (the batch) of the baseline and the candidate, for captures whose "
        "run_info.json does not record it: the step time is then compared per sample",
    )
    compare_p.add_argument(
        "--json",
        action="store_true",
        help="print the comparison as JSON (key steps: the step view, with per_sample_ratio)",
    )
    compare_p.set_defaults(func=_compare)
    cluster_p = sub.add_parser("cluster", help="the per-rank view of a multi-rank (torch.distributed) profile")
    cluster_p.add_argument("dir", help="a folder holding one *_ascend_pt/ per rank, e.g. 04_pyTorch/prof_out_ddp")
    cluster_p.add_argument(
        "--cross-check",
        action="store_true",
        help="also run msprof-analyze cluster on the folder (installed on first use) and compare "
        "with its cluster_step_trace_time.csv (cluster_analysis.db for database exports); "
        "off by default: it takes several times the view's own time",
    )
    cluster_p.add_argument(
        "--out",
        help="also write cluster_report.txt and report.html into this folder (beyond 8 "
        "ranks cluster_steps.csv too: every (step, rank) row)",
    )
    cluster_p.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="read the ranks on the Dask cluster whose scheduler is at ADDRESS (tcp://HOST:8786; "
        "default $MSPROF_LAB_DASK_SCHEDULER, else a local process pool); needs "
        "`pip install --group dask`",
    )
    cluster_p.set_defaults(func=_cluster)
    workload_p = sub.add_parser("workload", help="check a workload file: load it and run its model once")
    workload_p.add_argument("file", nargs="?", help="the workload file (default $MSPROF_LAB_WORKLOAD, else TinyMLP)")
    workload_p.add_argument("--train", action="store_true", help="also require loss(output, input)")
    workload_p.set_defaults(func=_workload)
    precision_p = sub.add_parser("precision", help="per-op precision against the fp32 reference, first divergent op")
    precision_p.add_argument("device", nargs="?", default="0", help="NPU device id on the npu backend (default 0)")
    precision_p.add_argument("--workload", help="the workload file (default $MSPROF_LAB_WORKLOAD, else TinyMLP)")
    precision_p.add_argument("--out", help="where to write report.txt and report.html (default: precision_out/)")
    precision_p.add_argument("--torch-only", action="store_true", help="leave out mode 03's variants")
    precision_p.add_argument(
        "--cross-check",
        action="store_true",
        help="check the torch fp16 table against msprobe's compare (installs mindstudio-probe "
        "into .nox/probe on first use)",
    )
    precision_p.set_defaults(func=_precision)
    base_p = sub.add_parser("baseline", help="save a run's summary under a name; check a later run against it")
    base_p.add_argument("action", choices=["save", "check"])
    base_p.add_argument("name", help="the baseline's name (letters, digits, '.', '_', '-')")
    base_p.add_argument("dir", help="the run: an output folder, a prof_runs/ folder, or a torch.profiler trace folder")
    base_p.add_argument("--store", default="baselines", help="where baselines are kept (default baselines/)")
    base_p.add_argument("--replace", action="store_true", help="save: overwrite a baseline of the same name")
    base_p.add_argument(
        "--threshold",
        type=float,
        default=DEFAULT_THRESHOLD_PCT,
        help=f"check: percent slower that counts as a regression (default {DEFAULT_THRESHOLD_PCT:g})",
    )
    base_p.set_defaults(func=_baseline)
    sub.add_parser("backend", help="show the detected backend").set_defaults(func=_backend)
    profile_p.add_parser(sub)
    advise_p.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = command_parser().parse_args(argv)
    return args.func(args)
