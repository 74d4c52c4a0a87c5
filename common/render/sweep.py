"""The sweep's report: each point's step and Computing share, where each series turns from host-bound to
compute-bound, and the throughput against the device's peak (common.modes.pytorch.sweep measures the points)."""

from __future__ import annotations

from common.analyze.bounds import step as step_bound
from common.render import html
from common.render.report import Figure, Report, Section

TITLE = "msprof lab: 04 sweep"


def turning_points(points: list[dict], x: str) -> list[str]:
    """Per series: the largest host-bound and the smallest compute-bound size along ``x``."""
    lines = []
    for series in sorted({p["series"] for p in points}):
        row = sorted((p for p in points if p["series"] == series), key=lambda p: p[x])
        host = [p[x] for p in row if p["bound"] == "host-bound"]
        compute = [p[x] for p in row if p["bound"] == "compute-bound"]
        undecided = [p[x] for p in row if p["bound"] == "undecided"]
        near = (
            f"; undecided at {x} {', '.join(map(str, undecided))} (its steps' Computing shares straddle "
            f"{100 * step_bound.HOST_BOUND_BELOW:.0f}%: too noisy to call)"
            if undecided
            else ""
        )
        if host and compute:
            lines.append(f"{series}: host-bound up to {x} {max(host)}, compute-bound from {x} {min(compute)}{near}")
        elif host or compute:
            kind = "host-bound" if host else "compute-bound"
            lines.append(f"{series}: {kind} at every {x} decided ({row[0][x]}..{row[-1][x]}){near}")
        else:
            lines.append(f"{series}: no {x} decided{near}")
    return lines


def flops_notes(points: list[dict]) -> list[str]:
    """Why a GFLOP/s figure is missing, a lower bound, or partly from the profile's shapes: never a silent 0."""
    lines = []
    shaped = sorted({op for p in points for op in p.get("flops_from_shapes") or []})
    if shaped:
        lines.append(
            f"(s): includes the FLOPs of {', '.join(shaped)} from their profiled shapes (the bounds "
            "table's work model): torch's FLOP counter has no formula for them"
        )
    missing = sorted({op for p in points for op in p.get("flops_missing") or []})
    if missing:
        lines.append(
            f">= / N/A: not counted: {', '.join(missing)}: torch's FLOP counter has no formula for them "
            "and their shapes give no work model"
        )
    if any(not p["flops"] and not p.get("flops_missing") for p in points):
        lines.append(
            "N/A: no FLOPs counted in this model's forward (no matmul, convolution, attention or RNN "
            "layer): GFLOP/s does not apply"
        )
    return lines


def _gflops(p: dict) -> object:
    value = p["gflops_per_s"]
    if value is None:
        return "N/A (no FLOPs, see below)" if not p["flops"] else "N/A (no Computing time)"
    marks = (" (s)" if p.get("flops_from_shapes") else "") + (" (!)" if p["above_peak"] else "")
    return (">= " if p.get("flops_missing") else "") + f"{value:,.1f}" + marks


def sweep_report(
    points: list[dict], what: str, x: str, peak: float | None, peak_source: str, steps: int, subtitle: str = ""
) -> Report:
    """The points (``what``: the workload and backend; ``x``: hidden or batch; ``steps``: the active steps each
    point's medians are of) as a table, and on the page as Computing share against size, one line per series;
    then what they say."""
    sizes = ["hidden", "batch"] if x == "hidden" else ["batch"]
    rows = [
        [
            *(p[s] for s in sizes),
            p["step_us"],
            p["computing_us"],
            p["free_us"],
            100 * p["computing_ratio"],
            p["bound"],
            _gflops(p),
        ]
        for p in points
    ]
    series: dict[str, list[tuple[int, float]]] = {}
    for p in points:
        series.setdefault(p["series"], []).append((p[x], p["computing_ratio"]))
    peak_text = f"peak {peak / 1e9:,.1f} GFLOP/s ({peak_source})" if peak else f"no peak known ({peak_source})"
    lines = [*flops_notes(points), *turning_points(points, x)]
    above = [p for p in points if p["above_peak"]]
    if above:  # more work per second than the device can do: the figure is wrong, not the device fast
        lines.append(
            f"warning: (!) {len(above)} point(s) above the peak: Computing is shorter than the counted "
            "FLOPs allow, so it misses time the work took (or the peak was measured under other load); "
            "those GFLOP/s are not throughput"
        )
    chart = Figure(html.sweep_chart, ("sweep", series, step_bound.HOST_BOUND_BELOW), {"x_label": f"{x} size"})
    return Report(
        TITLE,
        [
            Section(
                f"Sweep ({what})",
                lines=[
                    f"the median of {steps} active steps per point; host-bound when Computing < "
                    f"{100 * step_bound.HOST_BOUND_BELOW:.0f}% of the step",
                    f"GFLOP/s = FLOPs per forward (torch's FLOP counter formulas) / Computing; {peak_text}",
                ],
                header=[*sizes, "step(us)", "Computing(us)", "Free(us)", "Computing(%)", "verdict", "GFLOP/s"],
                rows=rows,
                figures=[chart],
            ),
            Section("What the points say", lines=lines),
        ],
        subtitle=subtitle,
    )
