"""Step time: per-step Computing / Communication / Free summaries and what bounds the step.

A step (torch_npu's Stage) is Computing + Communication(Not Overlapped) + Free: the device
computes, waits in a collective that no computation hides, or waits for the host. Whichever
part holds most of the step is what to shorten first; the verdict names it with its numbers.
Pure functions over parsed rows; nothing here reads files or prints.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from common.analyze.robust import streamed_median
from common.formats.records import StepTime

# A part holding at least half of the step bounds it: shortening any other part cannot save as
# much as halving this one. With no communication (one device) this is the old rule exactly:
# Computing below 50% of the step means Free above 50%, the host cannot keep the device busy.
DOMINANT_SHARE = 0.5
HOST_BOUND_BELOW = DOMINANT_SHARE  # Computing share below which a one-device step is host-bound
# When no part reaches DOMINANT_SHARE the step is "mixed"; the parts at or above this share are
# named, since halving one of them still saves more than a tenth of the step.
MIXED_PART_SHARE = 0.25
# Less than this share of the communication hidden under computing: overlap is the first thing
# to try (DDP all-reduces gradient buckets while backward still runs, when buckets allow it).
LOW_OVERLAP_SHARE = 0.5
# Preparing (step start to the step's first device task, outside the step) above this share of
# the step is host work worth naming: data loading, input copies, the previous step's tail.
PREPARING_NOTE_SHARE = 0.10
# A step longer than this many times the median step is an outlier (a host stall, a first call's one-off
# work): named beside the verdict, which is over the median step.
SLOW_STEP = 1.5
SLOW_NAMED = 3  # slow steps named in the verdict; the others are counted

# What to try about precision for device-bound work, in one wording everywhere.
LOWER_PRECISION_TRY = (
    "lower precision (fp16/bf16) for the families that take most of the time (the families table; "
    "it trades accuracy: python -m common precision shows how much)"
)


def precision_try(precision: str | None = None) -> str:
    """What to try about precision, knowing the one the compute ran in (common.analyze.bounds.op.compute_precision):
    lower it, saying that it trades accuracy; where it already runs in fp16 or bf16, that is done, and what it cost
    is what to look at."""
    if precision in ("fp16", "bf16"):
        return (
            f"(the compute already runs in {precision}: lower precision is done, and what it cost in accuracy "
            f"is for python -m common precision to show)"
        )
    return LOWER_PRECISION_TRY


PARTS = ("computing", "communication", "free")
PART_NAMES = {"computing": "Computing", "communication": "Communication(Not Overlapped)", "free": "Free"}
KIND_OF_PART = {"computing": "compute-bound", "communication": "communication-bound", "free": "host-bound"}


@dataclass(frozen=True)
class StepSummary:
    """The median step: each part's median over the steps, so one interrupted step does not decide the verdict."""

    steps: int
    median_step_us: float
    median_computing_us: float
    median_free_us: float
    median_comm_not_overlapped_us: float = 0.0
    median_overlapped_us: float = 0.0
    median_communication_us: float = 0.0
    median_preparing_us: float | None = None
    slow_steps: tuple[tuple[int | None, float], ...] = ()  # the first SLOW_NAMED (step, its length µs) above
    # SLOW_STEP x the median (16,384 ranks can have thousands: they are counted, not kept)
    slow_count: int = 0

    @property
    def computing_ratio(self) -> float:
        """Computing's share of the median step's parts (each a median over the steps)."""
        parts = self.median_computing_us + self.median_comm_not_overlapped_us + self.median_free_us
        return self.median_computing_us / parts if parts else 0.0

    @property
    def has_communication(self) -> bool:
        return bool(self.median_comm_not_overlapped_us or self.median_communication_us)

    def slow_note(self) -> str:
        """The steps far longer than the median, named: they are outliers, not the step the verdict is about."""
        if not self.slow_steps:
            return ""
        named = ", ".join(
            f"step {'(none)' if step is None else step} ({us:,.1f} us)" for step, us in self.slow_steps[:SLOW_NAMED]
        )
        more = f" and {self.slow_count - SLOW_NAMED} more" if self.slow_count > SLOW_NAMED else ""
        return (
            f"; {named}{more} over {SLOW_STEP:g}x the {self.median_step_us:,.1f} us median step: named here, "
            f"not averaged in"
        )


@dataclass(frozen=True)
class StepVerdict:
    """What bounds a step: ``kind`` (compute-bound, host-bound, communication-bound or mixed),
    the deciding parts, the shares of the step and the line that says so with its numbers."""

    kind: str
    parts: tuple[str, ...]
    shares: dict[str, float]
    text: str


def summarize_steps(steps: list[StepTime]) -> StepSummary | None:
    if not steps:
        return None
    nan = float("nan")
    columns = {
        name: np.array([getattr(s, f) for s in steps], dtype=np.float64)
        for name, f in (
            ("computing", "computing_us"),
            ("comm_not_overlapped", "communication_not_overlapped_us"),
            ("overlapped", "overlapped_us"),
            ("communication", "communication_us"),
            ("free", "free_us"),
        )
    }
    columns["preparing"] = np.array([nan if s.preparing_us is None else s.preparing_us for s in steps])
    columns["step"] = np.array([nan if s.step is None else s.step for s in steps], dtype=np.float64)
    return summarize_blocks(lambda names: [columns])


Blocks = Callable[[tuple[str, ...]], Iterable[Mapping[str, np.ndarray]]]


def summarize_blocks(blocks: Blocks) -> StepSummary | None:
    """:func:`summarize_steps` over the step table's columns, ``blocks(names)`` yielding them a block of rows at a
    time (float64 arrays named as :data:`common.formats.step_store.SUMMARY_COLUMNS` and "step"; a missing
    Preparing or Step is NaN). Each median is exact and reads the blocks again rather than hold a column
    (:func:`common.analyze.robust.streamed_median`), so a cluster's rows are never in memory at once."""

    def column(name: str):
        return lambda: (block[name] for block in blocks((name,)))

    def total():  # StepTime.total_us = Computing + Communication(Not Overlapped) + Free
        parts = ("computing", "comm_not_overlapped", "free")
        return ((block["computing"] + block["comm_not_overlapped"]) + block["free"] for block in blocks(parts))

    steps = sum(len(block["computing"]) for block in blocks(("computing",)))
    if not steps:
        return None
    medians = {
        name: streamed_median(column(name))
        for name in ("computing", "comm_not_overlapped", "free", "overlapped", "communication")
    }
    preparing = streamed_median(lambda: (b[~np.isnan(b)] for b in column("preparing")()))
    median_step = streamed_median(total)
    slow, count = [], 0
    if steps >= 3:
        for block, sums in zip(blocks(("step",)), total()):
            step, over = block["step"], np.flatnonzero(sums > SLOW_STEP * median_step)
            count += len(over)
            slow += [
                (None if step[i] != step[i] else int(step[i]), float(sums[i])) for i in over[: SLOW_NAMED - len(slow)]
            ]
    return StepSummary(
        steps=steps,
        median_step_us=median_step,
        median_computing_us=medians["computing"],
        median_free_us=medians["free"],
        median_comm_not_overlapped_us=medians["comm_not_overlapped"],
        median_overlapped_us=medians["overlapped"],
        median_communication_us=medians["communication"],
        median_preparing_us=None if math.isnan(preparing) else preparing,
        slow_steps=tuple(slow),
        slow_count=count,
    )


def classify(computing_us: float, comm_not_overlapped_us: float, free_us: float) -> tuple[str, tuple[str, ...], dict]:
    """(kind, deciding parts, shares) of one step's three parts, by DOMINANT_SHARE and MIXED_PART_SHARE."""
    total = computing_us + comm_not_overlapped_us + free_us
    values = {"computing": computing_us, "communication": comm_not_overlapped_us, "free": free_us}
    shares = {p: (v / total if total else 0.0) for p, v in values.items()}
    if not total:
        return "empty", (), shares
    top = max(PARTS, key=lambda p: shares[p])
    if shares[top] >= DOMINANT_SHARE:  # a tie at 50% goes to Computing first, as the one-device rule did
        return KIND_OF_PART[top], (top,), shares
    named = tuple(sorted((p for p in PARTS if shares[p] >= MIXED_PART_SHARE), key=lambda p: -shares[p]))
    return "mixed", named, shares


def step_kind(step: StepTime) -> str:
    """The verdict of one step row (for the per-step column)."""
    kind, parts, _ = classify(step.computing_us, step.communication_not_overlapped_us, step.free_us)
    return f"mixed ({' + '.join(parts)})" if kind == "mixed" else kind


def step_verdict(summary: StepSummary) -> StepVerdict:
    """The verdict over the median step, with the numbers and the thresholds that decide it."""
    c, n, f = summary.median_computing_us, summary.median_comm_not_overlapped_us, summary.median_free_us
    kind, parts, shares = classify(c, n, f)
    if not summary.has_communication:  # one device: the Computing-vs-Free line it always had
        label = "compute-bound" if kind == "compute-bound" else "host-bound"
        text = (
            f"{label}: Computing {c:.1f} us vs Free {f:.1f} us per step "
            f"(Computing = {100 * summary.computing_ratio:.1f}% of the step; host-bound below "
            f"{100 * HOST_BOUND_BELOW:.0f}%; median of {summary.steps} step{'s' if summary.steps != 1 else ''})"
            + summary.slow_note()
        )
        return StepVerdict(label, ("computing",) if label == "compute-bound" else ("free",), shares, text)
    split = (
        f"Computing {c:.1f} us ({100 * shares['computing']:.1f}%), Communication(Not Overlapped) {n:.1f} us "
        f"({100 * shares['communication']:.1f}%), Free {f:.1f} us ({100 * shares['free']:.1f}%) "
        f"of the {summary.median_step_us:.1f} us step"
    )
    if kind == "mixed":
        named = " + ".join(PART_NAMES[p] for p in parts)
        text = (
            f"mixed ({named}): {split}; no part reaches {100 * DOMINANT_SHARE:.0f}%, parts at or above "
            f"{100 * MIXED_PART_SHARE:.0f}% are named" + summary.slow_note()
        )
    else:
        text = (
            f"{kind}: {split}; {PART_NAMES[parts[0]]} holds at least {100 * DOMINANT_SHARE:.0f}% of the "
            f"step (median of {summary.steps} step{'s' if summary.steps != 1 else ''})" + summary.slow_note()
        )
    return StepVerdict(kind, parts, shares, text)


def bound_verdict(summary: StepSummary) -> str:
    """The verdict line over the median step."""
    return step_verdict(summary).text


def overlap_share(summary: StepSummary) -> float | None:
    """The share of communication hidden under computing (Overlapped / Communication); None without any."""
    return summary.median_overlapped_us / summary.median_communication_us if summary.median_communication_us else None


ADVICE = {
    "communication": (
        "overlap computation and communication (DDP all-reduces a gradient bucket as soon as backward has filled "
        "it: tune bucket_cap_mb, smaller starts the first all-reduce sooner, larger sends fewer collectives); fewer, "
        "larger collectives (gradient accumulation: all-reduce once per N micro-batches under ddp.no_sync(), "
        "ACCUMULATE in 04_pyTorch/src/ddp_with_profiler.py; no per-tensor all-reduce in a loop); a slow link or a "
        "slow rank makes every rank wait in the collective: python -m common cluster <dir> names the rank the "
        "others wait for"
    ),
    "free": (
        "fuse small ops (fewer launches); graph mode / an offline model to take "
        "Python dispatch off the critical path; remove host syncs (.item(), .cpu(), prints) inside the step"
    ),
}


def batch_try(samples: int | None = None) -> str:
    """What to try about the batch for host-bound work, knowing the run's ``samples`` per step (run_info.json)."""
    if not samples:
        return "batch more work per launch (a larger batch amortizes the fixed per-op host cost)"
    return (
        f"batch more work per launch: this run's batch is {samples} sample{'' if samples == 1 else 's'}; "
        f"{2 * samples} or more amortizes the fixed per-op host cost over more samples (compare step time per "
        f"sample: python -m common compare <before> <after> --samples {samples} {2 * samples})"
    )


def part_try(part: str, precision: str | None = None, samples: int | None = None) -> str:
    """What to try for the part of the step that bounds it (ADVICE; Computing's knows the compute's precision, Free's
    the batch)."""
    if part == "computing":
        return (
            f"the per-op bounds: the ops furthest from their lower bound first; {precision_try(precision)}; fuse "
            "element-wise ops into their neighbours"
        )
    if part == "free":
        return f"{batch_try(samples)}; {ADVICE['free']}"
    return ADVICE[part]


def advice(
    summary: StepSummary, verdict: StepVerdict | None = None, precision: str | None = None, samples: int | None = None
) -> list[str]:
    """Hypothesis, what to try and the evidence, for communication-bound and mixed steps.

    (Host- and compute-bound steps get :func:`common.analyze.bounds.op.run_hint`, which adds
    per-task evidence from the task file.)
    """
    verdict = verdict or step_verdict(summary)
    overlap = overlap_share(summary)
    evidence = (
        f"evidence: per step Computing {summary.median_computing_us:.1f} us, Communication(Not Overlapped) "
        f"{summary.median_comm_not_overlapped_us:.1f} us, Free {summary.median_free_us:.1f} us; Overlapped "
        f"{summary.median_overlapped_us:.1f} us of {summary.median_communication_us:.1f} us communication"
    )
    if overlap is not None:
        low = "low" if overlap < LOW_OVERLAP_SHARE else "not low"
        evidence += (
            f" ({100 * overlap:.1f}% hidden under computing; {low} overlap: below "
            f"{100 * LOW_OVERLAP_SHARE:.0f}% counts as low)"
        )
    if verdict.kind == "communication-bound":
        lines = [
            "hypothesis: communication-bound — the ranks spend most of the step in collectives that no computation "
            "hides, so faster kernels or a faster host would not shorten the step much.",
            f"try: {ADVICE['communication']}.",
        ]
    elif verdict.kind == "mixed":
        lines = [
            f"hypothesis: mixed — no single part holds {100 * DOMINANT_SHARE:.0f}% of the step; work on the "
            f"named parts, largest first."
        ]
        lines += [f"try ({PART_NAMES[p]}): {part_try(p, precision, samples)}." for p in verdict.parts]
    else:
        lines = []
    return lines + [evidence] + preparing_note(summary)


def preparing_note(summary: StepSummary) -> list[str]:
    """A line when Preparing (before the step's first device task) is large beside the step."""
    p = summary.median_preparing_us
    if p is None or not summary.median_step_us or p < PREPARING_NOTE_SHARE * summary.median_step_us:
        return []
    share = 100 * p / summary.median_step_us
    return [
        f"note: Preparing {p:.1f} us per step before the first device task ({share:.1f}% "
        f"of the step, outside it; noted from {100 * PREPARING_NOTE_SHARE:.0f}% on): host work before the step's "
        "first launch — data loading, input copies, the previous step's tail"
    ]
