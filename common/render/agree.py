"""The cross-mode report: the four modes side by side, the cross-mode verdicts and each mode's chart."""

from __future__ import annotations

from common.analyze.bounds.step import HOST_BOUND_BELOW
from common.analyze.families import FAMILY_ORDER
from common.render import html
from common.render.report import Figure, Report, Section
from common.verdict import Verdict

TITLE = "msprof lab: cross-mode agreement"


def _pct(value: float | None) -> str:
    return "N/A" if value is None else f"{100 * value:.1f}%"


def side_by_side(cols: list, lines: list[str]) -> Section:
    """The four modes in one table: one column per mode, one row per figure."""

    def row(name: str, values: list[object]) -> list[object]:
        return [name, *values]

    share_rows = [
        row(
            f"{family} share of forward time (median)",
            [_pct(c.shares.get(family, 0.0)) if c.shares else "N/A" for c in cols],
        )
        for family in FAMILY_ORDER
        if family != "init" and any(family in c.shares for c in cols)
    ]
    # the families the model runs (in any mode): a CNN gets conv and pool rows, an MLP none
    count_rows = [
        row(f"{family} per forward", [f"{c.per_forward.get(family, 0):g}" if c.forwards else "N/A" for c in cols])
        for family in FAMILY_ORDER
        if family != "init" and any(c.per_forward.get(family) for c in cols)
    ]
    rows = [
        row("workload, sha256", [getattr(c, "workload", "") or "not recorded" for c in cols]),
        row("profiled forwards (02: kernel launches)", [c.forwards or c.launches or "N/A" for c in cols]),
        row(
            "op time per forward (us, median, init excluded)",
            [f"{c.op_us_per_forward:,.1f}" if c.op_us_per_forward is not None else "N/A" for c in cols],
        ),
        *share_rows,
        row("init ops, one-off (us, shown apart)", [f"{c.init_us:,.1f}" for c in cols]),
        *count_rows,
        row("Computing share of step", [_pct(c.computing_ratio) for c in cols]),
        row("output vs fp32 reference", [c.accuracy for c in cols]),
    ]
    return Section("The four modes side by side", lines=lines, header=["", *[c.label for c in cols]], rows=rows)


def _chart(title: str, figures: list[Figure], note: str = "") -> Section:
    return Section(title, lines=[note] if note else [], figures=figures, in_text=False)


def agree_report(cols: list, verdicts: list[Verdict], notes: list[str], info_line: str, charts: dict) -> Report:
    """The cross-mode view: each mode's op-family shares (page), the side-by-side table, the verdicts, then the
    charts of each mode that ``charts`` (common.analyze.cross_mode.chart_data) has numbers for (page)."""
    sections = [
        _chart(
            "Op time by family, per mode",
            [Figure(html.share_bars, ("op-share", [(c.label, c.shares) for c in cols], FAMILY_ORDER))],
            "share of forward-pass time; init ops (one-off) excluded and listed in the table",
        ),
        side_by_side(cols, [info_line, *notes]),
        Section("Cross-mode verdicts", verdicts=verdicts),
    ]
    if charts.get("steps"):
        sections.append(
            _chart(
                "04: Computing / Free per step",
                [Figure(html.step_bars, ("steps", charts["steps"]))],
                charts.get("steps_note", ""),
            )
        )
    if charts.get("pipes"):
        sections.append(
            _chart(
                "02: AscendC pipe ratios (add_custom)",
                [Figure(html.value_bars, ("pipes", charts["pipes"], "of core time"), {"top": 1.0})],
                charts.get("pipes_note", ""),
            )
        )
    if charts.get("cast_variants"):
        sections.append(
            _chart(
                "03: the Cast variants",
                [
                    Figure(html.share_bars, ("cast-variants", charts["cast_variants"], FAMILY_ORDER)),
                    Figure(
                        html.value_bars,
                        ("cast-per-execute", charts["cast_counts"], "Cast per execute"),
                        {"color": "#e45756"},
                    ),
                ],
                "default = ATC's precision policy (fp16 compute, fp32 IO); fp16-io; fp32 = no precision change",
            )
        )
    if charts.get("sweep"):
        sections.append(
            _chart(
                "04 sweep: host-bound to compute-bound",
                [
                    Figure(
                        html.sweep_chart,
                        ("sweep", charts["sweep"], HOST_BOUND_BELOW, charts.get("sweep_x", "hidden size")),
                    )
                ],
                charts.get("sweep_note", ""),
            )
        )
    return Report(TITLE, sections)  # the side-by-side section's first line says what a subtitle would
