"""Which kind of bottleneck one kernel has: memory, compute, launch, access pattern or stall.

Five classes, each with a different fix, decided from what a profile of the kernel holds: its
median task time, the per-core busy time (``aiv_time``), the four AI Vector pipe ratios of
PipeUtilization, and the bytes it must move. Each class is one rule with a threshold and the
threshold's source; the first class (in :data:`ORDER`) whose rule holds is the verdict. The
kernel's lower bound is its bytes over the device's memory bandwidth, and the achieved fraction
is that bound over the median time.

Pure functions: the caller measures, this module only classifies (mode 02 uses it for both its
C++ and its pyasc kernel, on either backend).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from common.analyze.bounds.op import COMPUTE_PIPE_LOW, DOMINANT_RATIO, Peaks, mean_pipe_ratios, mean_pmu
from common.formats.records import Task
from common.formats.schema import AIV_PIPES

# memory: CANN's memory_bound indicator = mte2_ratio / max(mac_ratio, vec_ratio); above 1 the core waits on
# GM -> core transfers (CANN Profiling guide, ai_vector_core_utilization_*.csv, field memory_bound).
MEMORY_BOUND_ABOVE = 1.0
# compute: the vector pipe busy for most of the core's time. 0.8 is the lab's own choice (op.DOMINANT_RATIO).
COMPUTE_RATIO_AT_LEAST = DOMINANT_RATIO
# launch: the kernel body fills less than half of its task; the rest is launch and start-up. The lab's own choice.
LAUNCH_BODY_SHARE_BELOW = 0.5
# stall: scalar leads while the vector pipe stays below 0.5: the pipes wait on issue, flags and the loop.
# The lab's own choice (op.COMPUTE_PIPE_LOW).
STALL_VEC_BELOW = COMPUTE_PIPE_LOW
# access pattern: memory-side pipes lead but the kernel reaches under 10% of the bandwidth bound: small or
# scattered transfers, not bandwidth, set the pace. The lab's own choice; msprof op's Memory / L2Cache
# metrics confirm it on an NPU.
ACCESS_ACHIEVED_BELOW = 0.10

ORDER = ("launch", "memory", "compute", "stall", "access pattern")
FIX = {
    "launch": "do more work per launch (larger inputs, fused kernels, fewer launches)",
    "memory": "move fewer bytes (fuse, keep data in UB) or overlap copies with compute (double buffer)",
    "compute": "cheaper math per element (fewer instructions, lower precision)",
    "stall": "fewer, larger tiles (fewer loop trips, flags and queue syncs per byte)",
    "access pattern": "contiguous, larger copies aligned to 32 bytes; reuse what is already in UB",
}
# The four AI Vector pipes PipeUtilization reports (op_summary's aiv_<pipe>_ratio), and what each does in mode 02's Add.
PIPES = AIV_PIPES
PIPE_ROLE = {
    "vec": "vector compute (Add)",
    "scalar": "scalar: loop, addresses, queue sync, instruction issue",
    "mte2": "GM -> UB copy (CopyIn)",
    "mte3": "UB -> GM copy (CopyOut)",
}
LAB_CHOICE = "the lab's own choice"
CANN_MEMORY_BOUND = "CANN Profiling guide, ai_vector_core_utilization: memory_bound = mte2_ratio / max(mac, vec)"


@dataclass(frozen=True)
class KernelFacts:
    """What a profile says about one kernel. ``concurrent_blocks``: how many blocks run at once (an NPU:
    every block on its own core; the C++ twin: one thread per host core; the pyasc twin: one)."""

    kernel: str
    median_us: float
    busy_us: float | None  # mean aiv_time(us) per block
    ratios: dict[str, float | None]  # vec, scalar, mte2, mte3
    bytes_moved: int
    block_dim: int
    concurrent_blocks: int


@dataclass(frozen=True)
class Rule:
    name: str
    holds: bool | None  # None: the data cannot decide it
    evidence: str
    threshold: str
    source: str


@dataclass(frozen=True)
class KernelVerdict:
    kernel: str
    bottleneck: str | None
    rules: tuple[Rule, ...]
    lower_bound_us: float | None
    achieved: float | None
    peaks: Peaks | None
    median_us: float

    def lines(self) -> list[str]:
        """The verdict, its lower bound and every rule with its evidence, threshold and source."""
        head = (
            f"Bottleneck class: {self.bottleneck} — {FIX[self.bottleneck]}. This is the answer for this kernel: "
            f"the first of the five rules below that holds; the busiest pipe above and the roofline side of the "
            f"per-op table are evidence for it, not other answers"
            if self.bottleneck
            else "Bottleneck class: none of the five rules holds (the pipes overlap or the data cannot tell)"
        )
        out = [f"Median kernel time: {self.median_us:.3f} us (over the measured launches)", head]
        if self.lower_bound_us is not None and self.peaks is not None:
            out.append(
                f"Lower bound: {self.lower_bound_us:.3f} us = bytes moved / {self.peaks.bytes_per_s / 1e9:.1f} GB/s "
                f"({self.peaks.source}); achieved at the median kernel time: {100 * self.achieved:.3f}% of it (the "
                "per-op table divides by the mean)"
            )
        else:
            out.append("Lower bound: N/A (no bandwidth for this device)")
        for rule in self.rules:
            mark = {True: "yes", False: "no", None: "N/A"}[rule.holds]
            out.append(f"  {rule.name:<15} {mark:<3}  {rule.evidence}; rule {rule.threshold} ({rule.source})")
        return out


def classify_kernel(facts: KernelFacts, peaks: Peaks | None) -> KernelVerdict:
    """The five rules on ``facts``; the verdict is the first that holds, in :data:`ORDER`."""
    r = facts.ratios
    vec, scalar, mte2, mte3 = (r.get(p) for p in PIPES)
    lower = 1e6 * facts.bytes_moved / peaks.bytes_per_s if peaks and peaks.bytes_per_s > 0 else None
    achieved = lower / facts.median_us if lower is not None and facts.median_us > 0 else None

    rules = []
    # launch: the blocks' busy time, in waves of concurrent blocks, against the whole task
    if facts.busy_us is not None and facts.median_us > 0:
        waves = math.ceil(facts.block_dim / max(1, facts.concurrent_blocks))
        share = facts.busy_us * waves / facts.median_us
        body = facts.busy_us * waves
        said = (
            f"= {100 * share:.1f}% of the {facts.median_us:.1f} us task"
            if share <= 1
            else f"= {body:.1f} us, longer than the {facts.median_us:.1f} us task (the blocks were timed apart from "
            f"the task: taken as 100%)"
        )
        rules.append(
            Rule(
                "launch",
                share < LAUNCH_BODY_SHARE_BELOW,
                f"kernel body {facts.busy_us:.2f} us x {waves} wave(s) of {facts.concurrent_blocks} block(s) {said}",
                f"body share < {LAUNCH_BODY_SHARE_BELOW}",
                LAB_CHOICE,
            )
        )
    else:
        rules.append(
            Rule(
                "launch",
                None,
                "no per-core busy time (aiv_time)",
                f"body share < {LAUNCH_BODY_SHARE_BELOW}",
                LAB_CHOICE,
            )
        )
    # memory: CANN's memory_bound indicator
    if mte2 is not None and vec is not None:
        bound = mte2 / vec if vec > 0 else math.inf
        rules.append(
            Rule(
                "memory",
                bound > MEMORY_BOUND_ABOVE,
                f"mte2 {mte2:.3f} / vec {vec:.3f} = {bound:.2f}",
                f"memory_bound > {MEMORY_BOUND_ABOVE:g}",
                CANN_MEMORY_BOUND,
            )
        )
    else:
        rules.append(
            Rule("memory", None, "no mte2 / vec ratio", f"memory_bound > {MEMORY_BOUND_ABOVE:g}", CANN_MEMORY_BOUND)
        )
    rules.append(
        Rule(
            "compute",
            None if vec is None else vec >= COMPUTE_RATIO_AT_LEAST,
            "no vec ratio" if vec is None else f"vec {vec:.3f}",
            f"vec >= {COMPUTE_RATIO_AT_LEAST}",
            LAB_CHOICE,
        )
    )
    known = {p: v for p, v in r.items() if v is not None}
    leader = max(known, key=known.get) if known else None
    if leader is not None and vec is not None:
        rules.append(
            Rule(
                "stall",
                leader == "scalar" and vec < STALL_VEC_BELOW,
                f"leading pipe {leader} {known[leader]:.3f}, vec {vec:.3f}",
                f"scalar leads and vec < {STALL_VEC_BELOW}",
                LAB_CHOICE,
            )
        )
    else:
        rules.append(Rule("stall", None, "no pipe ratios", f"scalar leads and vec < {STALL_VEC_BELOW}", LAB_CHOICE))
    if leader is not None and achieved is not None:
        memory_side = (mte2 or 0.0) + (mte3 or 0.0) >= max(vec or 0.0, scalar or 0.0)
        rules.append(
            Rule(
                "access pattern",
                memory_side and achieved < ACCESS_ACHIEVED_BELOW,
                f"mte2+mte3 {(mte2 or 0) + (mte3 or 0):.3f} vs vec/scalar {max(vec or 0, scalar or 0):.3f}, "
                f"achieved {100 * achieved:.3f}% of the bandwidth bound",
                f"copies lead and achieved < {100 * ACCESS_ACHIEVED_BELOW:.0f}%",
                LAB_CHOICE,
            )
        )
    else:
        rules.append(
            Rule(
                "access pattern",
                None,
                "no pipe ratios or no bandwidth",
                f"copies lead and achieved < {100 * ACCESS_ACHIEVED_BELOW:.0f}%",
                LAB_CHOICE,
            )
        )
    by_name = {rule.name: rule for rule in rules}
    bottleneck = next((name for name in ORDER if by_name[name].holds), None)
    return KernelVerdict(
        facts.kernel, bottleneck, tuple(by_name[n] for n in ORDER), lower, achieved, peaks, facts.median_us
    )


def pipe_ratios(tasks: list[Task]) -> dict[str, float | None]:
    """The mean aiv_<pipe>_ratio of each of :data:`PIPES` over a kernel's tasks, by its short name."""
    found = mean_pipe_ratios(tasks, [f"aiv_{p}" for p in PIPES])
    return {p: found[f"aiv_{p}"] for p in PIPES}


def pipe_times(tasks: list[Task]) -> dict[str, float | None]:
    """The mean aiv_time(us) per block and aiv_<pipe>_time(us) of each pipe over a kernel's tasks."""
    return mean_pmu(tasks, ["aiv_time(us)"] + [f"aiv_{p}_time(us)" for p in PIPES])
