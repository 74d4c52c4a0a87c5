"""A fix judged by its steps: the step view of ``python -m common compare``, before and after.

A host-side fix (a larger batch, fewer host syncs, a fused optimizer) changes Free and the step time,
not per-op sums; a larger batch changes every input shape. So beside the per-op table, compare reads
each side's step table (torch_npu's step_trace_time, every run of a side pooled) and puts Step,
Computing, Communication(Not Overlapped), Overlapped and Free side by side, each as a median with its
spread. When the two sides ran different numbers of samples per step (the batch: run_info.json's
``samples``, or ``--samples A B``), the step time is compared per sample. The verdict is on
the noise: a gain or a regression only beyond the two sides' spread (their IQRs in quadrature), a
regression only beyond the threshold too; otherwise "within noise".

Pure functions over step rows; nothing here reads files.
"""

from __future__ import annotations

from dataclasses import dataclass

from common.analyze.robust import Estimate, estimate, quadrature
from common.formats.records import StepTime

FIELDS = {
    "Step": "total_us",
    "Computing": "computing_us",
    "Communication(Not Overlapped)": "communication_not_overlapped_us",
    "Overlapped": "overlapped_us",
    "Free": "free_us",
}


@dataclass(frozen=True)
class StepSide:
    runs: int
    steps: int
    samples: int | None  # samples per step (the batch), when known
    fields: dict[str, Estimate]  # FIELDS -> the median over every step of every run, with its quartiles

    def per_sample(self) -> Estimate | None:
        """The step time per sample, when the samples per step are known."""
        if not self.samples:
            return None
        return self.fields["Step"].scaled(1 / self.samples)


@dataclass(frozen=True)
class StepComparison:
    base: StepSide
    cand: StepSide
    metric: str  # "step time per sample" or "step time"
    before: Estimate
    after: Estimate
    ratio: float  # after / before (medians)
    per_sample_ratio: float | None  # the same per sample, when both sides' samples are known
    noise_us: float  # the two sides' IQRs of the metric, in quadrature
    verdict: str  # "gain" | "within noise" | "regression"

    @property
    def gain_pct(self) -> float:
        return 100 * (1 - self.ratio)


def step_side(runs: list[list[StepTime]], samples: int | None) -> StepSide | None:
    """One side's steps, every run pooled; None when no run has a step table."""
    rows = [s for run in runs for s in run]
    if not rows:
        return None
    return StepSide(
        sum(1 for run in runs if run),
        len(rows),
        samples,
        {name: estimate([getattr(s, attr) for s in rows]) for name, attr in FIELDS.items()},
    )


def compare_steps(base: StepSide, cand: StepSide, threshold_pct: float) -> StepComparison:
    """The step time (per sample when both sides' samples are known) before and after, judged on the noise."""
    per_sample = base.per_sample() is not None and cand.per_sample() is not None
    before = base.per_sample() if per_sample else base.fields["Step"]
    after = cand.per_sample() if per_sample else cand.fields["Step"]
    ratio = after.median / before.median if before.median else float("inf")
    noise = quadrature(before.iqr, after.iqr)
    delta = after.median - before.median
    if delta < -noise:
        verdict = "gain"
    elif delta > noise and ratio > 1 + threshold_pct / 100:
        verdict = "regression"
    else:
        verdict = "within noise"
    return StepComparison(
        base,
        cand,
        "step time per sample" if per_sample else "step time",
        before,
        after,
        ratio,
        ratio if per_sample else None,
        noise,
        verdict,
    )


def _speed(gain_pct: float) -> str:
    """A gain in words: ``23.8% faster``, ``23.8% slower``, or ``unchanged``."""
    if round(gain_pct, 1) == 0:
        return "unchanged"
    return f"{abs(gain_pct):.1f}% {'faster' if gain_pct > 0 else 'slower'}"


def lines(cmp: StepComparison) -> list[str]:
    """The step view as text: the verdict line, then each field before and after."""
    unit = "us per sample" if cmp.per_sample_ratio is not None else "us per step"
    samples = (
        f"; samples per step {cmp.base.samples} -> {cmp.cand.samples}" if cmp.base.samples or cmp.cand.samples else ""
    )
    out = [
        f"steps: {cmp.metric} {cmp.before.median:,.2f} -> {cmp.after.median:,.2f} {unit} "
        f"(x{cmp.ratio:.3f}, {_speed(cmp.gain_pct)}); the runs' noise {cmp.noise_us:,.2f} {unit}: "
        f"{cmp.verdict.upper()} ({cmp.base.steps} steps of {cmp.base.runs} run(s) vs {cmp.cand.steps} of "
        f"{cmp.cand.runs}{samples})"
    ]
    width = max(len(name) for name in FIELDS)
    for name in FIELDS:
        b, c = cmp.base.fields[name], cmp.cand.fields[name]
        out.append(f"  {name:<{width}}  {_cell(b)}  ->  {_cell(c)}".rstrip())
    return out


RANK_ROWS = 16  # more ranks than this: the ranks whose step time changed most, and a count of each verdict


def rank_lines(per_rank: dict[int, StepComparison]) -> list[str]:
    """Each rank's step view in one line (beyond RANK_ROWS ranks: those that changed most, both ways)."""
    if not per_rank:
        return []
    unit = "us per sample" if next(iter(per_rank.values())).per_sample_ratio is not None else "us per step"
    shown = (
        sorted(per_rank, key=lambda r: -abs(per_rank[r].ratio - 1))[:RANK_ROWS]
        if len(per_rank) > RANK_ROWS
        else sorted(per_rank)
    )
    counts = ", ".join(
        f"{sum(c.verdict == v for c in per_rank.values())} {v}" for v in ("gain", "within noise", "regression")
    )
    head = (
        f"per rank ({len(per_rank)} ranks: {counts}"
        + (f"; the {RANK_ROWS} whose step changed most" if len(shown) < len(per_rank) else "")
        + f"), {unit}:"
    )
    return [
        head,
        *(
            f"  rank {r:>5}: {per_rank[r].before.median:>12,.1f} -> {per_rank[r].after.median:>12,.1f} "
            f"(x{per_rank[r].ratio:.3f}; noise {per_rank[r].noise_us:,.1f}): {per_rank[r].verdict}"
            for r in shown
        ),
    ]


def _cell(e: Estimate) -> str:
    return f"{e.median:>12,.1f} us (IQR {e.q1:,.1f}-{e.q3:,.1f})".ljust(44)


def as_json(cmp: StepComparison) -> dict:
    """The step view for ``compare --json`` (key ``steps``)."""

    def side(s: StepSide) -> dict:
        return {
            "runs": s.runs,
            "steps": s.steps,
            "samples": s.samples,
            **{name: {"median": e.median, "q1": e.q1, "q3": e.q3, "n": e.n} for name, e in s.fields.items()},
        }

    return {
        "metric": cmp.metric,
        "before": cmp.before.median,
        "after": cmp.after.median,
        "ratio": cmp.ratio,
        "per_sample_ratio": cmp.per_sample_ratio,
        "gain_pct": cmp.gain_pct,
        "noise_us": cmp.noise_us,
        "verdict": cmp.verdict,
        "baseline": side(cmp.base),
        "candidate": side(cmp.cand),
    }
