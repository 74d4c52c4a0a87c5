"""Rendering only: every function returns text; callers print or save it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from common import analysis
from common.analysis import Verdict
from common.profile import Dataset, find_datasets, find_run_info

TOP_N = 10


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


def dataset_sections(ds: Dataset, root: Path, forwards: int | None) -> list[Section]:
    """Top ops, families, per-forward counts and (when present) the step table of one dataset."""
    label = ds.label(root)
    stats = ds.op_statistic
    sections = [
        Section(
            f"Top ops: {label} ({ds.kind})",
            header=["OP Type", "Core Type", "Count", "Total Time(us)", "Avg Time(us)", "Ratio(%)"],
            rows=[[s.op_type, s.core_type, s.count, s.total_us, s.avg_us, s.ratio_pct] for s in analysis.top_ops(stats, TOP_N)],
        )
    ]
    shares = analysis.family_share(stats)
    counts = analysis.family_counts(ds.tasks) if ds.tasks else {}
    fam_rows = []
    for family in analysis.FAMILY_ORDER:
        if family in shares:
            if family == "init":
                per_fwd = "one-off"  # weight init and input generation happen once, not per forward
            else:
                per_fwd = f"{counts.get(family, 0) / forwards:.2f}" if forwards and ds.tasks else "N/A"
            fam_rows.append([family, 100 * shares[family], counts.get(family, 0) if ds.tasks else "N/A", per_fwd])
    note = f"{forwards} profiled forwards" if forwards else "number of forwards unknown: per-forward counts N/A"
    sections.append(
        Section(
            f"Op families: {label}",
            lines=[f"share of summed op time; counts from {'op_summary/kernel_details' if ds.tasks else 'no task file'}; {note}"],
            header=["family", "share(%)", "tasks", "per forward"],
            rows=fam_rows,
        )
    )
    if ds.steps:
        summary = analysis.summarize_steps(ds.steps)
        rows = [
            [s.step if s.step is not None else "", s.computing_us, s.free_us, s.total_us,
             100 * s.computing_us / s.total_us if s.total_us else 0.0]
            for s in ds.steps
        ]
        sections.append(
            Section(
                f"Steps: {label}",
                lines=[analysis.bound_verdict(summary)],
                header=["Step", "Computing(us)", "Free(us)", "Step(us)", "Computing(%)"],
                rows=rows,
            )
        )
    return sections


def directory_report(root: Path | str, verdicts: list[Verdict] | None = None) -> tuple[str, str]:
    """The report of everything under ``root``, with a mode's checks if given: (text, Markdown)."""
    root = Path(root)
    datasets = find_datasets(root)
    info = find_run_info(root)
    forwards = info.get("forwards") if info else None
    sections = [Section("Run", lines=[run_info_line(info), f"datasets: {len(datasets)}"])]
    for ds in datasets:
        sections += dataset_sections(ds, root, forwards)
    if verdicts:
        sections.append(Section("Checks", lines=render_verdicts(verdicts).splitlines()))
    title = f"msprof lab report: {root}"
    return render_text(title, sections), render_markdown(title, sections)


def write_report_md(root: Path, markdown: str) -> str:
    """Save report.md beside the data; say so, or say why not (read-only input is fine)."""
    target = Path(root) / "report.md"
    try:
        target.write_text(markdown)
    except OSError as err:
        return f"(report.md not written: {err.strerror} for {target})"
    return f"(written to {target})"
