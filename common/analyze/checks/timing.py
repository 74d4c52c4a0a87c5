"""The checks that read a duration: they decide on medians over the forwards, steps or runs a capture holds,
with a tolerance from the spread they measured (:mod:`common.analyze.robust`), printed in their line; a run
too noisy to decide is said to be so ([N/A], "inconclusive"), never failed. A wrong model, or a capture whose
numbers disagree beyond their noise, still fails.
"""

from __future__ import annotations

import statistics
from common.analyze.bounds.step import summarize_steps
from common.analyze.families import family_share, forward_share_estimates
from common.analyze.robust import Estimate, agreement, estimate, quadrature
from common.formats.records import OpStat, StepTime, Task
from common.verdict import Verdict, not_applicable
from common.workload import Expected


def check_top_family(
    stats: list[OpStat],
    family: str,
    where: str,
    exclude: tuple[str, ...] = ("init",),
    groups: list[list[Task]] | None = None,
    unit: str = "forward",
) -> Verdict:
    """``family`` has the largest share of op time (init ops left out: they are one-off set-up).

    With ``groups`` (the tasks of each measured forward, step or execute) the shares are medians over the
    forwards, so one slow forward cannot decide; when another family leads by less than the two shares'
    measured spread, the run cannot tell them apart and the check says so ([N/A]) instead of failing."""
    name = f"{family} dominates ({where})"
    if groups is not None and len(groups) >= 2:
        estimates = forward_share_estimates(groups, exclude)
        if estimates:
            return _top_family_of_medians(estimates, family, name, unit)
    shares = family_share(stats, exclude)
    if not shares:
        return Verdict(name, False, "no ops found")
    top = max(shares, key=shares.get)
    detail = ", ".join(f"{f} {100 * s:.1f}%" for f, s in sorted(shares.items(), key=lambda kv: -kv[1])[:4])
    return Verdict(name, top == family, f"{detail} (init excluded)")


def _top_family_of_medians(estimates: dict[str, Estimate], family: str, name: str, unit: str) -> Verdict:
    ranked = sorted(estimates.items(), key=lambda kv: -kv[1].median)
    n = ranked[0][1].n
    shown = ", ".join(f"{f} {100 * e.median:.1f}% (IQR {100 * e.q1:.1f}-{100 * e.q3:.1f})" for f, e in ranked[:4])
    detail = f"median share over {n} {unit}s: {shown} (init excluded)"
    top, lead = ranked[0]
    if top == family:
        return Verdict(name, True, detail)
    mine = estimates.get(family)
    if mine is None:
        return Verdict(name, False, f"{detail}; no {family} op recorded")
    gap, noise = lead.median - mine.median, quadrature(lead.iqr, mine.iqr)
    if gap <= noise:
        return not_applicable(
            name,
            f"inconclusive: {top} leads {family} by {100 * gap:.1f} points, within the "
            f"measured spread ({100 * noise:.1f} points): too noisy to decide; {detail}",
        )
    return Verdict(
        name,
        False,
        f"{detail}; {top} leads by {100 * gap:.1f} points, beyond the measured spread ({100 * noise:.1f} points)",
    )


# Σ op time per step and mean Computing are built differently (a sum vs a busy-time union);
# on one stream they agree unless ops overlap or the step table is inconsistent.
SUM_VS_COMPUTING_TOLERANCE = 0.10


def check_sum_vs_computing(tasks: list[Task], steps: list[StepTime], where: str) -> Verdict:
    """Σ op time of a step is within 10% of that step's Computing, judged on the median over the steps (one
    damaged step does not decide); where the tasks carry no Step Id matching the table, Σ op time ÷ steps
    against the median Computing."""
    summary = summarize_steps(steps)
    name = f"op time vs Computing ({where})"
    if summary is None or not tasks:
        return Verdict(name, False, "no steps or no ops to compare")
    tolerance = f"tolerance {100 * SUM_VS_COMPUTING_TOLERANCE:.0f}%"
    per_step: dict[int, float] = {}
    for t in tasks:
        if t.step_id is not None:
            per_step[t.step_id] = per_step.get(t.step_id, 0.0) + t.duration_us
    computing = {s.step: s.computing_us for s in steps if s.step is not None}
    paired = [(per_step[k], computing[k]) for k in sorted(per_step) if k in computing]
    if len(paired) == len(steps) and len(paired) >= 2:
        offs = [abs(a - c) / c if c else 1.0 for a, c in paired]
        rel = estimate(offs)
        ops = estimate([a for a, _ in paired])
        comp = estimate([c for _, c in paired])
        return Verdict(
            name,
            rel.median <= SUM_VS_COMPUTING_TOLERANCE,
            f"per step over {len(paired)} steps: sum of op time {ops.text(unit=' us')}, Computing "
            f"{comp.text(unit=' us')}; off by median {100 * rel.median:.1f}% "
            f"(largest {100 * max(offs):.1f}%; {tolerance})",
        )
    mean_op = sum(t.duration_us for t in tasks) / summary.steps
    comp = estimate([s.computing_us for s in steps])
    rel = abs(mean_op - comp.median) / comp.median if comp.median else 1.0
    return Verdict(
        name,
        rel <= SUM_VS_COMPUTING_TOLERANCE,
        f"sum of op time / {summary.steps} steps = {mean_op:.1f} us, Computing {comp.text(unit=' us')}, "
        f"off by {100 * rel:.1f}% ({tolerance})",
    )


def check_declared_top_family(
    stats: list[OpStat],
    expected: Expected,
    where: str,
    groups: list[list[Task]] | None = None,
    unit: str = "forward",
    training: bool = False,
) -> Verdict:
    """The workload's EXPECT['top_family'] has the largest share of op time (with ``groups``: the largest median
    share per forward, check_top_family); N/A when it declares none, or when the steps trained (``training``)."""
    if training:
        return not_applicable(
            f"top family ({where})",
            "not applicable: EXPECT['top_family'] is about the forward; a training step adds backward and optimizer ops",
        )
    family = expected.expectations.get("top_family")
    if family is None:
        return not_applicable(f"top family ({where})", expected.not_applicable("top_family"))
    return check_top_family(stats, family, where, groups=groups, unit=unit)


# 01 and 04 run the same eager PyTorch ops through the same profiler, so a family's median share per
# forward is one quantity measured twice. Two allowances: SHARE_ALLOWANCE_PP is what separate processes
# on a quiet machine differ by; the measured noise (the two interquartile ranges of the per-forward
# shares, in quadrature) is added to it. When that noise alone exceeds SHARE_NOISE_CAP_PP the runs were
# too disturbed to decide: inconclusive, not a FAIL.
SHARE_ALLOWANCE_PP = 10.0
SHARE_NOISE_CAP_PP = 10.0
# On the CPU an op's host time can settle, for a whole process, at several times its usual value (the
# same GELU took a median 40, 95 and 600 us per call in separate runs of one program: where its buffers
# land and which pages fault decide, docs/cross_mode_checks.md). The two modes are two processes, so
# when the same op (type and shapes) differs by more than this factor per call between them, a share
# difference is that process's state, not the collectors': inconclusive on the portable backend. An
# NPU's kernels do not change speed between processes, so there it fails.
SAME_OP_RATIO = 2.0


def per_call_medians(groups: list[list[Task]]) -> dict[tuple[str, str], float]:
    """The median duration of each op (type and input shapes) over every call in ``groups`` (µs)."""
    calls: dict[tuple[str, str], list[float]] = {}
    for group in groups:
        for t in group:
            calls.setdefault((t.op_type, t.input_shapes or ""), []).append(t.duration_us)
    return {k: statistics.median(v) for k, v in calls.items()}


def _process_state(per_call: dict[str, dict[tuple[str, str], float]]) -> str | None:
    """The op whose per-call median differs most between the two modes, when by more than SAME_OP_RATIO."""
    (ma, a), (mb, b) = per_call.items()
    ratios = [(max(a[k], b[k]) / min(a[k], b[k]), k) for k in set(a) & set(b) if min(a[k], b[k]) > 0]
    if not ratios:
        return None
    ratio, key = max(ratios)
    if ratio <= SAME_OP_RATIO:
        return None
    return (
        f"the same op ({key[0]}{f' [{key[1]}]' if key[1] else ''}) took a median {a[key]:,.1f} us per call in "
        f"{ma} and {b[key]:,.1f} us in {mb} ({ratio:.1f}x, above {SAME_OP_RATIO:g}x): one process ran it slower "
        f"(allocation, caches, another program), which moves the shares whatever the collector"
    )


def check_share_agreement(
    estimates: dict[str, Estimate | None],
    family: str,
    per_call: dict[str, dict[tuple[str, str], float]] | None = None,
    allowance_pp: float = SHARE_ALLOWANCE_PP,
    noise_cap_pp: float = SHARE_NOISE_CAP_PP,
) -> Verdict:
    """``family``'s median share of forward time agrees between two modes (``estimates``: mode -> the family's
    share per forward, as a median with its quartiles, forward_share_estimates), within the allowance plus
    the spread both runs measured; inconclusive ([N/A]) when the spread is too large to decide, or (with
    ``per_call``, the portable backend's per-op medians of each mode) when one process ran an op at another speed."""
    modes = list(estimates)
    name = f"{family} share of forward time agrees ({' vs '.join(modes)})"
    missing = [m for m, e in estimates.items() if e is None]
    if missing or len(modes) != 2:
        return Verdict(name, False, f"no per-forward {family} time in {', '.join(missing) or 'the runs'}")
    a, b = (estimates[m] for m in modes)
    pp = a.scaled(100), b.scaled(100)
    agreed = agreement(pp[0], pp[1], allowance_pp, noise_cap_pp)
    listed = "; ".join(f"{m} {e.text('.1f', '%')}" for m, e in zip(modes, pp))
    detail = f"{listed}: {agreed.text(' points')} (init ops excluded)"
    if agreed.outcome == "inconclusive":
        return not_applicable(
            name,
            f"inconclusive: the runs' own spread ({agreed.noise:.1f} points) is above "
            f"{noise_cap_pp:g} points, too noisy to decide; {detail}; "
            "re-run on a quieter machine",
        )
    if agreed.outcome == "failed" and per_call and (state := _process_state(per_call)):
        return not_applicable(name, f"inconclusive: {state}; {detail}; re-run (nox -s noise shows how often)")
    return Verdict(name, agreed.outcome == "ok", detail)


def check_regressions(cmp) -> Verdict:
    """A run comparison (common.analyze.compare.Comparison) flags no op and no total beyond its threshold."""
    unit = f"us per {cmp.per}"
    total_pct = 100 * (cmp.cand_total_us - cmp.base_total_us) / cmp.base_total_us
    n = len(cmp.regressions) + int(cmp.total_flagged)
    if min(cmp.base_runs, cmp.cand_runs) < 2:
        spread = "; one run on a side: no spread measured, so one disturbed run can decide (--repeat 3 on each side)"
    else:
        spread = f", the runs' spread {cmp.total_noise_us:,.1f} {unit}"
    undecided = cmp.undecided
    noisy = ""
    if undecided or cmp.total_within_noise:
        what = (["the total"] if cmp.total_within_noise else []) + [d.key[1] for d in undecided[:3]]
        noisy = (
            f"; slower beyond the threshold but within the runs' own spread, too noisy to decide: "
            f"{', '.join(what)}" + (f" and {len(undecided) - 3} more" if len(undecided) > 3 else "")
        )
    steps = ""
    if cmp.steps is not None:
        n += cmp.steps.verdict == "regression"
        steps = (
            f"; steps: {cmp.steps.metric} x{cmp.steps.ratio:.3f} ({cmp.steps.verdict}, noise "
            f"{cmp.steps.noise_us:,.2f} us)"
        )
    return Verdict(
        "no regression beyond the threshold",
        n == 0,
        f"total (init excluded) {cmp.base_total_us:,.1f} -> {cmp.cand_total_us:,.1f} {unit} ({total_pct:+.1f}%, "
        f"threshold {cmp.threshold_pct:g}%{spread}); {len(cmp.regressions)} op(s) flagged{noisy}{steps}",
    )
