"""A comparison of two runs (common.analyze.compare) as a report: per op, what changed, the steps, the verdict."""

from __future__ import annotations

from common.analyze import compare_steps
from common.render.report import Report, Section
from common.verdict import Verdict


def comparison_report(cmp, base: str, cand: str, verdict: Verdict) -> Report:
    """Per-op and total deltas of a run comparison (regressions marked), the ops only one side ran, the step view,
    then its verdict."""
    unit = f"us per {cmp.per}"
    rows = []
    for d in cmp.ops:
        where, op_type, shapes = d.key
        rows.append(
            [
                where or ".",
                op_type,
                shapes,
                d.base_us if d.base_us is not None else "absent",
                d.cand_us if d.cand_us is not None else "absent",
                d.delta_us,
                f"{d.delta_pct:+.1f}%" if d.delta_pct is not None else "new",
                "REGRESSION" if d.flagged else "within noise" if d.within_noise else "",
            ]
        )
    lines = [
        f"baseline: {base} ({cmp.base_runs} run{'s' if cmp.base_runs > 1 else ''}); candidate: {cand} "
        f"({cmp.cand_runs} run{'s' if cmp.cand_runs > 1 else ''}); medians over runs, {unit}",
        (
            "matched by (where, OP Type, Input Shapes)"
            if cmp.matched_by == "op"
            else "matched by (where, op family): OP Type and Input Shapes cover too little of the time, as between a "
            "Level0 export (kernel names, no OP Type) and a Level1/2 one, or one workload whose ops changed (another "
            "batch, a fusion)"
        )
        + f"; flagged when slower by more than {cmp.threshold_pct:g}%, by more than the runs' own spread (IQRs "
        f"over the runs), and at least 1% of the baseline total; init ops listed, never flagged",
    ]
    changed = []
    for label, keys in (("only in the candidate (added)", cmp.added), ("only in the baseline (removed)", cmp.removed)):
        if keys:
            shown = ", ".join(f"{k[1]} [{k[2]}]" for k in keys[:6]) + (
                f" (+{len(keys) - 6} more)" if len(keys) > 6 else ""
            )
            changed.append(f"ops {label}: {shown}")
    steps = [*compare_steps.lines(cmp.steps), *compare_steps.rank_lines(cmp.per_rank)] if cmp.steps else []
    header = ["where", "OP Type", "Input Shapes", "baseline", "candidate", "delta(us)", "delta", ""]
    sections = [Section("Per op", lines=[*lines, *sides_line(cmp)], header=header, rows=rows)]
    sections += [Section("Ops added or removed", lines=changed)] if changed else []
    sections += [Section("Steps", lines=steps)] if steps else []
    return Report(f"msprof lab compare: {base} -> {cand}", [*sections, Section("Verdict", verdicts=[verdict])])


def sides_line(cmp) -> list[str]:
    """What each side ran in: the compute's precision and the batch, where the captures say; a precision change
    named with what it trades."""

    def pair(name: str, values: tuple, unknown: str) -> str:
        shown = [str(v) if v is not None else unknown for v in values]
        return f"{name} {shown[0]} -> {shown[1]}" if shown[0] != shown[1] else f"{name} {shown[0]} (both)"

    if cmp.precision == (None, None) and cmp.samples == (None, None):
        return []
    line = (
        f"sides: {pair('compute precision', cmp.precision, 'unknown')}; "
        f"{pair('samples per step', cmp.samples, 'unknown')}"
    )
    if cmp.precision_changed:
        line += (
            "; a change of precision trades accuracy, which op times cannot show: python -m common precision "
            "measures it per op against fp32"
        )
    return [line]
