"""Per-op precision: each op's output against the fp32 reference of the same op, and the first op that diverges.

Pure functions over arrays that a collector produced (``common.collect.precision``): the metrics of
msaccucmp (cosine similarity, max absolute error, max relative error) and the share of non-finite
values, the tolerance a candidate is judged by, and the first op, in execution order, whose error
leaves it. Definitions, thresholds and their sources: docs/precision.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Tolerance:
    """What an op's output must meet against the reference: a minimum cosine similarity, and a maximum absolute
    error of ``rel`` times the output's scale (max |reference|), never below ``abs_floor``."""

    name: str
    cosine_min: float
    rel: float
    why: str
    abs_floor: float = 1e-3  # msprobe's MaxAbsErr line: what an output of scale <= 1 is held to in fp32

    def abs_limit(self, scale: float) -> float:
        return max(self.abs_floor, self.rel * scale)

    def describe(self) -> str:
        return (
            f"{self.name}: cosine >= {self.cosine_min:g}, max abs err <= max({self.abs_floor:g}, "
            f"{self.rel:g} x max|ref|)"
        )


# msprobe compare's acceptance line (mstt, msprobe docs 10.accuracy_compare_PyTorch.md): cosine > 0.99 and
# MaxAbsErr < 0.001. It is absolute; fp32 rounding is relative (2^-23 per rounding), so a correct op whose
# values are ~1e4 would fail it: beyond max|ref| = 1 the bound grows with the scale.
FP32 = Tolerance("fp32", 0.99, 1e-3, "msprobe compare: cosine > 0.99 and MaxAbsErr < 0.001")
# fp16 keeps 11 significant bits: a stored value is off by up to 2^-11 ~ 4.9e-4 of itself (IEEE 754 binary16).
# A dot product of K such values adds K rounded terms; their errors grow like sqrt(K) x 2^-11, 1.6e-2 of the
# scale for K = 1024 (TinyMLP's width), and every layer passes its error on. 2e-2 of the scale (what 03's
# output check allows) sits above that and far below a wrong op, which moves an output by its own size.
FP16 = Tolerance("fp16", 0.99, 2e-2, "fp16's unit roundoff 2^-11 grown over a 1024-term sum: sqrt(1024) x 2^-11")
# bf16 keeps 8 significant bits: 2^-8 per rounding, 8 x fp16's; the same reasoning gives 8 x the bound.
BF16 = Tolerance("bf16", 0.99, 16e-2, "bf16's unit roundoff 2^-8, 8 x fp16's")
TOLERANCES = {"fp32": FP32, "fp16": FP16, "bf16": BF16}


@dataclass(frozen=True)
class OpOutput:
    """One op's output as a path ran it: its module path, what it computes, its array (None: not exposed)."""

    path: str
    computes: str
    array: np.ndarray | None
    # the modules a converter fused into this op before ``path``, whose own outputs the built graph no longer has:
    # the op is compared with ``path``'s reference, where the fusion ends, and shown as ``a+b+path``
    covers: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return "+".join((*self.covers, self.path))


@dataclass(frozen=True)
class OpRow:
    """One op of a candidate against the reference: the metrics, and whether they meet the tolerance."""

    path: str
    computes: str
    cosine: float
    max_abs_err: float
    max_rel_err: float
    nonfinite_share: float
    scale: float  # max |reference| over its finite values
    ok: bool
    why: str  # what left the tolerance; "" when ok

    @property
    def abs_err_of_scale(self) -> float:
        """Max abs error as a share of the output's scale: how the error grows layer by layer."""
        return self.max_abs_err / self.scale if self.scale else self.max_abs_err


@dataclass
class CandidateResult:
    """One candidate (a path, a precision) compared op by op, in execution order."""

    name: str
    how: str  # how the candidate ran, one line
    tolerance: Tolerance
    rows: list[OpRow] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)  # what ran without a counterpart, one line each
    note: str = ""  # why nothing was compared (model files missing ...)

    @property
    def first_divergent(self) -> OpRow | None:
        return next((r for r in self.rows if not r.ok), None)


def op_metrics(candidate: np.ndarray, reference: np.ndarray) -> dict[str, float]:
    """msaccucmp's metrics over the elements finite in both, and the candidate's share of non-finite values.

    cosine = sum(c*r) / (|c| |r|); max abs err = max |c - r|; max rel err = max |c - r| / |r| over the
    elements with r != 0; scale = max |r| over the reference's finite values. Two all-zero outputs have cosine 1;
    one all-zero against another, 0.
    """
    c = np.asarray(candidate, dtype=np.float64).ravel()
    r = np.asarray(reference, dtype=np.float64).ravel()
    if c.shape != r.shape:
        raise ValueError(f"shape {np.shape(candidate)} against the reference's {np.shape(reference)}")
    finite_c, finite_r = np.isfinite(c), np.isfinite(r)
    both = finite_c & finite_r
    share = float((~finite_c).mean()) if c.size else 0.0
    scale = float(np.abs(r[finite_r]).max()) if finite_r.any() else 0.0
    c, r = c[both], r[both]
    if c.size == 0:
        return {
            "cosine": math.nan,
            "max_abs_err": math.nan,
            "max_rel_err": math.nan,
            "nonfinite_share": share,
            "scale": scale,
        }
    diff = np.abs(c - r)
    denom = float(np.linalg.norm(c) * np.linalg.norm(r))
    cosine = float(c @ r / denom) if denom else (1.0 if not diff.any() else 0.0)
    nonzero = r != 0
    rel = float((diff[nonzero] / np.abs(r[nonzero])).max()) if nonzero.any() else 0.0
    return {
        "cosine": cosine,
        "max_abs_err": float(diff.max()),
        "max_rel_err": rel,
        "nonfinite_share": share,
        "scale": scale,
    }


def judge(metrics: dict[str, float], tolerance: Tolerance, reference_nonfinite: float = 0.0) -> str:
    """What leaves the tolerance ("" when nothing does): non-finite values the reference does not have, a
    cosine below the minimum, a max abs error above the limit."""
    reasons = []
    if metrics["nonfinite_share"] > reference_nonfinite:
        reasons.append(f"{100 * metrics['nonfinite_share']:.3g}% non-finite (inf/nan)")
    if not metrics["cosine"] >= tolerance.cosine_min:  # nan (nothing finite to compare) fails too
        reasons.append(f"cosine {metrics['cosine']:.6g} < {tolerance.cosine_min:g}")
    limit = tolerance.abs_limit(metrics["scale"])
    if not metrics["max_abs_err"] <= limit:
        reasons.append(f"max abs err {metrics['max_abs_err']:.3g} > {limit:.3g}")
    return "; ".join(reasons)


def compare_ops(
    name: str, how: str, tolerance: Tolerance, outputs: list[OpOutput], reference: dict[str, np.ndarray]
) -> CandidateResult:
    """Every op of ``outputs`` (in execution order) against the reference op of the same path (a fused op: of the
    last module it covers); a row is named by the op's label (``inp+act`` for a fused one)."""
    result = CandidateResult(name, how, tolerance)
    for op in outputs:
        ref = reference.get(op.path)
        if ref is None or op.array is None:
            result.unmatched.append(
                f"{op.label} ({op.computes}): "
                + ("no reference op of that path" if ref is None else "its output was not exposed")
            )
            continue
        try:
            metrics = op_metrics(op.array, ref)
        except ValueError as err:
            result.unmatched.append(f"{op.label} ({op.computes}): {err}")
            continue
        ref_nonfinite = float((~np.isfinite(np.asarray(ref, dtype=np.float64))).mean()) if np.size(ref) else 0.0
        why = judge(metrics, tolerance, ref_nonfinite)
        result.rows.append(
            OpRow(
                op.label,
                op.computes,
                metrics["cosine"],
                metrics["max_abs_err"],
                metrics["max_rel_err"],
                metrics["nonfinite_share"],
                metrics["scale"],
                not why,
                why,
            )
        )
    return result


def first_divergence_line(result: CandidateResult) -> str:
    """One line: the first op out of tolerance, named with its path and what it computes, or that none is."""
    if result.note:
        return f"{result.name}: not compared: {result.note}"
    if not result.rows:
        return f"{result.name}: no op could be matched with the reference"
    first = result.first_divergent
    if first is None:
        return f"{result.name}: no divergent op ({len(result.rows)} ops within {result.tolerance.describe()})"
    at = result.rows.index(first) + 1
    return (
        f"{result.name}: first divergent op: {first.path} ({first.computes}), op {at} of {len(result.rows)}: "
        f"{first.why}"
    )
