"""Self-contained HTML with inline SVG charts: rendering only, no computation, no network.

Every function takes numbers that the analysis already produced and returns markup. A page
carries its own CSS and draws with inline SVG, so it opens offline, from a mail attachment or
a CI artifact, exactly as it was written.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

from common.render.report import Report, Section
from common.render.text import verdict_tag

FAMILY_COLORS = {
    "matmul": "#4c78a8",
    "conv": "#3b3b98",
    "attention": "#9467bd",
    "recurrent": "#6b4e9b",
    "norm": "#17becf",
    "activation": "#f58518",
    "softmax": "#bcbd22",
    "elementwise": "#72b7b2",
    "reduce": "#c7a76c",
    "pool": "#ff9da6",
    "resize": "#e377c2",
    "embedding": "#2ca02c",
    "indexing": "#8c8c3a",
    "cast": "#e45756",
    "layout": "#d4a017",
    "memcpy": "#54a24b",
    "communication": "#222222",
    "optimizer": "#8c564b",
    "init": "#b279a2",
    "other": "#9d9d9d",
}
COMPUTING, FREE, COMMUNICATION, MEMORY = "#4c78a8", "#f2cf5b", "#e45756", "#54a24b"
SERIES = ["#4c78a8", "#e45756", "#54a24b", "#b279a2"]
_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:1100px;color:#222;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 6px;border-bottom:1px solid #ddd;padding-bottom:3px}
.sub{color:#555;margin:0 0 12px}.note{color:#555;font-size:12.5px;margin:4px 0}
table{border-collapse:collapse;font-size:12.5px;margin:6px 0}td,th{border:1px solid #ddd;padding:3px 7px;text-align:left}
th{background:#f4f4f4}td.n{text-align:right;font-variant-numeric:tabular-nums}
td.w{overflow-wrap:anywhere;min-width:9em}h1,h2,p{overflow-wrap:anywhere}
.v{margin:2px 0;font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12.5px}.pass{color:#1a7f37}.fail{color:#c62828;font-weight:600}.na{color:#6b6b6b}
svg{display:block;margin:6px 0;max-width:100%;height:auto}
pre{font-size:12px;white-space:pre-wrap;overflow-wrap:anywhere;background:#f8f8f8;padding:6px 8px}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(520px,1fr));column-gap:24px;align-items:start}svg text{font:12px system-ui,sans-serif;fill:#333}
"""


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def page(title: str, subtitle: str, blocks: list[str]) -> str:
    """A complete HTML document: title, one subtitle line (if any), then the blocks in order."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(title)}</title><style>{_CSS}</style></head><body>\n"
        f"<h1>{esc(title)}</h1>"
        + (f'<p class="sub">{esc(subtitle)}</p>' if subtitle else "")
        + "\n"
        + "\n".join(blocks)
        + "\n</body></html>\n"
    )


def report_page(report: Report) -> str:
    """A :class:`~common.render.report.Report` as a page: its sections in order (those the page shows), a
    section marked ``leads`` first."""
    shown = [s for s in report.sections if s.in_page]
    first = [s for s in shown if s.leads]
    blocks = [report_section(s) for s in [*first, *(s for s in shown if all(s is not f for f in first))]]
    return page(report.page_title or report.title, report.subtitle, blocks)


def report_section(s: Section) -> str:
    """One section: its figures (side by side with ``grid``), lines, verdicts, then its table."""
    figures = [
        (
            f'<p class="v">{f"<b>{esc(f.label)}</b>" if f.label else ""}{esc(f.caption)}</p>'
            if f.label or f.caption
            else ""
        )
        + f.draw(*f.args, **f.kwargs)
        for f in s.figures
    ]
    body = chart_grid(figures) if s.grid else "".join(figures)
    if s.preformatted:
        body += f"<pre>{esc(chr(10).join(s.lines))}</pre>"
    else:
        body += "".join(f"<p>{esc(line)}</p>" for line in s.lines)
    body += verdict_list(s.verdicts)
    if s.header and s.rows:  # as the text: a table without rows says nothing its lines do not
        body += table(s.header, s.rows, wrap=s.wrap)
    return f"<section><h2>{esc(s.title)}</h2>{body}</section>"


LONG_CELL = 32  # characters: a text cell this long wraps like a ``wrap`` column's, wherever it is


def table(header: list[str], rows: list[list[object]], wrap: tuple[str, ...] = ()) -> str:
    """A table; the cells of the ``wrap`` columns, and any text cell of LONG_CELL characters or more, may break
    after each ``;`` (a shape list) and inside any longer token, so a wide cell wraps within the page instead of
    widening the table."""

    def cell(v: object, wraps: bool) -> str:
        numeric = isinstance(v, (int, float)) and not isinstance(v, bool)
        text = (f"{v:,.1f}" if abs(v) >= 100 else f"{v:.3g}") if isinstance(v, float) else ("N/A" if v is None else v)
        if numeric:
            return f'<td class="n">{esc(text)}</td>'
        if wraps or len(str(text)) >= LONG_CELL:
            return '<td class="w">' + esc(text).replace(";", ";<wbr>") + "</td>"
        return f"<td>{esc(text)}</td>"

    wraps = [h in wrap for h in header]
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(cell(v, w) for v, w in zip(row, wraps)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def verdict_list(verdicts: list) -> str:
    css = {"PASS": "pass", "FAIL": "fail", "N/A": "na"}
    return "".join(
        f'<p class="v"><span class="{css[verdict_tag(v)]}">[{verdict_tag(v)}]</span> '
        f"<b>{esc(v.name)}</b>: {esc(v.detail)}</p>"
        for v in verdicts
    )


LEGEND_ROW = 20  # px per row of colour keys
CHAR_PX = 7.5  # px: the width of one character of 12 px chart text, estimated on the wide side


def _row_label(text: str, y: int, room: int) -> str:
    """A bar's label at the chart's left edge, cut in the middle with an ellipsis when it is wider than ``room``
    px (both ends kept: a dataset's name and its rank or timestamp); the full text as its tooltip."""
    keep = max(int((room - 8) / CHAR_PX), 5)
    head = (keep - 1) // 2
    shown = text if len(text) <= keep else f"{text[:head]}…{text[len(text) - (keep - 1 - head) :]}"
    return f'<text class="label" x="0" y="{y}"><title>{esc(text)}</title>{esc(shown)}</text>'


def _legend(items: list[tuple[str, str]], y: int, x0: int = 150, right: int = 900) -> tuple[str, int]:
    """Colour keys from ``x0``, starting a new row where the next key would pass ``right`` (the chart's width):
    (the markup, the number of rows). A key's width is estimated at CHAR_PX per character."""
    out, x, row = [], x0, 0
    for label, color in items:
        if x > x0 and x + 15 + CHAR_PX * len(label) > right:
            x, row = x0, row + 1
        top = y + row * LEGEND_ROW
        out.append(
            f'<rect x="{x}" y="{top}" width="11" height="11" fill="{color}"/>'
            f'<text x="{x + 15}" y="{top + 10}">{esc(label)}</text>'
        )
        x += 22 + 7 * len(label)
    return f'<g class="legend">{"".join(out)}</g>', row + 1


def share_bars(chart: str, rows: list[tuple[str, dict[str, float]]], order: list[str]) -> str:
    """One 100% stacked horizontal bar per row (e.g. per mode): the share of each family."""
    width, label_w, bar_h, gap = 900, 190, 22, 8
    present = [f for f in order if any(shares.get(f) for _, shares in rows)]
    parts = []
    for i, (label, shares) in enumerate(rows):
        y, x = i * (bar_h + gap), float(label_w)
        parts.append(_row_label(label, y + 15, label_w))
        for family in present:
            share = shares.get(family, 0.0)
            w = share * (width - label_w)
            if w <= 0:
                continue
            parts.append(
                f'<rect class="seg" data-family="{esc(family)}" x="{x:.1f}" y="{y}" width="{w:.1f}" '
                f'height="{bar_h}" fill="{FAMILY_COLORS.get(family, "#999")}">'
                f"<title>{esc(label)}: {esc(family)} {100 * share:.1f}%</title></rect>"
            )
            if w > 38:
                parts.append(f'<text x="{x + 4:.1f}" y="{y + 15}" style="fill:#fff">{100 * share:.0f}%</text>')
            x += w
    bars_end = len(rows) * (bar_h + gap) + 14
    legend, legend_rows = _legend([(f, FAMILY_COLORS.get(f, "#999")) for f in present], bars_end)
    parts.append(legend)
    height = bars_end + LEGEND_ROW * legend_rows
    return (
        f'<svg class="chart" data-chart="{esc(chart)}" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img">{"".join(parts)}</svg>'
    )


def step_bars(chart: str, steps: list[tuple]) -> str:
    """Computing + Communication(Not Overlapped) + Free per step, stacked on one µs axis.

    Each step is ``(label, computing, free)`` or ``(label, computing, free, communication not overlapped)``.
    """
    width, label_w, bar_h, gap = 900, 150, 18, 6
    rows = [(s[0], s[1], s[3] if len(s) > 3 else 0.0, s[2]) for s in steps]
    with_comm = any(comm > 0 for _, _, comm, _ in rows)
    top = max((c + n + f for _, c, n, f in rows), default=0.0) or 1.0
    scale = (width - label_w - 90) / top
    parts = []
    for i, (label, computing, comm, free) in enumerate(rows):
        y, x = i * (bar_h + gap), float(label_w)
        parts.append(_row_label(label, y + 13, label_w))
        segments = [("computing", "Computing", computing, COMPUTING)]
        if with_comm:
            segments.append(("communication", "Communication(Not Overlapped)", comm, COMMUNICATION))
        segments.append(("free", "Free", free, FREE))
        for part, name, value, color in segments:
            w = value * scale
            parts.append(
                f'<rect class="seg" data-part="{part}" x="{x:.1f}" y="{y}" width="{w:.1f}" '
                f'height="{bar_h}" fill="{color}"><title>{esc(name)} {value:,.1f} us</title></rect>'
            )
            x += w
        parts.append(f'<text x="{x + 4:.1f}" y="{y + 13}">{computing + comm + free:,.0f} us</text>')
    legend = [("Computing", COMPUTING)] + ([("Communication (not overlapped)", COMMUNICATION)] if with_comm else [])
    bars_end = len(rows) * (bar_h + gap) + 14
    legend, legend_rows = _legend(legend + [("Free", FREE)], bars_end)
    parts.append(legend)
    height = bars_end + LEGEND_ROW * legend_rows
    return (
        f'<svg class="chart" data-chart="{esc(chart)}" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img">{"".join(parts)}</svg>'
    )


HEAT_COLUMNS = 256  # at most this many columns: more ranks share a column, which shows their largest value


def heat_map(chart: str, rows: list[tuple[str, Sequence[float]]], what: str) -> str:
    """One row per label (a step), one column per rank (ranks 0..n-1, :data:`HEAT_COLUMNS` at most, adjacent
    ranks then sharing one, which shows their largest value); each row coloured from its own smallest
    (pale) to its largest value (dark red), so the outlying ranks of every step stand out."""
    width, label_w, cell_h, gap = 900, 150, 14, 2
    n = max((len(v) for _, v in rows), default=0)
    columns = min(n, HEAT_COLUMNS) or 1
    cell_w = (width - label_w - 10) / columns
    # each column's ranks [first, end): the same for every row
    bins = [(c * n // columns, max((c + 1) * n // columns, c * n // columns + 1)) for c in range(columns)]
    labels = [f"rank {first}" if end - first == 1 else f"ranks {first}-{end - 1}" for first, end in bins]
    parts = []
    for i, (label, values) in enumerate(rows):
        y = i * (cell_h + gap)
        parts.append(_row_label(label, y + 11, label_w))
        binned = [max(values[first:end]) for first, end in bins]
        low, high = min(binned), max(binned)
        for c, (value, ranks) in enumerate(zip(binned, labels)):
            t = (value - low) / (high - low) if high > low else 0.0
            parts.append(
                f'<rect x="{label_w + c * cell_w:.2f}" y="{y}" width="{cell_w + 0.05:.2f}" '
                f'height="{cell_h}" fill="hsl(8,75%,{92 - 55 * t:.0f}%)"><title>{esc(label)}, {ranks}: '
                f"{esc(what)} {value:,.1f} us</title></rect>"
            )
    bottom = len(rows) * (cell_h + gap) + 14
    parts.append(
        f'<text x="{label_w}" y="{bottom}">rank 0</text><text x="{width - 10}" y="{bottom}" '
        f'text-anchor="end">rank {n - 1}</text>'
    )
    height = bottom + 6
    return (
        f'<svg class="chart" data-chart="{esc(chart)}" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img">{"".join(parts)}</svg>'
    )


def value_bars(
    chart: str,
    items: list[tuple[str, float]],
    unit: str,
    top: float | None = None,
    color: str = "#4c78a8",
    fmt: str = ".3g",
    width: int = 900,
) -> str:
    """Plain horizontal bars, one per item (pipe ratios, Casts per variant, MB ...), values printed with ``fmt``;
    ``width``: GRID_CHART for a chart in a :func:`chart_grid`."""
    label_w, bar_h, gap = 150, 18, 6
    top = top or max((v for _, v in items), default=0.0) or 1.0
    widest = max((len(f"{v:{fmt}} {unit}") for _, v in items), default=0)
    scale = (width - label_w - max(60 + 7 * len(unit), 8 * widest + 8)) / top
    height = len(items) * (bar_h + gap) + 6
    parts = []
    for i, (label, value) in enumerate(items):
        y, w = i * (bar_h + gap), max(value, 0.0) * scale
        parts.append(
            _row_label(label, y + 13, label_w)
            + f'<rect class="seg" x="{label_w}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{color}">'
            f"<title>{esc(label)}: {value:g} {esc(unit)}</title></rect>"
            f'<text x="{label_w + w + 4:.1f}" y="{y + 13}">{value:{fmt}} {esc(unit)}</text>'
        )
    return (
        f'<svg class="chart" data-chart="{esc(chart)}" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img">{"".join(parts)}</svg>'
    )


GRID_CHART = 520  # px: the width of a chart in a chart_grid, two to a row on the page


def chart_grid(cells: list[str]) -> str:
    """Small charts (each with its label above it), side by side as the page's width allows: two to a row on a
    desktop, one on a narrow window."""
    return '<div class="grid">' + "".join(f"<div>{cell}</div>" for cell in cells) + "</div>"


def sweep_chart(
    chart: str, series: dict[str, list[tuple[int, float]]], threshold: float, x_label: str = "hidden size"
) -> str:
    """Computing share of the step (y, 0..100%) against a size (x, log2: hidden size, or batch), one line per series."""
    width, height, left, bottom, top_pad = 900, 320, 60, 40, 14
    xs = sorted({x for pts in series.values() for x, _ in pts})
    if not xs:
        return ""
    lo, hi = math.log2(xs[0]), math.log2(xs[-1]) if xs[-1] > xs[0] else math.log2(xs[0]) + 1
    plot_w, plot_h = width - left - 150, height - bottom - top_pad

    def px(x: float) -> float:
        return left + (math.log2(x) - lo) / (hi - lo) * plot_w

    def py(share: float) -> float:
        return top_pad + (1 - share) * plot_h

    parts = [
        f'<line x1="{left}" y1="{py(0)}" x2="{left + plot_w}" y2="{py(0)}" stroke="#999"/>',
        f'<line x1="{left}" y1="{py(0)}" x2="{left}" y2="{py(1)}" stroke="#999"/>',
        f'<line x1="{left}" y1="{py(threshold):.1f}" x2="{left + plot_w}" y2="{py(threshold):.1f}" '
        f'stroke="#c62828" stroke-dasharray="5 4"/>',
        f'<text x="{left + plot_w + 6}" y="{py(threshold) + 4:.1f}" style="fill:#c62828">'
        f"host-bound below {100 * threshold:.0f}%</text>",
    ]
    for tick in (0, 0.25, 0.5, 0.75, 1.0):
        parts.append(f'<text x="{left - 8}" y="{py(tick) + 4:.1f}" text-anchor="end">{100 * tick:.0f}%</text>')
    for x in xs:
        parts.append(f'<text x="{px(x):.1f}" y="{height - bottom + 18}" text-anchor="middle">{x}</text>')
    parts.append(
        f'<text x="{left + plot_w / 2:.0f}" y="{height - 4}" text-anchor="middle">{x_label} '
        "(log scale); y: Computing share of the step</text>"
    )
    for i, (name, pts) in enumerate(series.items()):
        color = SERIES[i % len(SERIES)]
        pts = sorted(pts)
        path = " ".join(f"{px(x):.1f},{py(s):.1f}" for x, s in pts)
        parts.append(
            f'<polyline class="series" data-series="{esc(name)}" points="{path}" fill="none" '
            f'stroke="{color}" stroke-width="2"/>'
        )
        parts += [
            f'<circle cx="{px(x):.1f}" cy="{py(s):.1f}" r="4" fill="{color}">'
            f"<title>{esc(name)}, hidden {x}: {100 * s:.1f}%</title></circle>"
            for x, s in pts
        ]
        parts.append(
            f'<rect x="{left + plot_w + 6}" y="{top_pad + 20 * i + 30}" width="11" height="11" '
            f'fill="{color}"/><text x="{left + plot_w + 22}" y="{top_pad + 20 * i + 40}">'
            f"{esc(name)}</text>"
        )
    return (
        f'<svg class="chart" data-chart="{esc(chart)}" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img">{"".join(parts)}</svg>'
    )
