"""``python -m common advise CAPTURE [--json] [--out DIR]``: every msprof-analyze advisor rule on one capture.

The capture is anything ``report`` reads (an msprof PROF_*/, a torch_npu *_ascend_pt/ or a folder of
ranks, text or database export; a lab run; a copied lesson's own output). Each rule says what it
found (the ops, sizes, counts and ratios), that it ran and found nothing, or why it could not run;
a rule with a measured remedy names its ``nox -s fix`` pair. Exit 0 whatever was found: advice is not a
failure (``baseline check`` is the command that fails a run).
"""

from __future__ import annotations

import argparse


def advise(args: argparse.Namespace) -> int:
    from common.analyze.advisor.rules import Advisor
    from common.cli.captures import readable
    from common.formats.advice_input import iter_capture_inputs
    from common.formats.rundir import check_output_dir, prepare_output_dir
    from common.render.advice import advice_json, advice_report
    from common.render.html import report_page
    from common.render.text import render_markdown, render_text

    if args.out:
        check_output_dir(args.out)  # before the work: a bad --out stops here
    names: list = []  # each export's rank, as the rules take them (one at a time)
    advisor = Advisor()
    with readable(args.dir) as source:
        for rank in iter_capture_inputs(source):  # read here, one rank at a time; the rules never read a file
            names.append(rank.rank)
            advisor.add(rank)
    findings = advisor.findings()
    title = f"msprof lab advise: {args.dir}"
    shown = ", ".join(map(str, names[:16])) + (f" ... {names[-1]}" if len(names) > 16 else "")
    lines = [
        f"{len(names)} export(s)" + (f", ranks {shown}" if None not in names else ""),
        "rules: msprof-analyze advisor 26.2.0's, each with its threshold and source (docs/reading_captures.md)",
    ]
    report = advice_report(title, lines, findings)
    if args.json:
        print(advice_json(str(args.dir), names, findings))
    else:
        print(render_text(report))
    if args.out:
        out = prepare_output_dir(args.out)
        (out / "advice.md").write_text(render_markdown(report), encoding="utf-8")
        (out / "advice.json").write_text(advice_json(str(args.dir), names, findings) + "\n", encoding="utf-8")
        (out / "report.html").write_text(report_page(report), encoding="utf-8")
        if not args.json:
            print(f"written: {out / 'advice.md'}, {out / 'advice.json'}, {out / 'report.html'}")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser(
        "advise", help="every msprof-analyze advisor rule on a capture: what fired, with which figures, and the fix"
    )
    p.add_argument(
        "dir",
        help="a capture: what report reads (PROF_*/, *_ascend_pt/, a folder of ranks, a lab run, "
        "a copied lesson's output)",
    )
    p.add_argument("--json", action="store_true", help="print the findings as JSON (key findings: one object per rule)")
    p.add_argument("--out", help="also write advice.md and advice.json into this new folder")
    p.set_defaults(func=advise)
