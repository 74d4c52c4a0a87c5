"""Pure functions over parsed tables: families, top ops, per-forward counts, step time, verdicts.

Nothing here reads files or prints; :mod:`common.report` renders what these return.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from common.formats.records import OVERLAP_EVENTS, OpStat, OverlapEvents, StepTime, Task, TraceEvent

# One table maps NPU op types and portable (PyTorch / ONNX Runtime / AscendC twin) names to a family.
# Patterns are matched against the lower-cased OP Type; the first match wins.
OP_FAMILIES: list[tuple[str, str]] = [
    ("cast", r"^cast$|^aten::(_to_copy|to)$|^aten::_?cast"),
    ("matmul", r"matmul|^gemm$|^fusedmatmul$|^aten::(addmm|mm|bmm|baddbmm|matmul|linear)$"),
    # Erf: ONNX Runtime runs an unfused GELU as x * 0.5 * (1 + Erf(x / sqrt 2)), one Erf per GELU;
    # its Div/Mul/Add neighbours stay in their own families.
    ("gelu", r"gelu|^aten::(relu|silu|tanh|sigmoid)$|^(relu|fastgelu|erf|swish|silu|sigmoid)$"),
    ("init", r"random|^aten::(uniform_|normal_|randn|rand|kaiming_uniform_|zero_|fill_|empty)$|^dsa"),
    ("memcpy", r"memcpy|^aten::copy_$|^transdata$|^identity$"),
    ("add", r"^add$|^aten::add_?$|^add_custom$"),
]
FAMILY_ORDER = ["matmul", "gelu", "cast", "add", "memcpy", "init", "other"]


def op_family(op_type: str) -> str:
    """The family (matmul, gelu, cast, add, memcpy, init, other) of an NPU or portable op type."""
    name = op_type.strip().lower()
    for family, pattern in OP_FAMILIES:
        if re.search(pattern, name):
            return family
    return "other"


@dataclass(frozen=True)
class Verdict:
    """One check: what was compared, the numbers, and whether it held."""

    name: str
    ok: bool
    detail: str


def family_time(stats: list[OpStat]) -> dict[str, float]:
    """Total µs per family."""
    totals: dict[str, float] = defaultdict(float)
    for s in stats:
        totals[op_family(s.op_type)] += s.total_us
    return dict(totals)


def family_share(stats: list[OpStat], exclude: tuple[str, ...] = ()) -> dict[str, float]:
    """Share (0..1) of summed op time per family, optionally leaving some families out."""
    totals = {f: t for f, t in family_time(stats).items() if f not in exclude}
    grand = sum(totals.values())
    return {f: (t / grand if grand else 0.0) for f, t in totals.items()}


def family_counts(tasks: list[Task]) -> Counter[str]:
    return family_counts_of_types(Counter(t.op_type for t in tasks))


def family_counts_of_types(type_counts: dict[str, int]) -> Counter[str]:
    """Task count per family from task counts per OP Type (what an engine's group-by gives)."""
    out: Counter[str] = Counter()
    for op_type, count in type_counts.items():
        out[op_family(op_type)] += count
    return out


def per_forward_counts(tasks: list[Task], forwards: int) -> dict[str, float]:
    """Task count per family divided by the number of profiled forwards."""
    return {f: c / forwards for f, c in family_counts(tasks).items()}


def check_counts(tasks: list[Task], forwards: int, expected: dict[str, int], where: str) -> Verdict:
    """Each expected family appears exactly ``expected[f]`` times per forward."""
    counts = family_counts(tasks)
    parts, ok = [], True
    for family, per_forward in sorted(expected.items()):
        want = per_forward * forwards
        got = counts.get(family, 0)
        ok &= got == want
        parts.append(f"{family} {got} (want {per_forward} x {forwards} = {want})")
    return Verdict(f"op counts per forward ({where})", ok, "; ".join(parts))


def check_top_family(stats: list[OpStat], family: str, where: str, exclude: tuple[str, ...] = ("init",)) -> Verdict:
    """``family`` has the largest share of op time (init ops left out: they are one-off set-up)."""
    shares = family_share(stats, exclude)
    if not shares:
        return Verdict(f"{family} dominates ({where})", False, "no ops found")
    top = max(shares, key=shares.get)
    detail = ", ".join(f"{f} {100 * s:.1f}%" for f, s in sorted(shares.items(), key=lambda kv: -kv[1])[:4])
    return Verdict(f"{family} dominates ({where})", top == family, f"{detail} (init excluded)")


def top_ops(stats: list[OpStat], n: int = 10) -> list[OpStat]:
    return sorted(stats, key=lambda s: s.total_us, reverse=True)[:n]


# Computing/Free below this share of the step means the host cannot keep the device busy.
HOST_BOUND_BELOW = 0.5


@dataclass(frozen=True)
class StepSummary:
    steps: int
    mean_step_us: float
    mean_computing_us: float
    mean_free_us: float

    @property
    def computing_ratio(self) -> float:
        return self.mean_computing_us / self.mean_step_us if self.mean_step_us else 0.0


def summarize_steps(steps: list[StepTime]) -> StepSummary | None:
    if not steps:
        return None
    return StepSummary(
        steps=len(steps),
        mean_step_us=statistics.fmean(s.total_us for s in steps),
        mean_computing_us=statistics.fmean(s.computing_us for s in steps),
        mean_free_us=statistics.fmean(s.free_us for s in steps),
    )


def bound_verdict(summary: StepSummary) -> str:
    """Host-bound or compute-bound, with the numbers that decide it."""
    ratio = summary.computing_ratio
    kind = "host-bound" if ratio < HOST_BOUND_BELOW else "compute-bound"
    return (
        f"{kind}: Computing {summary.mean_computing_us:.1f} us vs Free {summary.mean_free_us:.1f} us per step "
        f"(Computing = {100 * ratio:.1f}% of the step; host-bound below {100 * HOST_BOUND_BELOW:.0f}%)"
    )


def overlap_step_times(overlap: OverlapEvents) -> list[StepTime]:
    """step_trace_time rows summed from a timeline's ``Overlap Analysis`` events (the one computation).

    torch_npu builds step_trace_time.csv from these events: Computing, Communication,
    Communication(Not Overlapped) and Free are the summed durations of the same-named events,
    Bubble of the ``hcom_receive*`` events, Overlapped = Communication - Not Overlapped, Stage =
    first to last event - Bubble. With ProfilerStep#N events each event counts in the step
    whose start is the last one at or before it (the device runs behind the host, so a step
    lasts until the next one starts; the last step is open-ended) and Preparing = first event -
    step start; events before the first step are not counted. Without ProfilerStep events the
    whole timeline is one row with an empty Step and no Preparing, as torch_npu writes it when
    no schedule ran. Empty when the timeline has no Overlap Analysis events.
    """
    if not len(overlap.ts_us):
        return []
    device = next((label.split()[1] for label in overlap.labels if label.startswith("NPU ") and len(label.split()) > 1),
                  "host" if "CPU" in overlap.labels else None)
    ends = overlap.ts_us + overlap.dur_us
    starts = [start for _, start in overlap.steps]
    ranges = [(step, start, starts[i + 1] if i + 1 < len(starts) else math.inf)
              for i, (step, start) in enumerate(overlap.steps)] or [(None, -math.inf, math.inf)]
    rows = []
    for step, start, end in ranges:
        inside = (overlap.ts_us >= start) & (overlap.ts_us < end)
        if not inside.any():
            continue
        total = [float(overlap.dur_us[inside & (overlap.kind == k)].sum()) for k in range(len(OVERLAP_EVENTS))]
        computing, communication, not_overlapped, free = total
        in_step = (overlap.bubble_ts_us >= start) & (overlap.bubble_ts_us < end)
        bubble = float(overlap.bubble_dur_us[in_step].sum())
        first = float(overlap.ts_us[inside].min())
        rows.append(StepTime(
            step=step, computing_us=computing, communication_not_overlapped_us=not_overlapped,
            overlapped_us=communication - not_overlapped, communication_us=communication, free_us=free,
            stage_us=float(ends[inside].max()) - first - bubble, bubble_us=bubble,
            preparing_us=first - start if step is not None else None, device_id=device,
        ))
    return rows


def overlap_step_time(events: list[TraceEvent]) -> StepTime | None:
    """One step_trace_time row for a whole timeline (ProfilerStep ranges ignored); None without Overlap Analysis."""
    from common.formats.readers import overlap_events

    whole = [e for e in events if not e.name.startswith("ProfilerStep#")]
    rows = overlap_step_times(overlap_events([whole], Path("<events>")))
    return rows[0] if rows else None


# Σ op time per step and mean Computing are built differently (a sum vs a busy-time union);
# on one stream they agree unless ops overlap or the step table is inconsistent.
SUM_VS_COMPUTING_TOLERANCE = 0.10


def check_sum_vs_computing(tasks: list[Task], steps: list[StepTime], where: str) -> Verdict:
    """Σ op time ÷ active steps is within 10% of mean Computing."""
    summary = summarize_steps(steps)
    if summary is None or not tasks:
        return Verdict(f"op time vs Computing ({where})", False, "no steps or no ops to compare")
    per_step = sum(t.duration_us for t in tasks) / summary.steps
    rel = abs(per_step - summary.mean_computing_us) / summary.mean_computing_us if summary.mean_computing_us else 1.0
    return Verdict(
        f"op time vs Computing ({where})",
        rel <= SUM_VS_COMPUTING_TOLERANCE,
        f"sum of op time / {summary.steps} steps = {per_step:.1f} us, mean Computing = "
        f"{summary.mean_computing_us:.1f} us, off by {100 * rel:.1f}% (tolerance {100 * SUM_VS_COMPUTING_TOLERANCE:.0f}%)",
    )


def check_output(metrics: dict[str, float], where: str, max_abs_tol: float, cosine_min: float) -> Verdict:
    """The model's output matches the fp32 reference within the given tolerances."""
    ok = metrics["max_abs_diff"] <= max_abs_tol and metrics["cosine"] >= cosine_min
    return Verdict(
        f"output matches fp32 reference ({where})",
        ok,
        f"max abs diff {metrics['max_abs_diff']:.3g} (tol {max_abs_tol:g}), mean abs diff "
        f"{metrics['mean_abs_diff']:.3g}, cosine {metrics['cosine']:.6f} (min {cosine_min})",
    )


# --- across modes --------------------------------------------------------------------------------
# 01 and 04 run the same eager PyTorch ops, but 01 records every forward of the whole program
# (warm-up forwards and first calls included) while 04 records 5 steady-state steps; on a
# CPU shared with other work the small, memory-bound GELUs slow down more than the MatMuls, which
# moved the MatMul share by up to 7 points between the two modes in our runs. 15 points leaves room
# for that, and still fails when one mode counts something the other does not (the unfiltered init
# ops alone are ~25% of 01's op time).
SHARE_AGREEMENT_PP = 15.0


def forward_shares(stats: list[OpStat]) -> dict[str, float]:
    """Family shares of forward-pass time: one-off init ops (weight init, random input) left out."""
    return family_share(stats, exclude=("init",))


def check_share_agreement(shares: dict[str, dict[str, float]], family: str, tolerance_pp: float) -> Verdict:
    """``family``'s share of forward time agrees across modes within ``tolerance_pp`` percentage points."""
    values = {mode: 100 * s.get(family, 0.0) for mode, s in shares.items()}
    spread = max(values.values()) - min(values.values()) if values else 0.0
    listed = ", ".join(f"{mode} {v:.1f}%" for mode, v in values.items())
    return Verdict(
        f"{family} share of forward time agrees ({' vs '.join(values)})",
        bool(values) and spread <= tolerance_pp,
        f"{listed}: spread {spread:.1f} points (tolerance {tolerance_pp:g} points; init ops excluded)",
    )


def check_family_presence(per_forward: dict[str, float], family: str, present: bool, where: str) -> Verdict:
    """``family`` appears (present=True) or does not appear (False) per forward in ``where``."""
    got = per_forward.get(family, 0.0)
    ok = got > 0 if present else got == 0
    return Verdict(
        f"{family} {'present' if present else 'absent'} ({where})", ok,
        f"{got:g} {family} tasks per forward (want {'> 0' if present else '0'})",
    )
