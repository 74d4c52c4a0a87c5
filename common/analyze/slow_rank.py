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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from common.analyze.bounds.step import summarize_blocks
from common.formats.cluster import ClusterView
from common.formats.rank_index import MadeOnAccess, RankValues
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


class RankSummaries(MadeOnAccess):
    """Each rank's median step for thousands of ranks: a column per :class:`RankSummary` field (48 bytes a rank,
    not an object of 300), a :class:`RankSummary` made when an item is asked for; in rank order."""

    FIELDS = ("computing_us", "comm_not_overlapped_us", "communication_us", "free_us", "step_us")

    def __init__(self, ranks: np.ndarray, columns: Mapping[str, np.ndarray]) -> None:
        self.ranks = np.asarray(ranks, dtype=np.int64)
        self.columns = {name: np.asarray(columns[name], dtype=np.float64) for name in self.FIELDS}
        if (np.diff(self.ranks) < 0).any():  # into rank order
            order = np.argsort(self.ranks, kind="stable")
            self.ranks, self.columns = self.ranks[order], {name: c[order] for name, c in self.columns.items()}

    @classmethod
    def of(cls, summaries: Sequence[RankSummary]) -> RankSummaries:
        """Summaries given as a list (one already in columns is returned as it is)."""
        if isinstance(summaries, RankSummaries):
            return summaries
        return cls(
            np.array([s.rank for s in summaries], dtype=np.int64),
            {name: np.array([getattr(s, name) for s in summaries], dtype=np.float64) for name in cls.FIELDS},
        )

    def own(self) -> np.ndarray:
        """Per rank, Computing + Free (:attr:`RankSummary.own_us`)."""
        return self.columns["computing_us"] + self.columns["free_us"]

    def _item(self, i: int) -> RankSummary:
        return RankSummary(int(self.ranks[i]), *(float(self.columns[name][i]) for name in self.FIELDS))

    def __len__(self) -> int:
        return len(self.ranks)


@dataclass(frozen=True)
class SlowRank:
    rank: int | None  # None: no rank stands out
    reason: str | None  # "computing" | "free" | None
    text: str


def rank_summaries(view: ClusterView) -> RankSummaries:
    """Each rank's median step (common.analyze.bounds.step.summarize_steps' medians over its rows), in rank order."""
    store = view.steps
    fields = ("computing_us", "communication_not_overlapped_us", "communication_us", "free_us")
    if store.rows_per_rank() is None:  # ranks of different step counts: one by one
        out = []
        for rank in sorted(store):
            s = summarize_blocks(lambda names, rank=rank: store.summary_blocks(names, rank))
            out.append(
                RankSummary(
                    rank,
                    s.median_computing_us,
                    s.median_comm_not_overlapped_us,
                    s.median_communication_us,
                    s.median_free_us,
                    s.median_step_us,
                )
            )
        return RankSummaries.of(out)
    ranks, medians = [], []
    for block, tables in store.rank_blocks(fields):  # a block of ranks at a time: memory bounded at any size
        total = tables["computing_us"] + tables["communication_not_overlapped_us"] + tables["free_us"]
        ranks.append(np.array(block, dtype=np.int64))
        medians.append([np.median(tables[f], axis=1) for f in fields] + [np.median(total, axis=1)])
    return RankSummaries(
        np.concatenate(ranks),
        {name: np.concatenate([m[i] for m in medians]) for i, name in enumerate(RankSummaries.FIELDS)},
    )


@dataclass(frozen=True)
class Gap:
    """The largest difference of Computing + Free between two ranks (µs), and where."""

    us: float
    high: int  # the rank with more
    low: int
    step: int | None = None  # None: of the median step (or the one whole-trace row)


def median_gap(summaries: Sequence[RankSummary]) -> Gap:
    """Largest minus smallest median Computing + Free over the ranks (the first rank of equals)."""
    summaries = RankSummaries.of(summaries)
    own = summaries.own()
    high, low = int(np.argmax(own)), int(np.argmin(own))
    return Gap(float(own[high] - own[low]), int(summaries.ranks[high]), int(summaries.ranks[low]))


def step_gap(steps: Mapping[int, list[StepTime]]) -> Gap | None:
    """The largest Computing + Free difference between two ranks within one step, over every step (a group of
    steps at a time: :meth:`StepStore.by_step`)."""
    store = StepStore.of(steps)
    best = None
    for step, values in store.by_step(("rank", "computing_us", "free_us"), distinct_steps(store)):
        own, ranks = values["computing_us"] + values["free_us"], values["rank"]
        if len(own) < 2:
            continue
        high, low = int(np.argmax(own)), int(np.argmin(own))  # the first of equals, in rank order
        gap = Gap(float(own[high] - own[low]), int(ranks[high]), int(ranks[low]), step)
        if best is None or gap.us > best.us:
            best = gap
    return best


def distinct_steps(steps: Mapping[int, list[StepTime]]) -> list[int | None]:
    """The steps any rank recorded, in step order (an empty Step first); the Step column read a block at a time."""
    found, empty = set(), False
    for block in StepStore.of(steps).row_blocks(("step",)):
        column = block["step"]
        missing = np.isnan(column)
        empty = empty or bool(missing.any())
        found.update(np.unique(column[~missing]).tolist())
    return ([None] if empty else []) + [int(v) for v in sorted(found)]


def find_slow_rank(summaries: Sequence[RankSummary], steps: dict[int, list[StepTime]] | None = None) -> SlowRank:
    """The rank the others wait for, and why (see the module docstring); ``steps`` adds the per-step gap."""
    if len(summaries) < 2:
        return SlowRank(None, None, "one rank: nothing to compare it with")
    summaries = RankSummaries.of(summaries)
    at = int(np.argmax(summaries.own()))  # the first of equals
    slowest = summaries[at]
    others = np.ones(len(summaries), dtype=bool)
    others[at] = False

    def median_of_others(name: str) -> float:
        return statistics.median(summaries.columns[name][others].tolist())

    own_median = statistics.median(summaries.own()[others].tolist())
    step = statistics.median(summaries.columns["step_us"].tolist())
    excess = slowest.own_us - own_median
    wait_median = median_of_others("comm_not_overlapped_us")
    if excess < SLOW_RANK_MIN_SHARE * step:
        spread = median_gap(summaries)
        single = step_gap(steps) if steps else None
        median = (
            f"; rank {slowest.rank} exceeds the other ranks' median by {excess:,.1f} us" if len(summaries) > 2 else ""
        )
        where = ""
        if single is not None and len(distinct_steps(steps)) > 1:
            where = (
                f"; within one step they differ by at most {single.us:,.1f} us "
                f"(step {single.step}: rank {single.high} vs rank {single.low})"
            )
        return SlowRank(
            None,
            None,
            (
                f"no slow rank: median Computing + Free differ by at most {spread.us:,.1f} us between ranks "
                f"(rank {spread.high} vs rank {spread.low}){median}, under {100 * SLOW_RANK_MIN_SHARE:.0f}% of "
                f"the {step:,.1f} us median step{where}"
            ),
        )
    d_compute = slowest.computing_us - median_of_others("computing_us")
    d_free = slowest.free_us - median_of_others("free_us")
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
    """Who reached each collective last, from the ranks' communication.json ``Start Timestamp(us)``. The per-rank
    figures are kept as :class:`RankValues` (two arrays; a mapping given is turned into one)."""

    collectives: int  # matched on every rank
    last: RankValues  # rank -> collectives it started last
    wait_us: RankValues  # rank -> mean over the collectives of (last rank's start - its own start)
    source: str = "communication.json"
    largest: tuple[str, int, float] | None = None  # (collective, the rank that started it last, by how much µs)
    # rank -> the time the other ranks spent waiting for it: over the collectives it started last, the sum of
    # (its start - each other rank's start)
    held_us: RankValues | None = None
    # rank -> the median over the steps of the time the others waited for it in that step: one stalled step
    # does not decide (None: the collectives' names carry no step)
    held_per_step_us: RankValues | None = None

    def __post_init__(self) -> None:
        for name in ("last", "wait_us", "held_us", "held_per_step_us"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, RankValues.of(getattr(self, name)))

    def holder(self) -> int | None:
        """The rank that kept the others waiting longest: a rank last by a few µs at many small collectives (a
        buffer broadcast at each forward) is not the one a large all_reduce waited for, and a rank that stalled
        in one step is not the one that held every step (the median over the steps decides, where known)."""
        per_step = self.held_per_step_us
        held = per_step if per_step is not None and per_step.values.any() else self.held_us
        return held.first_largest() if held else None

    def text(self, top: int | None = None) -> str:
        """Who kept the others waiting longest (by time, not by how often a rank was last by a few µs); ``top``:
        only that many ranks of each list, the largest first."""
        wait_order = list(self.wait_us) if top is None else self.wait_us.largest(top)
        last_order = list(self.last) if top is None else [r for r in self.last.largest(top) if self.last[r]]
        more = f" (the {top} largest of {len(self.wait_us)} ranks)" if top is not None else ""
        waits = ", ".join(f"rank {r} {self.wait_us[r]:,.1f} us" for r in wait_order) + more
        counts = ", ".join(f"rank {r} {self.last[r]}" for r in last_order)
        head = (
            f"arrival at the collectives ({self.source}): the largest gap is {self.largest[0]}, which rank "
            f"{self.largest[1]} started {self.largest[2]:,.1f} us after the first rank; "
            if self.largest
            else f"arrival at the collectives ({self.source}): "
        )
        holder = self.holder()
        held = (
            f"; the others waited longest for rank {holder}: {self.held_us[holder]:,.1f} us in all"
            if holder is not None
            else ""
        )
        return (
            f"{head}mean wait for the last rank per collective: {waits}; started last (of {self.collectives}): "
            f"{counts}{held}"
        )


def collective_arrivals(view: ClusterView) -> Arrivals | None:
    """Per collective, the rank that started it last and how long each rank waited for that one.

    The same collective has the same name on every rank (``<op>_<step>_<k>@<group>``). Start
    times are comparable when the ranks share a clock: one host, or NPUs whose timestamps
    torch_npu aligns. None when a rank has no communication.json. Read a block of ranks at a
    time, twice (who was last, then how long the others waited): memory bounded at any size.
    """
    found = view.starts
    if found.missing or not found.rows or len(view.ranks) < 2:
        return None
    kept = np.flatnonzero(found.on_every_rank())  # the collectives every rank ran
    if not len(kept):
        return None
    # per collective: the latest start, its row (the first rank of equals) and the earliest start
    latest, late, earliest = (
        np.full(len(kept), -np.inf),
        np.zeros(len(kept), dtype=np.int64),
        np.full(len(kept), np.inf),
    )
    first = 0
    for block in found.row_blocks():
        starts = block[:, kept]
        top = starts.max(axis=0)
        later = top > latest
        latest, late = np.where(later, top, latest), np.where(later, starts.argmax(axis=0) + first, late)
        earliest = np.minimum(earliest, starts.min(axis=0))
        first += len(block)
    # per rank, in arrays: its wait for the last rank added up over the collectives in order (a running sum along
    # each row); per collective, the time the others waited for the last rank
    waited, totals = np.zeros(found.rows), np.zeros(len(kept))
    first = 0
    for block in found.row_blocks():
        waits = latest - block[:, kept]
        waited[first : first + len(block)] = np.cumsum(waits, axis=1)[:, -1]
        totals += waits.sum(axis=0)
        first += len(block)
    ranks = found.ranks
    last, held = np.zeros(found.rows, dtype=np.int64), np.zeros(found.rows)
    by_step: dict[str, dict[int, float]] = {}  # step -> row -> the time the others waited for it at that step
    for i, (index, row, total) in enumerate(zip(kept.tolist(), late.tolist(), totals.tolist())):
        last[row] += 1
        held[row] += total
        name = found.names[index]
        if "/" in name:
            at = by_step.setdefault(name.partition("/")[0], {})
            at[row] = at.get(row, 0.0) + total
    gaps = latest - earliest
    widest = int(np.argmax(gaps))  # the first of equals, as the collectives come
    name = found.names[int(kept[widest])]
    largest = (name.partition("/")[2].partition("@")[0], ranks[int(late[widest])], float(gaps[widest]))
    numbers = np.array(ranks, dtype=np.int64)
    per_step = None
    if len(by_step) > 1:  # per rank, the median over the steps (0 at a step where it was not last)
        median = np.zeros(found.rows)
        for row in set().union(*by_step.values()):
            median[row] = np.median([at.get(row, 0.0) for at in by_step.values()])
        per_step = RankValues(numbers, median)
    return Arrivals(
        len(kept),
        RankValues(numbers, last),
        RankValues(numbers, waited / len(kept)),
        found.source,
        largest,
        RankValues(numbers, held),
        per_step,
    )
