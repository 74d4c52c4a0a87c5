"""Every rank's communication analysis, added up as the ranks arrive: what the cluster view keeps of it.

A rank's ``communication.json`` holds one record per op and step (20,000 ranks x a few hundred ops
would not fit in one process as Python objects). :class:`Communication` takes each rank's ops once
(:meth:`Communication.add_rank`, in rank order) and keeps only what the view shows:

- per op (step, name, group): the sum of each time over the ranks that ran it (rounded once, as
  ``math.fsum`` rounds a list, so a mean is ``statistics.fmean``'s to the last bit), what each link moved,
  and the first and last start with their ranks;
- per rank: its ops' times and links added up (:class:`Split`);
- per (step, rank): its point-to-point ops (pipeline stages), and the groups its link matrix names.

The link matrix's rows themselves are kept only for a view of a few ranks, which shows them.
"""

from __future__ import annotations

import bisect
import math
from array import array
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np

from common.formats import spill
from common.formats.communication import CommTiming, MatrixLink, group_members
from common.formats.rank_index import RankIndex, RankValues

TIMES = ("elapse_ms", "transit_ms", "wait_ms", "sync_ms", "idle_ms")


class ExactSum:
    """A running sum rounded once at the end (Shewchuk's non-overlapping partials, which ``math.fsum`` takes)."""

    __slots__ = ("partials",)

    def __init__(self) -> None:
        self.partials: list[float] = []

    def add(self, x: float) -> None:
        kept = 0
        for y in self.partials:
            if abs(x) < abs(y):
                x, y = y, x
            high = x + y
            low = y - (high - x)
            if low:
                self.partials[kept] = low
                kept += 1
            x = high
        self.partials[kept:] = [x]

    def merge(self, other: ExactSum) -> None:
        for x in other.partials:
            self.add(x)

    @property
    def value(self) -> float:
        return math.fsum(self.partials)


def add_links(sums: dict[str, tuple[ExactSum, ExactSum]], timing: CommTiming) -> None:
    """Add what each link of ``timing`` moved into ``sums`` (link -> exact sums of size MB and time ms)."""
    for link in timing.links:
        size, time_ms = sums.get(link.link) or sums.setdefault(link.link, (ExactSum(), ExactSum()))
        size.add(link.size_mb)
        time_ms.add(link.time_ms)


def merge_links(sums: dict[str, tuple[ExactSum, ExactSum]], other: dict[str, tuple[ExactSum, ExactSum]]) -> None:
    for link, (size, time_ms) in other.items():
        mine = sums.get(link) or sums.setdefault(link, (ExactSum(), ExactSum()))
        mine[0].merge(size)
        mine[1].merge(time_ms)


def link_values(sums: dict[str, tuple[ExactSum, ExactSum]]) -> dict[str, list[float]]:
    """link -> [size MB, time ms], in the order the links were first seen."""
    return {link: [size.value, time_ms.value] for link, (size, time_ms) in sums.items()}


@dataclass
class OpTotals:
    """One op (step, name, group) over every rank that ran it."""

    step: str
    kind: str
    op_name: str
    group: str
    ranks: int = 0
    sums: dict[str, ExactSum] = field(default_factory=lambda: {name: ExactSum() for name in TIMES})
    links: dict[str, tuple[ExactSum, ExactSum]] = field(default_factory=dict)  # link -> size MB, time ms
    starts: int = 0  # ranks that recorded its start
    last: tuple[float, int] | None = None  # the latest start and its rank (the first rank of equals)
    first: tuple[float, int, float, float] | None = None  # the earliest start, its rank, its sync and transit ms

    def add(self, rank: int, t: CommTiming) -> None:
        self.ranks += 1
        for name in TIMES:
            self.sums[name].add(getattr(t, name))
        add_links(self.links, t)
        if t.start_us is not None:
            self.starts += 1
            if self.last is None or t.start_us > self.last[0]:
                self.last = (t.start_us, rank)
            if self.first is None or t.start_us < self.first[0]:
                self.first = (t.start_us, rank, t.sync_ms, t.transit_ms)

    def merge(self, other: OpTotals) -> None:
        """Add the same op of later ranks (a later chunk)."""
        self.ranks += other.ranks
        for name in TIMES:
            self.sums[name].merge(other.sums[name])
        merge_links(self.links, other.links)
        self.starts += other.starts
        if other.last is not None and (self.last is None or other.last[0] > self.last[0]):
            self.last = other.last
        if other.first is not None and (self.first is None or other.first[0] < self.first[0]):
            self.first = other.first

    def mean(self, name: str) -> float:
        return self.sums[name].value / self.ranks

    @property
    def link_totals(self) -> dict[str, list[float]]:
        return link_values(self.links)

    @property
    def first_start(self) -> float:
        return self.first[0] if self.first else math.inf

    @property
    def late_rank(self) -> int | None:
        """The rank that started the op last (None without start times or with one rank)."""
        return self.last[1] if self.starts > 1 else None

    @property
    def first_rank(self) -> int | None:
        return self.first[1] if self.starts > 1 else None

    @property
    def lateness_us(self) -> float:
        """Last start minus first start (µs): how long the first rank waited for the last one to arrive."""
        return self.last[0] - self.first[0] if self.starts > 1 else 0.0


@dataclass(frozen=True, slots=True)
class Split:
    """One rank's communication time added over its ops (ms), and what each link moved (link -> size, time)."""

    rank: int
    ops: int
    elapse_ms: float
    transit_ms: float
    wait_ms: float
    sync_ms: float
    idle_ms: float
    links: tuple[tuple[str, float, float], ...] = ()  # (link, size MB, time ms), by link name

    @property
    def wait_ratio(self) -> float:
        return self.wait_ms / (self.wait_ms + self.transit_ms) if self.wait_ms + self.transit_ms else 0.0

    @property
    def sync_ratio(self) -> float:
        return self.sync_ms / (self.sync_ms + self.transit_ms) if self.sync_ms + self.transit_ms else 0.0


def rank_split(rank: int, timings: list[CommTiming]) -> Split:
    sums: dict[str, tuple[ExactSum, ExactSum]] = {}
    for t in timings:
        add_links(sums, t)
    return Split(
        rank,
        len(timings),
        *(sum(getattr(t, name) for t in timings) for name in TIMES),
        tuple(sorted((link, size, time_ms) for link, (size, time_ms) in link_values(sums).items())),
    )


class SplitTable(Mapping):
    """rank -> its :class:`Split`, kept as float64 rows (the op count and five times, then each link's size and
    time; about 100 bytes a rank), in the order ranks were added."""

    def __init__(self) -> None:
        # the rows of consecutive ranks: slot by slot, so a rank's row is found from where each block ends
        self._blocks: list[np.ndarray] = []
        self._links: list[tuple[str, ...]] = []  # per block, the links of its columns after the times
        self._ends = array("q")  # per block, the slot after its last row
        self._ranks = RankIndex()

    def _add_block(self, block: np.ndarray, links: tuple[str, ...]) -> None:
        self._blocks.append(block)
        self._links.append(links)
        self._ends.append(len(self._ranks))

    def _place(self, slot: int) -> tuple[int, int]:
        """(block, row) of ``slot``."""
        b = bisect.bisect_right(self._ends, slot)
        return b, slot - (self._ends[b - 1] if b else 0)

    def add(self, split: Split) -> None:
        links = tuple(link for link, _, _ in split.links)
        row = [split.ops, split.elapse_ms, split.transit_ms, split.wait_ms, split.sync_ms, split.idle_ms]
        for _, size, time_ms in split.links:
            row += [size, time_ms]
        self._ranks.add(split.rank)
        self._add_block(np.array([row], dtype=np.float64), links)

    def merge(self, other: SplitTable) -> None:
        """Add a later chunk's ranks, as one block with a column pair for every link any of them used."""
        if not len(other):
            return
        links = tuple(dict.fromkeys(link for names in other._links for link in names))
        block = np.full((len(other), 6 + 2 * len(links)), np.nan)
        for row, rank in enumerate(other._ranks):
            b, r = other._place(row)
            values, names = other._blocks[b][r], other._links[b]
            block[row, :6] = values[:6]
            for k, link in enumerate(names):
                j = 6 + 2 * links.index(link)
                block[row, j : j + 2] = values[6 + 2 * k : 8 + 2 * k]
            self._ranks.add(rank)
        self._add_block(block, links)

    def __getitem__(self, rank: int) -> Split:
        b, r = self._place(self._ranks.slot(rank))
        values, names = self._blocks[b][r].tolist(), self._links[b]
        links = tuple(
            sorted(
                (link, values[6 + 2 * k], values[7 + 2 * k])
                for k, link in enumerate(names)
                if values[6 + 2 * k] == values[6 + 2 * k]
            )
        )  # NaN: the rank did not use that link
        return Split(rank, int(values[0]), *values[1:6], links)

    def __contains__(self, rank: object) -> bool:
        return rank in self._ranks

    def __iter__(self) -> Iterator[int]:
        return iter(self._ranks)

    def __len__(self) -> int:
        return len(self._ranks)

    def ranks(self) -> np.ndarray:
        """The ranks, ascending."""
        return np.sort(self._ranks.array())

    def times(self) -> dict[str, np.ndarray]:
        """ "rank" and the op count and :data:`TIMES` of every rank, in rank order, from the rows at once (no Split
        made: 16,384 of them held 7 MiB)."""
        if not self._blocks:
            return {name: np.zeros(0) for name in ("rank", "ops", *TIMES)}
        ranks = self._ranks.array()
        order = np.argsort(ranks, kind="stable")
        out = {"rank": ranks[order]}
        for i, name in enumerate(("ops", *TIMES)):
            out[name] = np.concatenate([block[:, i] for block in self._blocks])[order]
        return out

    def wait_ratios(self) -> RankValues:
        """Per rank, in rank order, its :attr:`Split.wait_ratio`."""
        times = self.times()
        wait, both = times["wait_ms"], times["wait_ms"] + times["transit_ms"]
        return RankValues(times["rank"], np.divide(wait, both, out=np.zeros(len(both)), where=both != 0))


def _step_number(step: str) -> int | None:
    digits = "".join(ch for ch in step if ch.isdigit())
    return int(digits) if digits else None


@dataclass
class Communication:
    """Every rank's communication analysis, added up rank by rank (see the module docstring)."""

    keep_links: bool = True  # keep each rank's link matrix rows (a view of a few ranks shows them)
    splits: SplitTable = field(default_factory=SplitTable)  # the ranks whose analysis was read, even empty
    ops: dict[tuple[str, str, str], OpTotals] = field(default_factory=dict)
    links_moved: dict[str, tuple[ExactSum, ExactSum]] = field(default_factory=dict)  # every rank's ops
    p2p: dict[tuple[int | None, int], list[CommTiming]] = field(default_factory=dict)  # (step, rank) -> its P2P ops
    links: dict[int, list[MatrixLink]] = field(default_factory=dict)  # with keep_links
    # group -> every rank its links name (sorted, unique: an array, 8 bytes a rank rather than a set's 60)
    groups: dict[str, np.ndarray] = field(default_factory=dict)
    sources: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)  # a rank whose files could not be read, and what was lost

    def add_rank(self, rank: int, found: tuple[list[CommTiming], str, list[MatrixLink]] | str | None) -> None:
        """One rank's analysis as :attr:`common.formats.cluster.RankProfile.communication_files` reads it."""
        if isinstance(found, str):
            self.notes.append(f"rank {rank}: communication analysis not read: {found}")
            return
        if found is None:
            return
        timings, source, matrix = found
        self.sources.add(source)
        self.splits.add(rank_split(rank, timings))
        for t in timings:
            op = self.ops.get(t.key)
            if op is None:
                op = self.ops[t.key] = OpTotals(t.step, t.kind, t.op_name, t.group)
            op.add(rank, t)
            add_links(self.links_moved, t)
            if t.kind == "p2p":
                self.p2p.setdefault((_step_number(t.step), rank), []).append(t)
        self._add_groups(group_members(matrix))
        if self.keep_links:
            self.links[rank] = matrix

    def merge(self, other: Communication) -> None:
        """Add a later chunk's ranks."""
        self.splits.merge(other.splits)
        for key, op in other.ops.items():
            mine = self.ops.get(key)
            if mine is None:
                self.ops[key] = op
            else:
                mine.merge(op)
        merge_links(self.links_moved, other.links_moved)
        self.p2p.update(other.p2p)
        self.links.update(other.links)
        self._add_groups(other.groups)
        self.sources |= other.sources
        self.notes += other.notes

    def _add_groups(self, groups: Mapping[str, Iterable[int]]) -> None:
        for group, members in groups.items():
            mine = self.groups.get(group)
            theirs = np.fromiter(members, dtype=np.int64)
            self.groups[group] = np.unique(theirs) if mine is None else np.union1d(mine, theirs)

    @property
    def link_totals(self) -> dict[str, list[float]]:
        """What each link moved over every rank's ops: link -> [size MB, time ms]."""
        return link_values(self.links_moved)

    @property
    def source(self) -> str:
        return " and ".join(sorted(self.sources)) or "none"

    @property
    def read(self) -> bool:
        """Whether any rank had an analysis, or a note says why not."""
        return bool(self.splits or self.notes)

    def ops_in_order(self) -> list[OpTotals]:
        """The ops in the order of their first start (those without a start last)."""
        return sorted(self.ops.values(), key=lambda op: op.first_start)


class CollectiveStarts:
    """When each rank started each collective the first rank ran (µs): one float64 row per rank, NaN where the rank
    did not run it (a collective the first rank did not run cannot be on every rank, so it is not kept); 8 bytes a
    rank and collective, in memory up to :data:`common.formats.spill.SPILL_BYTES` and in a file beyond. Added in
    rank order by :meth:`add` and :meth:`merge`; read a block of ranks at a time (:meth:`row_blocks`)."""

    def __init__(self) -> None:
        self.names: list[str] | None = None  # the first rank's collectives: "<step>/<op name>@<group>"
        self._index: dict[str, int] = {}
        self._blocks: list[np.ndarray] = []  # in memory: rows of consecutive ranks, a column per name
        self._files = spill.SpillFolder("msprof_lab_starts_")  # the rows, once past SPILL_BYTES
        self._complete: np.ndarray | None = None  # per name: no rank so far without its start
        self.rows = 0
        self.ranks = array("q")  # 8 bytes a rank
        self.sources: set[str] = set()
        self.missing = False  # a rank had no record of its collectives

    def __getstate__(self) -> dict:
        """A chunk read in a worker travels with its rows (a spilled file stays on the worker's disk)."""
        state = dict(self.__dict__)
        if self._files.used:
            state["_blocks"] = list(self.row_blocks())
        return state

    def _name(self, names: list[str]) -> None:
        if self.names is None:
            self.names = list(names)
            self._index = {name: i for i, name in enumerate(self.names)}
            self._complete = np.ones(len(self.names), dtype=bool)

    def add(self, rank: int, starts: dict[str, float] | None, source: str) -> None:
        self.sources.add(source)
        if starts is None:
            self.missing = True
            return
        self._name(list(starts))
        row = np.full((1, len(self.names)), np.nan)
        for name, start in starts.items():
            i = self._index.get(name)
            if i is not None:
                row[0, i] = start
        self._append(row)
        self.ranks.append(rank)

    def merge(self, other: CollectiveStarts) -> None:
        """Add a later chunk's ranks, its columns matched to these by name."""
        self.sources |= other.sources
        self.missing |= other.missing
        if not other.rows:
            return
        self._name(other.names)
        block = np.full((other.rows, len(self.names)), np.nan)
        first = 0
        for theirs in other.row_blocks():
            for j, name in enumerate(other.names):
                i = self._index.get(name)
                if i is not None:
                    block[first : first + len(theirs), i] = theirs[:, j]
            first += len(theirs)
        self._append(block)
        self.ranks += other.ranks

    def _append(self, block: np.ndarray) -> None:
        self._complete &= ~np.isnan(block).any(axis=0)
        self.rows += len(block)
        if not self._files.used and self.rows * len(self.names) * 8 <= spill.SPILL_BYTES:
            self._blocks.append(block)
            return
        for kept in self._blocks:
            self._files.append("starts", kept)
        self._blocks = []
        self._files.append("starts", block)

    @property
    def spilled(self) -> bool:
        return self._files.used

    def on_every_rank(self) -> np.ndarray:
        """Per name in :attr:`names`: whether every rank recorded its start."""
        return self._complete.copy() if self._complete is not None else np.zeros(0, dtype=bool)

    def row_blocks(self, values: int = 1 << 15) -> Iterator[np.ndarray]:
        """The rows (a column per name), consecutive ranks at a time in :attr:`ranks` order, each block about
        ``values`` values once spilled: a figure over thousands of ranks never holds the whole table."""
        if not self._files.used:
            yield from self._blocks
            return
        width = len(self.names)
        step = max(1, values // width)
        for first in range(0, self.rows, step):
            count = min(step, self.rows - first)
            yield self._files.read("starts", first * width, count * width).reshape(count, width)

    @property
    def source(self) -> str:
        return " and ".join(sorted(self.sources))
