"""The cluster view at the scale of real jobs: per step, the distribution over the ranks; the outlying ranks.

Beyond a handful of ranks nobody reads one row per rank and step: what tells the story is each
step's distribution of Computing, Communication(Not Overlapped) and Free over the ranks (min,
median, p95, max), and the ranks at either end, each with the group it belongs to. Pure functions
over the step rows already read.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from common.analyze.parallel_layout import Layout
from common.analyze.slow_rank import RankSummaries, RankSummary, distinct_steps
from common.formats.cluster import FULL_VIEW_RANKS
from common.formats.step_store import StepStore

SUMMARY_ABOVE_RANKS = FULL_VIEW_RANKS  # up to this many ranks, every (step, rank) row is shown; above, the summary
OUTLIERS = 5  # slowest ranks listed; FASTEST of the other end
FASTEST = 3
QUANTITIES = {"Computing": "computing_us", "Comm(Not Overlapped)": "communication_not_overlapped_us", "Free": "free_us"}


@dataclass(frozen=True)
class Spread:
    """min / median / p95 / max of one quantity over the ranks (µs); p95 by nearest rank."""

    low: float
    median: float
    p95: float
    high: float


def spread(values: list[float]) -> Spread:
    ordered = sorted(values)
    p95 = ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]
    return Spread(ordered[0], statistics.median(ordered), p95, ordered[-1])


@dataclass(frozen=True)
class StepSpread:
    step: int | None
    ranks: int
    by_quantity: dict[str, Spread]  # QUANTITIES' names


def step_spreads(steps: StepStore) -> list[StepSpread]:
    """Per step: how Computing, Communication(Not Overlapped) and Free spread over the ranks (the rows read a group
    of steps at a time: :meth:`StepStore.by_step`)."""
    out = []
    for step, values in steps.by_step(tuple(QUANTITIES.values()), distinct_steps(steps)):
        out.append(
            StepSpread(
                step,
                len(values["free_us"]),
                {name: spread(values[field].tolist()) for name, field in QUANTITIES.items()},
            )
        )
    return out


@dataclass(frozen=True)
class Outlier:
    rank: int
    own_us: float  # median Computing + Free
    over_median_us: float  # own_us minus the median of every rank's
    computing_us: float
    free_us: float
    comm_not_overlapped_us: float
    group: str  # its groups in the recorded layout, or "-"


def rank_groups(layout: Layout | None) -> dict[int, str]:
    """rank -> "DP [0, 1], PP [0, 2]": the layout's groups it belongs to (every kind with more than one rank)."""
    out: dict[int, list[str]] = {}
    if layout is not None:
        for g in layout.groups:
            if len(g.ranks) > 1:
                for r in g.ranks:
                    out.setdefault(r, []).append(f"{g.kind} {list(g.ranks)}")
    return {r: ", ".join(parts) for r, parts in out.items()}


def outliers(summaries: Sequence[RankSummary], layout: Layout | None) -> tuple[list[Outlier], list[Outlier]]:
    """The :data:`OUTLIERS` ranks with the most own time (Computing + Free) and the :data:`FASTEST` with the least."""
    summaries = RankSummaries.of(summaries)
    own = summaries.own()
    median = statistics.median(own.tolist())
    groups = rank_groups(layout)

    def one(i: int) -> Outlier:
        s = summaries[i]
        return Outlier(
            s.rank,
            s.own_us,
            s.own_us - median,
            s.computing_us,
            s.free_us,
            s.comm_not_overlapped_us,
            groups.get(s.rank, "-"),
        )

    ordered = np.lexsort((summaries.ranks, -own)).tolist()  # the most own time first, equals in rank order
    slowest = [one(i) for i in ordered[:OUTLIERS]]
    fastest = [one(i) for i in reversed(ordered[OUTLIERS:][-FASTEST:])]
    return slowest, fastest
