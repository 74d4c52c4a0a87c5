"""The slow rank of a cluster: the rank the others wait for, and why; who reached each collective last.

Why a slow rank is found this way: in synchronous data-parallel training every rank leaves
a step's all-reduce together, so all step times look alike. What differs is how a rank's step
is split. The rank with the most time of its own (Computing + Free: work, and host-side gaps)
is the one the others wait for, and their waiting shows up as *their* Communication(Not
Overlapped) growing. So: slowest = the largest Computing + Free; the reason is whichever of
the two exceeds the other ranks' median by more.

Pure functions over a :class:`common.formats.cluster.ClusterView` already read; a capture with a
parallel layout is judged within each group instead (:mod:`common.analyze.parallel_layout`).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from common.analyze.bounds.step import summarize_columns
from common.formats.cluster import ClusterView
from common.formats.records import StepTime
from common.formats.step_store import StepStore

# A rank is called slow when its own time (Computing + Free) exceeds the other ranks' median by
# more than this share of the median step: below it, run-to-run noise on a shared host is as large.
SLOW_RANK_MIN_SHARE = 0.20


@dataclass(frozen=True, slots=True)
class RankSummary:
    """One rank's median step (µs): each column's median over the rank's steps, so one stalled step (a host
    pause, a page fault storm) does not decide which rank is slow."""

    rank: int
    computing_us: float
    comm_not_overlapped_us: float
    communication_us: float
    free_us: float
    step_us: float

    @property
    def own_us(self) -> float:
        return self.computing_us + self.free_us


@dataclass(frozen=True)
class SlowRank:
    rank: int | None  # None: no rank stands out
    reason: str | None  # "computing" | "free" | None
    text: str


def rank_summaries(view: ClusterView) -> list[RankSummary]:
    """Each rank's median step (common.analyze.bounds.step.summarize_steps' medians over its rows), in rank order."""
    store = view.steps
    fields = ("computing_us", "communication_not_overlapped_us", "communication_us", "free_us")
    if store.rows_per_rank() is None:  # ranks of different step counts: one by one
        out = []
        for rank in sorted(store):
            s = summarize_columns(store.arrays(rank))
            out.append(RankSummary(rank, s.median_computing_us, s.median_comm_not_overlapped_us,
                                   s.median_communication_us, s.median_free_us, s.median_step_us))
        return out
    rows = []
    for ranks, tables in store.rank_blocks(fields):  # a block of ranks at a time: memory bounded at any size
        total = tables["computing_us"] + tables["communication_not_overlapped_us"] + tables["free_us"]
        medians = [np.median(tables[f], axis=1).tolist() for f in fields] + [np.median(total, axis=1).tolist()]
        rows += zip(ranks, *medians)
    return [RankSummary(rank, *values) for rank, *values in sorted(rows)]


@dataclass(frozen=True)
class Gap:
    """The largest difference of Computing + Free between two ranks (µs), and where."""

    us: float
    high: int  # the rank with more
    low: int
    step: int | None = None  # None: of the median step (or the one whole-trace row)


def median_gap(summaries: list[RankSummary]) -> Gap:
    """Largest minus smallest median Computing + Free over the ranks."""
    high = max(summaries, key=lambda s: s.own_us)
    low = min(summaries, key=lambda s: s.own_us)
    return Gap(high.own_us - low.own_us, high.rank, low.rank)


def step_gap(steps: Mapping[int, list[StepTime]]) -> Gap | None:
    """The largest Computing + Free difference between two ranks within one step, over every step."""
    store = StepStore.of(steps)
    order = distinct_steps(store)
    # per step: rows seen, the largest Computing + Free and its rank, the smallest and its rank (the first of equals,
    # in rank order: a later block replaces them only when strictly beyond)
    seen: dict[int | None, list] = {step: [0, None, None] for step in order}
    for ranks, own, step_of in _own_blocks(store):
        for step in order:
            mask = np.isnan(step_of) if step is None else step_of == step
            values, which = own[mask], ranks[mask]
            if not len(values):
                continue
            high, low = int(np.argmax(values)), int(np.argmin(values))
            entry = seen[step]
            entry[0] += len(values)
            if entry[1] is None or values[high] > entry[1][0]:
                entry[1] = (float(values[high]), int(which[high]))
            if entry[2] is None or values[low] < entry[2][0]:
                entry[2] = (float(values[low]), int(which[low]))
    best = None
    for step in order:
        count, high, low = seen[step]
        if count < 2:
            continue
        gap = Gap(high[0] - low[0], high[1], low[1], step)
        if best is None or gap.us > best.us:
            best = gap
    return best


def _own_blocks(store: StepStore):
    """(rank of each row, Computing + Free, Step) over the store's rows, a block of ranks at a time when every rank
    has as many rows (else every row at once), rows in the store's order."""
    if store.rows_per_rank() is None:
        yield store.rank_column(), store.column("computing_us") + store.column("free_us"), store.column("step")
        return
    for ranks, t in store.rank_blocks(("computing_us", "free_us", "step")):
        rows = t["step"].shape[1]
        yield np.repeat(np.array(ranks), rows), (t["computing_us"] + t["free_us"]).ravel(), t["step"].ravel()


def distinct_steps(steps: Mapping[int, list[StepTime]]) -> list[int | None]:
    """The steps any rank recorded, in step order (an empty Step first)."""
    column = StepStore.of(steps).column("step")
    found = [None] if np.isnan(column).any() else []
    return found + [int(v) for v in np.unique(column[~np.isnan(column)])]


def find_slow_rank(summaries: list[RankSummary], steps: dict[int, list[StepTime]] | None = None) -> SlowRank:
    """The rank the others wait for, and why (see the module docstring); ``steps`` adds the per-step gap."""
    if len(summaries) < 2:
        return SlowRank(None, None, "one rank: nothing to compare it with")
    slowest = max(summaries, key=lambda s: s.own_us)
    others = [s for s in summaries if s.rank != slowest.rank]
    own_median = statistics.median(s.own_us for s in others)
    step = statistics.median(s.step_us for s in summaries)
    excess = slowest.own_us - own_median
    wait_median = statistics.median(s.comm_not_overlapped_us for s in others)
    if excess < SLOW_RANK_MIN_SHARE * step:
        spread = median_gap(summaries)
        single = step_gap(steps) if steps else None
        median = (f"; rank {slowest.rank} exceeds the other ranks' median by {excess:,.1f} us"
                  if len(summaries) > 2 else "")
        where = ""
        if single is not None and len(distinct_steps(steps)) > 1:
            where = (f"; within one step they differ by at most {single.us:,.1f} us "
                     f"(step {single.step}: rank {single.high} vs rank {single.low})")
        return SlowRank(
            None,
            None,
            (
                f"no slow rank: median Computing + Free differ by at most {spread.us:,.1f} us between ranks "
                f"(rank {spread.high} vs rank {spread.low}){median}, under {100 * SLOW_RANK_MIN_SHARE:.0f}% of "
                f"the {step:,.1f} us median step{where}"
            ),
        )
    d_compute = slowest.computing_us - statistics.median(s.computing_us for s in others)
    d_free = slowest.free_us - statistics.median(s.free_us for s in others)
    if d_compute >= d_free:
        reason, what = (
            "computing",
            (
                f"longest compute: Computing {slowest.computing_us:,.1f} us "
                f"vs {slowest.computing_us - d_compute:,.1f} us "
                f"(median of the other ranks)"
            ),
        )
    else:
        reason, what = (
            "free",
            (
                f"longest wait on its own host (Free: Python, data loading, dispatch): {slowest.free_us:,.1f} us vs "
                f"{slowest.free_us - d_free:,.1f} us (median of the other ranks)"
            ),
        )
    return SlowRank(
        slowest.rank,
        reason,
        (
            f"slowest rank: {slowest.rank} — {what}. The others wait for it in the collective: their "
            f"Communication(Not Overlapped) is {wait_median:,.1f} us "
            f"vs {slowest.comm_not_overlapped_us:,.1f} us on rank "
            f"{slowest.rank}"
        ),
    )


@dataclass(frozen=True)
class Arrivals:
    """Who reached each collective last, from the ranks' communication.json ``Start Timestamp(us)``."""

    collectives: int  # matched on every rank
    last: dict[int, int]  # rank -> collectives it started last
    wait_us: dict[int, float]  # rank -> mean over the collectives of (last rank's start - its own start)
    source: str = "communication.json"
    largest: tuple[str, int, float] | None = None  # (collective, the rank that started it last, by how much µs)
    # rank -> the time the other ranks spent waiting for it: over the collectives it started last, the sum of
    # (its start - each other rank's start)
    held_us: dict[int, float] | None = None
    # rank -> the median over the steps of the time the others waited for it in that step: one stalled step
    # does not decide (None: the collectives' names carry no step)
    held_per_step_us: dict[int, float] | None = None

    def holder(self) -> int | None:
        """The rank that kept the others waiting longest: a rank last by a few µs at many small collectives (a
        buffer broadcast at each forward) is not the one a large all_reduce waited for, and a rank that stalled
        in one step is not the one that held every step (the median over the steps decides, where known)."""
        held = self.held_per_step_us if self.held_per_step_us and any(self.held_per_step_us.values()) else \
            self.held_us
        return max(held, key=held.get) if held else None

    def text(self, top: int | None = None) -> str:
        """Who kept the others waiting longest (by time, not by how often a rank was last by a few µs); ``top``:
        only that many ranks of each list, the largest first."""
        wait_order = sorted(self.wait_us) if top is None else sorted(self.wait_us, key=lambda r: -self.wait_us[r])[:top]
        last_order = (sorted(self.last) if top is None else
                      [r for r in sorted(self.last, key=lambda r: -self.last[r]) if self.last[r]][:top])
        more = f" (the {top} largest of {len(self.wait_us)} ranks)" if top is not None else ""
        waits = ", ".join(f"rank {r} {self.wait_us[r]:,.1f} us" for r in wait_order) + more
        counts = ", ".join(f"rank {r} {self.last[r]}" for r in last_order)
        head = (f"arrival at the collectives ({self.source}): the largest gap is {self.largest[0]}, which rank "
                f"{self.largest[1]} started {self.largest[2]:,.1f} us after the first rank; "
                if self.largest else f"arrival at the collectives ({self.source}): ")
        holder = self.holder()
        held = (f"; the others waited longest for rank {holder}: {self.held_us[holder]:,.1f} us in all"
                if holder is not None else "")
        return (f"{head}mean wait for the last rank per collective: {waits}; started last (of {self.collectives}): "
                f"{counts}{held}")



def collective_arrivals(view: ClusterView) -> Arrivals | None:
    """Per collective, the rank that started it last and how long each rank waited for that one.

    The same collective has the same name on every rank (``<op>_<step>_<k>@<group>``). Start
    times are comparable when the ranks share a clock: one host, or NPUs whose timestamps
    torch_npu aligns. None when a rank has no communication.json.
    """
    found = view.starts
    if found.missing or not found.blocks or len(view.ranks) < 2:
        return None
    on_all = found.on_every_rank()  # per collective
    if not on_all.any():
        return None
    ranks = list(found.ranks)  # every rank (none is missing), in rank order: the rows of each column
    # per rank, in arrays (a dict a rank would cost ~100 bytes a rank and step): how often it
    # started last, its wait for the last rank added up, and the time the others waited for it (per step too)
    last, waited, held = np.zeros(len(ranks), dtype=np.int64), np.zeros(len(ranks)), np.zeros(len(ranks))
    by_step: dict[str, np.ndarray] = {}
    largest = None
    matched = 0
    for index, (name, complete) in enumerate(zip(found.names, on_all)):
        if not complete:  # a rank did not run it
            continue
        column = found.column(index)
        matched += 1
        latest = float(column.max())
        late = int(np.argmax(column))  # the first rank of equals
        last[late] += 1
        gap = latest - float(column.min())
        if largest is None or gap > largest[2]:
            largest = (name.partition("/")[2].partition("@")[0], ranks[late], gap)
        waits = latest - column
        waited += waits
        total = float(waits.sum())  # the time the others waited for ``late`` at this collective
        held[late] += total
        if "/" in name:
            by_step.setdefault(name.partition("/")[0], np.zeros(len(ranks)))[late] += total
    per_step = (dict(zip(ranks, np.median(np.stack(list(by_step.values())), axis=0).tolist()))
                if len(by_step) > 1 else None)
    mean_wait = dict(zip(ranks, (waited / matched).tolist()))
    last, held = dict(zip(ranks, last.tolist())), dict(zip(ranks, held.tolist()))
    return Arrivals(matched, last, mean_wait, found.source, largest, held, per_step)
