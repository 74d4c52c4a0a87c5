"""The per-op precision report: a table per candidate and, on the page, a chart of how the error grows op by op.
Rendering only: the numbers come from ``common.analyze.precision``."""

from __future__ import annotations

import math

from common.analyze.msprobe_check import ABS_ERR_AGREE_REL, COSINE_AGREE, CrossCheck
from common.analyze.precision import CandidateResult, first_divergence_line
from common.render.html import SERIES, esc
from common.render.report import Figure, Report, Section

HEADER = [
    "#",
    "op (module path)",
    "computes",
    "cosine",
    "max abs err",
    "max rel err",
    "non-finite",
    "max|ref|",
    "abs err / max|ref|",
    "verdict",
]
WRAPPED = ("op (module path)", "computes", "verdict")  # long cells (a fused op's modules, a reason) wrap, text and page


def _g(value: float) -> str:
    return "nan" if value != value else f"{value:.4g}"


def rows_of(result: CandidateResult) -> list[list[object]]:
    return [
        [
            i,
            r.path,
            r.computes,
            f"{r.cosine:.6f}" if r.cosine == r.cosine else "nan",
            _g(r.max_abs_err),
            _g(r.max_rel_err),
            f"{100 * r.nonfinite_share:.3g}%",
            _g(r.scale),
            _g(r.abs_err_of_scale),
            "ok" if r.ok else f"OUT: {r.why}",
        ]
        for i, r in enumerate(result.rows, 1)
    ]


def first_divergent_marker(
    result: CandidateResult, k: int, color: str, points: list[tuple[float, float, object]], top_pad: int
) -> list[str]:
    """The chart's marker of ``result``'s first divergent op: a ring round its dot, a dashed line up to a label that
    names the op (staggered by the series' index ``k`` so that two paths diverging at one op stay readable); nothing
    for a path whose ops all keep the tolerance."""
    row = result.first_divergent
    if row is None:
        return []
    x, y, _ = next(p for p in points if p[2] is row)
    label_y = top_pad + 10 + 14 * k
    text = f"first divergent: {row.path}"
    right_half = x > (points[0][0] + points[-1][0]) / 2  # a label there runs leftwards, off the legend
    anchor, text_x = ("end", x - 4) if right_half else ("start", x + 4)
    return [
        f'<g class="first-divergent" data-series="{esc(result.name)}" data-op="{esc(row.path)}">'
        f'<circle cx="{x:.1f}" cy="{y:.1f}" r="9" fill="none" stroke="{color}" stroke-width="2"/>'
        f'<line x1="{x:.1f}" y1="{y:.1f}" x2="{x:.1f}" y2="{label_y}" stroke="{color}" '
        f'stroke-dasharray="3,3"/><text x="{text_x:.1f}" y="{label_y}" text-anchor="{anchor}" '
        f'fill="{color}">{esc(text)}</text>'
        f"<title>{esc(result.name)}: {esc(text)} ({esc(row.computes)}): {esc(row.why)}</title></g>"
    ]


def growth_chart(results: list[CandidateResult]) -> str:
    """Max abs error as a share of max|ref| (log scale) against the op's position, one line per candidate;
    a non-finite or zero error is drawn at the chart's top or bottom edge. Each path's first divergent op is ringed
    and labelled with its name (:func:`first_divergent_marker`)."""
    shown = [r for r in results if r.rows]
    if not shown:
        return ""
    width, height, left, bottom, top_pad, legend_w = 900, 300, 60, 40, 14, 190
    n = max(len(r.rows) for r in shown)
    values = [v for r in shown for v in (row.abs_err_of_scale for row in r.rows) if v > 0 and math.isfinite(v)]
    lo = math.floor(math.log10(min(values))) if values else -8
    hi = max(math.ceil(math.log10(max(values))) if values else 0, lo + 1)
    plot_w, plot_h = width - left - legend_w, height - bottom - top_pad

    def px(i: int) -> float:
        return left + (i / max(n - 1, 1)) * plot_w

    def py(v: float) -> float:
        e = hi if not math.isfinite(v) else (lo if v <= 0 else min(max(math.log10(v), lo), hi))
        return top_pad + (hi - e) / (hi - lo) * plot_h

    parts = [
        f'<line x1="{left}" y1="{py(0)}" x2="{left + plot_w}" y2="{py(0)}" stroke="#999"/>',
        f'<line x1="{left}" y1="{top_pad}" x2="{left}" y2="{py(0)}" stroke="#999"/>',
    ]
    for e in range(lo, hi + 1):
        parts.append(f'<text x="{left - 6}" y="{py(10.0**e) + 4:.1f}" text-anchor="end">1e{e}</text>')
    for i in range(n):
        parts.append(f'<text x="{px(i):.1f}" y="{height - bottom + 16}" text-anchor="middle">{i + 1}</text>')
    parts.append(
        f'<text x="{left + plot_w / 2:.0f}" y="{height - 4}" text-anchor="middle">'
        "op, in execution order; y: max abs err / max|ref| (log scale)</text>"
    )
    for k, result in enumerate(shown):
        color = SERIES[k % len(SERIES)]
        points = [(px(i), py(row.abs_err_of_scale), row) for i, row in enumerate(result.rows)]
        parts.append(
            f'<polyline class="series" data-series="{esc(result.name)}" fill="none" stroke="{color}" '
            f'stroke-width="2" points="{" ".join(f"{x:.1f},{y:.1f}" for x, y, _ in points)}"/>'
        )
        parts += [
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{3 if row.ok else 5}" fill="{color}">'
            f"<title>{esc(result.name)}, {esc(row.path)}: {_g(row.abs_err_of_scale)}"
            f"{'' if row.ok else ' (out of tolerance)'}</title></circle>"
            for x, y, row in points
        ]
        parts += first_divergent_marker(result, k, color, points, top_pad)
        parts.append(
            f'<rect x="{left + plot_w + 10}" y="{top_pad + 18 * k}" width="11" height="11" '
            f'fill="{color}"/><text x="{left + plot_w + 26}" y="{top_pad + 18 * k + 10}">'
            f"{esc(result.name)}</text>"
        )
    return (
        f'<svg class="chart" data-chart="precision-growth" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img">{"".join(parts)}</svg>'
    )


def precision_report(results: list[CandidateResult], head: list[str]) -> Report:
    """The header lines, then per candidate how it ran, its first divergent op and its table; on the page first the
    first divergent op of every candidate and a chart of how the error grows."""
    sections = [
        Section("Run", lines=head[1:], in_page=False),
        Section(
            "First divergent op per candidate",
            lines=[*head[1:], *(first_divergence_line(r) for r in results)],
            in_text=False,
        ),
        Section(
            "How the error grows, op by op",
            lines=[
                "a larger dot: out of tolerance; a ring and a label: the path's first divergent op; "
                "non-finite errors are drawn at the top edge, errors of 0 at the bottom edge"
            ],
            figures=[Figure(growth_chart, (results,))],
            in_text=False,
        ),
    ]
    for result in results:
        lines = [
            result.how,
            f"tolerance {result.tolerance.describe()} ({result.tolerance.why})",
            *(f"no match: {line}" for line in result.unmatched),
            f"-> {first_divergence_line(result)}",
        ]
        sections.append(Section(result.name, lines=lines, header=HEADER, rows=rows_of(result), wrap=WRAPPED))
    banner = head[0].replace("=== ", "", 1).replace(" ===", "", 1)  # the terminal banner's markers
    return Report("msprof lab: per-op precision", sections, subtitle=banner)


# ----- the cross-check against msprobe --------------------------------------------------------------
CROSS_HEADER = [
    "op (module path)",
    "msprobe's name",
    "cosine (lab)",
    "cosine (msprobe)",
    "max abs err (lab)",
    "max abs err (msprobe)",
    "agree",
]


def cross_check_rows(check: CrossCheck) -> list[list[object]]:
    return [
        [
            r.path,
            r.probe_name,
            f"{r.lab_cosine:.6f}",
            f"{r.probe_cosine:.6f}",
            _g(r.lab_max_abs_err),
            _g(r.probe_max_abs_err),
            r.why or "yes",
        ]
        for r in check.rows
    ]


def cross_check_notes(check: CrossCheck) -> list[str]:
    """Where the two differ in what they report, and the verdict, one line each."""
    lines = [
        f"msprobe reports, the lab does not: {name} (not a leaf module: the lab hooks leaf modules only)"
        for name in check.probe_only
    ]
    lines += [f"the lab reports, msprobe does not: {path}" for path in check.lab_only]
    lines.append(
        f"msprobe's {check.not_compared} rows of module inputs and parameters (and outputs after the first) "
        "are not compared: the lab compares each leaf module's first output"
    )
    lines.append(
        f"-> {check.candidate}: the lab and msprobe agree on {len(check.rows)} modules (cosine within "
        f"{COSINE_AGREE:g}, max abs err within {ABS_ERR_AGREE_REL:g} of it)"
        if check.agree
        else f"-> {check.candidate}: the lab and msprobe DISAGREE on "
        f"{sum(1 for r in check.rows if r.why) or 'every'} module(s)"
    )
    return lines


def cross_check_sections(check: CrossCheck, how: str) -> list[Section]:
    """The lab's table of one candidate against msprobe's compare of the same paths, then where they differ and
    whether they agree."""
    title = f"Cross-check: {check.candidate} against msprobe"
    return [
        Section(title, lines=[how], header=CROSS_HEADER, rows=cross_check_rows(check), wrap=("msprobe's name",)),
        Section(f"{title}: the verdict", lines=cross_check_notes(check)),
    ]
