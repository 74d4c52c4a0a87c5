"""Run comparison: a baseline against a candidate, op by op, with medians over repeated runs.

``python -m common compare <baseline> <candidate> [--threshold PCT]``. Each side is one output
folder (a mode's ``prof_out/``, a ``PROF_*/`` or ``*_ascend_pt/`` folder) or a folder of repeated
runs (``nox -s <mode> -- 0 --repeat N`` keeps them in ``<mode>/prof_runs/1..N``). Ops are matched
by where they ran (the 03 variant, if any), OP Type and Input Shapes; when those cover too little
(two exports that name ops differently: a Level0 capture has kernel names and no OP Type or shapes),
by op family (``common.analyze.families``), refusing only when the families differ too. The runs are read
by :mod:`common.formats.run_ops`. Times are
per profiled forward when run_info.json says how many there were. A regression is an op, or the total, slower
than the baseline by more than the threshold and by more than the spread the runs measured (the two sides'
interquartile ranges over their runs, in quadrature); it makes the exit status 1, so CI can keep a baseline.
Slower beyond the threshold but within that spread is said, not flagged: too noisy to decide. With one run a
side no spread is measured, and the verdict says so.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field

from common.analyze.compare_steps import StepComparison, compare_steps, step_side
from common.analyze.compare_steps import as_json as compare_steps_json
from common.analyze.bounds.op import precision_of
from common.analyze.families import op_family
from common.analyze.robust import estimate, quadrature
from common.errors import LabError
from common.formats.run_ops import Key, RunOps

# Ops below this share of the baseline total are listed but never flagged: a 5 us op that takes
# 6 us is +20% and means nothing next to a 4 ms step.
MIN_FLAG_SHARE = 0.01
# Fewer matched ops than this share of the baseline's time means the two sides ran different work.
MIN_MATCHED_SHARE = 0.5


def _check_task_files(base: list[RunOps], cand: list[RunOps]) -> None:
    """Per-op times come from op_summary / kernel_details: a side without them is named, with what it lacks."""
    for side, runs in (("baseline", base), ("candidate", cand)):
        for run in runs:
            if run.missing:
                more = f" (and {len(run.missing) - 1} more)" if len(run.missing) > 1 else ""
                raise LabError(
                    f"the {side} {run.folder} has no per-op times: {run.missing[0]}{more}",
                    "compare reads op_summary_<ts>.csv (msprof) or kernel_details.csv (torch_npu): export the "
                    "profile again (msprof --export=on writes op_summary), or give a folder that has them",
                )


def _check_same_workload(base: list[RunOps], cand: list[RunOps]) -> None:
    for what in ("mode", "backend"):
        b = {str(r.info.get(what)) for r in base if r.info}
        c = {str(r.info.get(what)) for r in cand if r.info}
        if len(b | c) > 1:
            raise LabError(
                f"not the same {what}: {', '.join(sorted(b))} (baseline) vs {', '.join(sorted(c))} (candidate)",
                "compare runs of one mode on one backend",
            )
    pers = {r.per for r in base + cand}
    if len(pers) > 1:
        counted = "baseline" if any(r.per == "forward" for r in base) else "candidate"
        other = "candidate" if counted == "baseline" else "baseline"
        raise LabError(
            f"the {counted} says how many forwards it profiled (a run of the lab) and the {other} does not "
            "(a capture made outside the lab), so their times per forward cannot be compared",
            "compare outputs of the same mode (both written by the lab, or both not)",
        )


@dataclass(frozen=True)
class OpDelta:
    key: Key
    base_us: float | None
    cand_us: float | None
    flagged: bool
    within_noise: bool = False  # slower beyond the threshold, but by less than the runs' own spread: not flagged

    @property
    def delta_us(self) -> float:
        return (self.cand_us or 0.0) - (self.base_us or 0.0)

    @property
    def delta_pct(self) -> float | None:
        return 100 * self.delta_us / self.base_us if self.base_us else None


@dataclass(frozen=True)
class Comparison:
    base_runs: int
    cand_runs: int
    per: str
    ops: list[OpDelta]
    base_total_us: float
    cand_total_us: float
    threshold_pct: float
    total_flagged: bool
    matched_by: str = "op"  # "op": (where, OP Type, Input Shapes); "family": (where, op family)
    total_noise_us: float = 0.0  # the spread of the totals over the runs (IQRs in quadrature); 0 with one run a side
    total_within_noise: bool = False
    steps: StepComparison | None = None  # the step view, when both sides have a step table
    added: list[Key] = field(default_factory=list)  # matched by family: the ops only the candidate ran, largest first
    removed: list[Key] = field(default_factory=list)  # ... and only the baseline
    precision: tuple[str | None, str | None] = (None, None)  # the compute's precision, baseline and candidate
    samples: tuple[int | None, int | None] = (None, None)  # samples per step (the batch), baseline and candidate
    per_rank: dict[int, StepComparison] = field(default_factory=dict)  # multi-rank captures: each rank's step view

    @property
    def precision_changed(self) -> bool:
        """Both sides' compute precision known and different: the candidate trades accuracy (or buys it back)."""
        return None not in self.precision and self.precision[0] != self.precision[1]

    @property
    def regressions(self) -> list[OpDelta]:
        return [d for d in self.ops if d.flagged]

    @property
    def undecided(self) -> list[OpDelta]:
        """Ops slower beyond the threshold by less than the spread the runs measured: too noisy to decide."""
        return [d for d in self.ops if d.within_noise]


def _medians(runs: list[RunOps]) -> dict[Key, float]:
    keys = {k for r in runs for k in r.ops}
    return {k: statistics.median(r.ops.get(k, 0.0) for r in runs) for k in keys}


def _iqrs(runs: list[RunOps]) -> dict[Key, float]:
    """Each op's interquartile range over the runs (µs); 0 with one run: no spread was measured."""
    keys = {k for r in runs for k in r.ops}
    if len(runs) < 2:
        return dict.fromkeys(keys, 0.0)
    return {k: estimate([r.ops.get(k, 0.0) for r in runs]).iqr for k in keys}


def _largest_only(ops: dict[Key, float], other: dict[Key, float], n: int = 4) -> str:
    """The ``n`` op keys of ``ops`` that ``other`` lacks, the largest in time first, and how many more."""
    only = sorted(((v, k) for k, v in ops.items() if k not in other), key=lambda vk: -vk[0])
    shown = ", ".join(f"{k[1]} [{k[2]}]" for _, k in only[:n]) or "-"
    return shown + (f" (+{len(only) - n} more)" if len(only) > n else "")


def compare(
    base: list[RunOps], cand: list[RunOps], threshold_pct: float, samples: tuple[int, int] | None = None
) -> Comparison:
    """Per-op and total deltas of the medians; regressions beyond ``threshold_pct`` flagged; the step view when
    both sides have step tables (per sample when their samples per step are known: run_info.json, or
    ``samples``, the baseline's and the candidate's)."""
    _check_task_files(base, cand)
    _check_same_workload(base, cand)
    b, c = _medians(base), _medians(cand)
    per, scale = base[0].per, (1, 1)
    counts = samples or (_samples(base), _samples(cand))
    if all(counts) and counts[0] != counts[1]:  # two batches: every op time per sample, as the steps
        scale = counts
        b = {k: v / scale[0] for k, v in b.items()}
        c = {k: v / scale[1] for k, v in c.items()}
        per = f"sample ({counts[0]} vs {counts[1]} per {per})"
    original_b, original_c = b, c

    def forward(ops: dict[Key, float]) -> dict[Key, float]:
        return {k: v for k, v in ops.items() if op_family(k[1]) != "init"}

    def covered(b: dict[Key, float], c: dict[Key, float]) -> float:
        """The share of the baseline's compute time (communication is waiting as much as work) that ``c`` has."""
        compute = {k: v for k, v in forward(b).items() if op_family(k[1]) != "communication"} or forward(b)
        total = sum(compute.values())
        return sum(v for k, v in compute.items() if k in c) / total if total else 0.0

    matched_by, share = "op", covered(b, c)
    names = {r.workload for r in base + cand}
    # both sides' run_info.json name the same workload, or the user said how many samples each step held (two
    # batches of one model, e.g. captures made outside the lab: compare A B --samples 1 64)
    one_workload = (len(names) == 1 and None not in names) or samples is not None
    if share < MIN_MATCHED_SHARE:
        # a side without shapes (a Level0 export: kernel names, no OP Type) can still be matched by family, and so
        # can one workload whose op set changed (a larger batch changes every shape; a fusion, the ops);
        # two sides with shapes that differ ran different work
        fb, fc = _by_family(b), _by_family(c)
        family_share = _family_overlap(fb, fc) if _unshaped(b) or _unshaped(c) else 0.0
        if family_share < MIN_MATCHED_SHARE and not one_workload:
            families = (
                f"; the compute families' shares overlap {100 * family_share:.0f}%"
                if _unshaped(b) or _unshaped(c)
                else ""
            )
            raise LabError(
                f"not the same workload: ops matching by type and shape cover {100 * share:.0f}% of the "
                f"baseline's time{families} (need {100 * MIN_MATCHED_SHARE:.0f}%); "
                f"only in baseline: {_largest_only(b, c)}; only in candidate: {_largest_only(c, b)}",
                "compare runs of the same model and mode (the same model at another batch or batch split: "
                "add --samples BASE CAND, the samples per step of each)",
            )
        matched_by, b, c = "family", fb, fc
    b_total, c_total = sum(forward(b).values()), sum(forward(c).values())
    limit = 1 + threshold_pct / 100
    # the runs' own spread: an op flagged must be slower by more than the threshold and by more than the noise
    if matched_by == "op":  # in the table's unit (per sample when the batches differ)
        bi, ci = ({k: v / n for k, v in _iqrs(runs).items()} for runs, n in zip((base, cand), scale))
    else:
        bi = ci = {}
    deltas = []
    for key in sorted(set(b) | set(c), key=lambda k: -max(b.get(k, 0.0), c.get(k, 0.0))):
        base_us, cand_us = b.get(key), c.get(key)
        big = max(base_us or 0.0, cand_us or 0.0) >= MIN_FLAG_SHARE * b_total
        slower = big and (cand_us or 0.0) > (base_us or 0.0) * limit and op_family(key[1]) != "init"
        noisy = slower and (cand_us or 0.0) - (base_us or 0.0) <= quadrature(bi.get(key, 0.0), ci.get(key, 0.0))
        deltas.append(OpDelta(key, base_us, cand_us, slower and not noisy, noisy))
    totals = [
        [sum(v for k, v in r.ops.items() if op_family(k[1]) != "init") / n for r in side]
        for side, n in zip((base, cand), scale)
    ]
    total_noise = quadrature(*(estimate(t).iqr if len(t) > 1 else 0.0 for t in totals))
    slower_total = c_total > b_total * limit
    total_noisy = slower_total and c_total - b_total <= total_noise
    steps = _step_view(base, cand, lambda r: r.steps, threshold_pct, samples)
    per_rank = _per_rank(base, cand, threshold_pct, samples) if steps else {}
    only = (
        [
            sorted((k for k in x if k not in y and op_family(k[1]) != "init"), key=lambda k: -x[k])
            for x, y in ((original_c, original_b), (original_b, original_c))
        ]
        if matched_by == "family"
        else [[], []]
    )
    return Comparison(
        len(base),
        len(cand),
        per,
        deltas,
        b_total,
        c_total,
        threshold_pct,
        slower_total and not total_noisy,
        matched_by,
        total_noise,
        total_noisy,
        steps,
        *only,
        precision=(_precision(base), _precision(cand)),
        samples=counts,
        per_rank=per_rank,
    )


def _per_rank(
    base: list[RunOps], cand: list[RunOps], threshold_pct: float, samples: tuple[int, int] | None
) -> dict[int, StepComparison]:
    """Each rank's step view, for the ranks every run of both sides recorded (two or more): which rank a fix sped
    up, which it slowed (a rebalanced slow rank: its own steps shorter, the others' waits too)."""
    ranks = set.intersection(*(set(r.rank_steps) for r in [*base, *cand]))
    views = {
        rank: _step_view(base, cand, lambda r, rank=rank: r.rank_steps[rank], threshold_pct, samples)
        for rank in (sorted(ranks) if len(ranks) > 1 else [])
    }
    return {rank: view for rank, view in views.items() if view is not None}


def _step_view(
    base: list[RunOps], cand: list[RunOps], steps_of, threshold_pct: float, samples: tuple[int, int] | None
) -> StepComparison | None:
    """The step view of ``steps_of(run)`` (a run's step rows: all of them, or one rank's), every run of a side
    pooled, per sample when the samples per step are known; None when a side has no steps."""
    sides = [
        step_side([steps_of(r) for r in runs], given or _samples(runs))
        for runs, given in zip((base, cand), samples or (None, None))
    ]
    return compare_steps(*sides, threshold_pct) if all(sides) else None


def _precision(runs: list[RunOps]) -> str | None:
    """The precision most of a side's compute time ran in, over all its runs (None when its tasks do not say)."""
    total: Counter = Counter()
    for r in runs:
        total.update(r.dtype_us)  # adds each run's times (zeros kept, as a sum would)
    return precision_of(total)


def _samples(runs: list[RunOps]) -> int | None:
    """The samples per step all of a side's runs recorded (None when they do not say, or disagree)."""
    found = {r.samples for r in runs}
    return found.pop() if len(found) == 1 else None


FAMILY_SHAPES = "(family)"  # the shapes column of a family row: a family has no one shape


def _unshaped(ops: dict[Key, float]) -> bool:
    """Most of the compute time without Input Shapes: an export that records none (Level0)."""
    compute = {k: v for k, v in ops.items() if op_family(k[1]) not in ("communication", "init")}
    total = sum(compute.values())
    return bool(total) and sum(v for k, v in compute.items() if k[2] in ("", "N/A")) > MIN_MATCHED_SHARE * total


def _family_overlap(b: dict[Key, float], c: dict[Key, float]) -> float:
    """How alike two sides' compute is: the sum over families of the smaller of the two shares of compute time
    (1 = the same mix; communication and init left out: their time is waiting and setup, not the model)."""

    def shares(ops: dict[Key, float]) -> dict[Key, float]:
        compute = {k: v for k, v in ops.items() if k[1] not in ("communication", "init")} or ops
        total = sum(compute.values())
        return {k: v / total for k, v in compute.items()} if total else {}

    sb, sc = shares(b), shares(c)
    return sum(min(v, sc.get(k, 0.0)) for k, v in sb.items())


def _by_family(ops: dict[Key, float]) -> dict[Key, float]:
    """Op times summed per (where, op family): what two exports that name ops differently still share."""
    out: dict[Key, float] = {}
    for (where, op_type, _), us in ops.items():
        key = (where, op_family(op_type), FAMILY_SHAPES)
        out[key] = out.get(key, 0.0) + us
    return out


def comparison_json(cmp: Comparison, verdict) -> dict:
    """``compare --json``: the per-op rows, the totals, the step view (key ``steps``) and the verdict."""

    def key(k: Key) -> dict:
        return {"where": k[0], "op_type": k[1], "input_shapes": k[2]}

    return {
        "per": cmp.per,
        "runs": {"baseline": cmp.base_runs, "candidate": cmp.cand_runs},
        "matched_by": cmp.matched_by,
        "threshold_pct": cmp.threshold_pct,
        "total": {
            "baseline_us": cmp.base_total_us,
            "candidate_us": cmp.cand_total_us,
            "noise_us": cmp.total_noise_us,
            "flagged": cmp.total_flagged,
            "within_noise": cmp.total_within_noise,
        },
        "ops": [
            {
                **key(d.key),
                "baseline_us": d.base_us,
                "candidate_us": d.cand_us,
                "delta_pct": d.delta_pct,
                "flagged": d.flagged,
                "within_noise": d.within_noise,
            }
            for d in cmp.ops
        ],
        "added": [key(k) for k in cmp.added],
        "removed": [key(k) for k in cmp.removed],
        "steps": {
            **compare_steps_json(cmp.steps),
            "per_rank": [
                {"rank": rank, **{k: v for k, v in compare_steps_json(c).items() if k not in ("baseline", "candidate")}}
                for rank, c in cmp.per_rank.items()
            ],
        }
        if cmp.steps
        else None,
        "precision": {"baseline": cmp.precision[0], "candidate": cmp.precision[1]},
        "samples": {"baseline": cmp.samples[0], "candidate": cmp.samples[1]},
        "verdict": {"name": verdict.name, "ok": verdict.ok, "detail": verdict.detail},
    }
