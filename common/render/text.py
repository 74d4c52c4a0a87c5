"""Rendering only: every function returns text; callers print or save it."""

from __future__ import annotations

from dataclasses import dataclass, field

from common.analyze.checks import Verdict
from common.analyze.families import FAMILY_ORDER

TOP_N = 10
STEP_ROWS = 20  # more steps than this: the step table lists the TOP_N longest, the verdict covers all


@dataclass
class Section:
    """A titled block: lines of prose and/or one table."""

    title: str
    lines: list[str] = field(default_factory=list)
    header: list[str] = field(default_factory=list)
    rows: list[list[object]] = field(default_factory=list)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 1000 else f"{value:,.1f}"
    return "N/A" if value is None else str(value)


def render_table(header: list[str], rows: list[list[object]]) -> str:
    """A plain aligned text table (numeric columns right-aligned)."""
    cells = [list(header)] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    numeric = [bool(rows) and all(isinstance(r[i], (int, float)) for r in rows) for i in range(len(header))]

    def line(r: list[str]) -> str:
        return "  ".join(c.rjust(w) if numeric[i] else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()

    return "\n".join([line(cells[0]), "  ".join("-" * w for w in widths), *(line(r) for r in cells[1:])])


def render_markdown_table(header: list[str], rows: list[list[object]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(_fmt(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def render_text(title: str, sections: list[Section]) -> str:
    parts = [title, "=" * len(title)]
    for s in sections:
        parts += ["", f"-- {s.title} --", *s.lines]
        if s.header:
            parts.append(render_table(s.header, s.rows))
    return "\n".join(parts)


def render_markdown(title: str, sections: list[Section]) -> str:
    parts = [f"# {title}"]
    for s in sections:
        parts += ["", f"## {s.title}", ""]
        parts += [f"{line}  " for line in s.lines]
        if s.header:
            parts += ["", render_markdown_table(s.header, s.rows)]
    return "\n".join(parts) + "\n"


def render_verdicts(verdicts: list[Verdict]) -> str:
    """One line per check: PASS/FAIL, its name, and the numbers it compared."""
    return "\n".join(f"[{'PASS' if v.ok else 'FAIL'}] {v.name}: {v.detail}" for v in verdicts)


def run_info_line(info: dict | None) -> str:
    if info is None:
        return "backend: unknown (no run_info.json: collected outside the lab)"
    state = "complete" if info.get("completed") else "INCOMPLETE (the run did not finish; numbers are partial)"
    return (
        f"backend: {str(info['backend']).upper()} | mode {info['mode']} | device {info.get('device')} | "
        f"{info.get('start')} | {state}"
    )


def _pct(value: float | None) -> str:
    return "N/A" if value is None else f"{100 * value:.1f}%"


def side_by_side(cols: list, info_line: str) -> Section:
    """The four modes in one table: one column per mode, one row per figure."""
    def row(name: str, values: list[object]) -> list[object]:
        return [name, *values]

    share_rows = [row(f"{family} share of forward time", [_pct(c.shares.get(family, 0.0)) if c.shares else "N/A"
                                                          for c in cols])
                  for family in FAMILY_ORDER if family != "init" and any(family in c.shares for c in cols)]
    count_rows = [row(f"{family} per forward", [f"{c.per_forward.get(family, 0):g}" if c.forwards else "N/A"
                                                for c in cols])
                  for family in ("matmul", "activation", "cast", "elementwise")]
    rows = [
        row("profiled forwards (02: kernel launches)", [c.forwards or c.launches or "N/A" for c in cols]),
        row("op time per forward (us, init excluded)",
            [f"{c.op_us_per_forward:,.1f}" if c.op_us_per_forward is not None else "N/A" for c in cols]),
        *share_rows,
        row("init ops, one-off (us, shown apart)", [f"{c.init_us:,.1f}" for c in cols]),
        *count_rows,
        row("Computing share of step", [_pct(c.computing_ratio) for c in cols]),
        row("output vs fp32 reference", [c.accuracy for c in cols]),
    ]
    return Section("The four modes side by side", lines=[info_line],
                   header=["", *[c.label for c in cols]], rows=rows)


def agree_report(cols: list, verdicts: list[Verdict], notes: list[str], info_line: str) -> tuple[str, str]:
    """The cross-mode view: the side-by-side table, then the verdicts: (text, Markdown)."""
    sections = [side_by_side(cols, info_line)]
    if notes:
        sections[0].lines += notes
    sections.append(Section("Cross-mode verdicts", lines=render_verdicts(verdicts).splitlines()))
    title = "msprof lab: cross-mode agreement"
    return render_text(title, sections), render_markdown(title, sections)


def comparison_report(cmp, base: str, cand: str, verdict: Verdict) -> str:
    """Per-op and total deltas of a run comparison, regressions marked, then its verdict line."""
    unit = f"us per {cmp.per}"
    rows = []
    for d in cmp.ops:
        where, op_type, shapes = d.key
        rows.append([
            where or ".", op_type, shapes, d.base_us if d.base_us is not None else "absent",
            d.cand_us if d.cand_us is not None else "absent", d.delta_us,
            f"{d.delta_pct:+.1f}%" if d.delta_pct is not None else "new",
            "REGRESSION" if d.flagged else "",
        ])
    lines = [
        f"baseline: {base} ({cmp.base_runs} run{'s' if cmp.base_runs > 1 else ''}); candidate: {cand} "
        f"({cmp.cand_runs} run{'s' if cmp.cand_runs > 1 else ''}); medians over runs, {unit}",
        f"matched by (where, OP Type, Input Shapes); flagged when slower by more than {cmp.threshold_pct:g}% "
        f"and at least 1% of the baseline total; init ops listed, never flagged",
    ]
    table = render_table(["where", "OP Type", "Input Shapes", "baseline", "candidate", "delta(us)", "delta", ""], rows)
    return "\n".join([*lines, table, render_verdicts([verdict])])


