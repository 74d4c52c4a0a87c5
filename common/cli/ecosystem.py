"""``python -m common.cli.ecosystem`` (``nox -s ecosystem``): the lab's output in msprof-analyze, numbers matched.

Runs ``msprof-analyze advisor all`` on the candidate (default: mode 04's output) and on the
baseline (default: a real torch_npu capture in tests/fixtures/npu), ``msprof-analyze compare``
on the pair, and checks the Computing and Free totals each reports against the lab's own report
of the same folder (common.collect.msprof_analyze runs the tool and reads what it wrote). Then the
advisor's problems on the candidate and on every real capture of tests/fixtures/npu, each held
against ``python -m common advise`` on the same folder: every category it reports must be there,
with the same key figure (common.analyze.advisor.parity).
"""

from __future__ import annotations

import sys
from pathlib import Path

from common.collect.msprof_analyze import (
    Totals,
    advisor_totals,
    check_agreement,
    compare_totals,
    ensure_tool,
    lab_profile,
    run_tool,
    tool_version,
)
from common.collect.advisor_record import CAPTURES, FIXTURES
from common.errors import ArgumentParser, run_cli
from common.formats.rundir import REPO_ROOT, prepare_output_dir
from common.render.report import Report, Section
from common.render.text import render_text
from common.verdict import Verdict

DEFAULT_CANDIDATE = REPO_ROOT / "04_pyTorch" / "prof_out"
DEFAULT_BASELINE = REPO_ROOT / "tests" / "fixtures" / "npu" / "torch_npu_trace_view"


def run_check(candidate: Path, baseline: Path, output: Path, log=print) -> tuple[Section, list[Verdict]]:
    """Run advisor on both folders and compare on the pair; returns the side-by-side table and the verdicts."""
    profiles = [lab_profile(candidate, "candidate"), lab_profile(baseline, "baseline")]
    exe = ensure_tool(log)
    version = tool_version(exe)
    out = prepare_output_dir(output)
    log(f"msprof-analyze {version} ({exe}); its output goes to {out}")
    rows, verdicts = [], []
    tool_totals: dict[str, list[tuple[str, Totals]]] = {p.label: [] for p in profiles}
    for p in profiles:
        folder = out / f"advisor_{p.label}"
        folder.mkdir()
        text = run_tool(
            exe,
            ["advisor", "all", "-d", str(p.tool_dir.resolve()), "-o", str(folder.resolve()), "-l", "en"],
            folder / "advisor.log",
        )
        tool_totals[p.label].append((f"advisor all -d {p.label}", advisor_totals(text, folder / "advisor.log")))
    folder = out / "compare"
    folder.mkdir()
    cand, base = profiles
    run_tool(
        exe,
        [
            "compare",
            "-d",
            str(cand.tool_dir.resolve()),
            "-bp",
            str(base.tool_dir.resolve()),
            "-o",
            str(folder.resolve()),
        ],
        folder / "compare.log",
    )
    comparison, benchmark = compare_totals(folder)
    tool_totals[cand.label].append(("compare -d (comparison)", comparison))
    tool_totals[base.label].append(("compare -bp (base)", benchmark))
    sources = []
    for p in profiles:
        sources.append(f"{p.label}: {p.tool_dir.name} (the lab's numbers from {p.steps_source})")
        rows.append([p.label, "lab report", f"{p.lab.computing_ms:,.4f}", f"{p.lab.free_ms:,.4f}"])
        for source, totals in tool_totals[p.label]:
            rows.append(["", f"msprof-analyze {source}", f"{totals.computing_ms:,.4f}", f"{totals.free_ms:,.4f}"])
            where = f"{p.label}, {source.split(' -')[0]}"
            verdicts.append(check_agreement("Computing", p.lab.computing_ms, totals.computing_ms, where))
            verdicts.append(check_agreement("Free", p.lab.free_ms, totals.free_ms, where))
    table = Section(
        f"Computing and Free, lab vs msprof-analyze {version} (ms)",
        lines=sources,
        header=["profile", "reported by", "Computing(ms)", "Free(ms)"],
        rows=rows,
    )
    return table, verdicts


def advisor_parity(captures: dict[str, Path], out: Path, log=print) -> tuple[Section, list[Verdict]]:
    """msprof-analyze advisor's problems on each capture against the lab's advise: one row per problem."""
    from common.analyze.advisor.parity import parity, parity_verdict
    from common.analyze.advisor.rules import advise
    from common.collect.advisor_record import record_advisor
    from common.formats.advice_input import read_capture_inputs

    exe = ensure_tool(log)
    rows, verdicts = [], []
    for name, capture in captures.items():
        work = out / f"advise_{name}"
        work.mkdir()
        matches = parity(record_advisor(exe, capture, work), advise(read_capture_inputs(capture)))
        rows += [[name, m.category, m.figure, m.advisor, m.lab, "same" if m.ok else "DIFFERENT"] for m in matches]
        verdicts.append(parity_verdict(name, matches))
    table = Section(
        "msprof-analyze advisor's problems, found by python -m common advise",
        header=["capture", "advisor category", "figure", "msprof-analyze", "lab advise", ""],
        rows=rows,
        wrap=("msprof-analyze", "lab advise"),
    )
    return table, verdicts


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m common.cli.ecosystem", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--candidate", default=str(DEFAULT_CANDIDATE), help="torch_npu output to check (default: mode 04's prof_out)"
    )
    parser.add_argument(
        "--baseline",
        default=str(DEFAULT_BASELINE),
        help="torch_npu output to compare it with (default: the real capture in tests/fixtures/npu)",
    )
    parser.add_argument("--output", help="where msprof-analyze writes (default: <candidate>/msprof_analyze)")
    parser.add_argument(
        "--advise-on",
        choices=("all", "candidate"),
        default="all",
        help="hold advise against the advisor on the candidate and every real capture of "
        "tests/fixtures/npu (all, the default), or on the candidate only",
    )
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    candidate = Path(args.candidate)
    output = Path(args.output) if args.output else candidate / "msprof_analyze"
    totals, verdicts = run_check(candidate, Path(args.baseline), output)
    captures = {"candidate": candidate}
    if args.advise_on == "all":
        captures.update({name: FIXTURES / folder for name, folder in CAPTURES.items()})
    parity, parity_verdicts = advisor_parity(captures, Path(output))
    verdicts += parity_verdicts
    report = Report("msprof lab against msprof-analyze", [totals, parity, Section("Checks", verdicts=verdicts)])
    print(render_text(report))
    return 0 if all(v.ok for v in verdicts) else 1


if __name__ == "__main__":
    run_cli(main)
