"""Step time: per-step Computing / Free summaries and the host-bound / compute-bound verdict.

Pure functions over parsed rows; nothing here reads files or prints.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from common.formats.records import StepTime

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
