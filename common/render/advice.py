"""The advisor's findings as a report (text, Markdown, page) and as JSON."""

from __future__ import annotations

import dataclasses
import json

from common.analyze.advisor import CLEAR, FOUND, NOT_RUN, Finding
from common.render.report import Report, Section

FIX_DOC = "docs/make_it_faster.md"
ROWS = 10


def _fix_line(f: Finding) -> str | None:
    if not f.fix:
        return None
    return f"fix: the '{f.fix}' pair, measured by nox -s fix -- 0 --pairs {f.fix} ({FIX_DOC})"


def _sections(findings: list[Finding]) -> list[Section]:
    sections = []
    for f in (f for f in findings if f.status == FOUND):
        listed = ", ".join(map(str, f.ranks[:8])) + (
            f" ... {f.ranks[-1]}: {len(f.ranks)} ranks" if len(f.ranks) > 8 else ""
        )
        where = f" (ranks {listed})" if len(f.ranks) > 1 else f" (rank {f.ranks[0]})" if f.ranks else ""
        lines = [f.text, f"rule: {f.threshold}"]
        lines += [f"remedy: {f.remedy}"] if f.remedy else []
        lines += [line for line in [_fix_line(f)] if line]
        sections.append(Section(f"FOUND: {f.rule}{where}", lines=lines, header=f.header, rows=f.rows[:ROWS]))
    for status in (CLEAR, NOT_RUN):
        chosen = [f for f in findings if f.status == status]
        if chosen:
            title = "Ran, nothing to fix" if status == CLEAR else "Not run (the capture lacks the data)"
            sections.append(
                Section(
                    title,
                    header=["Rule", "Why" if status == NOT_RUN else "Figures"],
                    rows=[[f.rule, f.text] for f in chosen],
                    wrap=("Why", "Figures"),
                )
            )
    return sections


def counts_line(findings: list[Finding]) -> str:
    count = {s: sum(1 for f in findings if f.status == s) for s in (FOUND, CLEAR, NOT_RUN)}
    return (
        f"{len(findings)} rules: {count[FOUND]} found, {count[CLEAR]} ran with nothing to fix, "
        f"{count[NOT_RUN]} not run (their data is not in the capture)"
    )


def advice_report(title: str, lines: list[str], findings: list[Finding]) -> Report:
    """The capture, then each rule that fired with its figures and rows, then those that ran clean or could not run."""
    return Report(title, [Section("Capture", lines=[*lines, counts_line(findings)]), *_sections(findings)])


def advice_json(capture: str, ranks: list, findings: list[Finding]) -> str:
    return json.dumps(
        {"capture": capture, "ranks": ranks, "findings": [dataclasses.asdict(f) for f in findings]},
        indent=1,
        default=str,
    )
