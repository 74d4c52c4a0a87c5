"""The finding -> fix report: text for the terminal, Markdown (fix.md) and HTML (report.html).

Rendering only: the pairs arrive as fix.json's objects (common.modes.fix.run.pair_json)."""

from __future__ import annotations

from common.render import html
from common.render.report import Figure, Report, Section

TITLE = "msprof lab: from finding to fix"
HEADER = [
    "pair",
    "mode",
    "before (median, range)",
    "after (median, range)",
    "gain",
    "answer",
    "verdict after",
    "precision",
]


def _side(s: dict | None, unit: str) -> str:
    if not s:
        return "N/A"
    return f"{s['median']:,.2f} ({s['min']:,.2f}-{s['max']:,.2f}, n {s['n']}) {unit}"


def _kind(verdict: str | None) -> str:
    """The table's short form of a verdict line: what it says before its figures (``compute-bound``)."""
    return verdict.split(":", 1)[0] if verdict else "N/A"


def _precision(p: dict | None, npu_only: bool = False) -> str:
    if npu_only:
        return "N/A (needs an NPU)"
    if p is None:
        return "unchanged numerics"
    if p.get("max_abs_diff") is None:
        return f"NOT CHECKED: {p.get('detail', '')}"
    return (
        f"{'ok' if p['ok'] else 'BEYOND TOLERANCE'}: max abs diff {p['max_abs_diff']:.3g} "
        f"(tolerance {p['tolerance']:.3g})"
    )


def sections(pairs: list[dict], skipped: dict[str, str], header_lines: list[str]) -> list[Section]:
    rows = [
        [
            p["name"],
            p["mode"],
            _side(p["before"], p["unit"]),
            _side(p["after"], p["unit"]),
            f"{p['gain_pct']:+.1f}%" if p["gain_pct"] is not None else "N/A",
            p["answer"],
            _kind(p["verdict_after"]),
            _precision(p["precision"], p["npu_only"]),
        ]
        for p in pairs
    ]
    out = [
        Section(
            "Pairs",
            lines=[
                *header_lines,
                "gain: (before - after) / before of the medians; beyond the noise: "
                "every run after the fix beat every run before it (the ranges do not overlap)",
            ],
            header=HEADER,
            rows=rows,
            wrap=("verdict after", "precision"),
        )
    ]
    for p in pairs:
        if p["npu_only"]:
            out.append(
                Section(
                    f"{p['name']} (needs an NPU): {p['finding_class']}",
                    lines=[
                        f"fix: {p['fix']}",
                        f"what the sources say to expect: {p['expect']}",
                        f"source: {p['source']}",
                    ],
                )
            )
            continue
        lines = [
            f"finding (the baseline's own verdict): {p['verdict_before']}",
            f"fix: {p['fix']}",
            f"metric: {p['metric']}; {p['answer']}" + (f", {p['gain_pct']:+.1f}%" if p["gain_pct"] is not None else ""),
            f"after the fix: {p['verdict_after']}",
        ]
        if p["precision"]:
            lines.append(f"precision re-check: {p['precision']['detail']}")
        if p.get("note"):
            lines.append(f"on this backend: {p['note']}")
        lines.append(f"source: {p['source']}")
        bars = [
            (f"before ({p['before']['min']:,.1f}-{p['before']['max']:,.1f})", p["before"]["median"]),
            (f"after ({p['after']['min']:,.1f}-{p['after']['max']:,.1f})", p["after"]["median"]),
        ]
        chart = Figure(html.value_bars, (f"fix-{p['name']}", bars, p["unit"]), {"fmt": ",.2f"})
        out.append(Section(f"{p['name']}: {p['finding_class']}", lines=lines, figures=[chart]))
    if skipped:
        out.append(Section("Skipped", lines=[f"{name}: {why}" for name, why in skipped.items()]))
    return out


def fix_report(pairs: list[dict], skipped: dict[str, str], header_lines: list[str]) -> Report:
    """The table of pairs, then one section per pair (on the page with its before and after as bars: the median,
    the range in the label), then what was skipped."""
    return Report(TITLE, sections(pairs, skipped, header_lines), subtitle=header_lines[0] if header_lines else "")
