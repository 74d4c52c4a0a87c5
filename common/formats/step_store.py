"""Every rank's step rows in columns: what a cluster of thousands of ranks keeps of its step tables.

A :class:`~common.formats.records.StepTime` row is a Python object of ten boxed values (about 600
bytes); 16,384 ranks of 20 steps would hold 200 MB of them. :class:`StepStore` keeps the rows as
float64 columns (the step and eight times, 72 bytes a row; a missing Preparing or Step is NaN) and
hands a rank's rows back as ``StepTime`` objects when asked (it is a ``Mapping`` rank -> rows, as the
cluster view's ``steps`` always was). Whole-capture figures read a block of rows (:meth:`row_blocks`) or
of ranks (:meth:`rank_blocks`) at a time.

Past :data:`SPILL_ROWS` rows the columns move to files of their own (:mod:`common.formats.spill`), so
what a capture of any size holds in memory is bounded: the block being read, and per rank where its
rows are and its device id.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterator, Mapping

import numpy as np

from common.formats.rank_index import RankIndex
from common.formats.records import StepTime
from common.formats.spill import SPILL_BYTES, SpillFolder

FIELDS = (
    "computing_us",
    "communication_not_overlapped_us",
    "overlapped_us",
    "communication_us",
    "free_us",
    "stage_us",
    "bubble_us",
    "preparing_us",
)
COLUMNS = ("step", *FIELDS)
SUMMARY_COLUMNS = {
    "computing": "computing_us",
    "comm_not_overlapped": "communication_not_overlapped_us",
    "overlapped": "overlapped_us",
    "communication": "communication_us",
    "free": "free_us",
    "preparing": "preparing_us",
}
SPILL_ROWS = SPILL_BYTES // (8 * len(COLUMNS))  # 29,127 rows in memory at most; beyond, on disk


def _none(value: float) -> float | None:
    return None if math.isnan(value) else value


class StepStore(Mapping):
    """rank -> its step rows (``list[StepTime]``), in the order ranks were added, kept in columns."""

    @classmethod
    def of(cls, steps: Mapping) -> StepStore:
        """A store of ``rank -> rows`` (a store is returned as it is)."""
        if isinstance(steps, StepStore):
            return steps
        store = cls()
        for rank, rows in steps.items():
            store.add(rank, rows)
        return store

    def __init__(self) -> None:
        self._blocks: list[np.ndarray] = []  # in memory: rows of consecutive ranks, a column per COLUMNS
        self._rows = 0  # rows so far (in memory and on disk)
        # per rank, in the order added (a few bytes a rank, not a dict entry): its number, where its rows start (one
        # more entry: the end), and its device id as an index into _names (-1: one id a row, kept in _per_row)
        self._ranks = RankIndex()
        self._starts, self._device = array("q", [0]), array("l")
        self._names: list[str | None] = []  # one string per device id, shared by the ranks
        self._name_ix: dict[str | None, int] = {}
        self._per_row: dict[int, tuple[str | None, ...]] = {}  # slot -> one device id a row (rare)
        self._files = SpillFolder("msprof_lab_steps_")  # the columns' files, once spilled

    def __getstate__(self) -> dict:
        """A chunk read in a worker travels with its rows (a spilled file stays on the worker's disk)."""
        state = dict(self.__dict__)
        if self._files.used:
            state["_blocks"] = [self._table()]
        return state

    def add(self, rank: int, rows: list[StepTime]) -> None:
        table = np.empty((len(rows), len(COLUMNS)), dtype=np.float64)
        for i, s in enumerate(rows):
            table[i, 0] = math.nan if s.step is None else s.step
            table[i, 1:] = [math.nan if v is None else v for v in (getattr(s, f) for f in FIELDS)]
        self._append(table, [(rank, len(rows), [s.device_id for s in rows])])

    def merge(self, other: StepStore) -> None:
        """Add another store's ranks (a later chunk of the capture)."""
        if len(other):
            self._append(
                other._table(),
                [
                    (rank, other._starts[i + 1] - other._starts[i], other._devices_of(i))
                    for i, rank in enumerate(other._ranks)
                ],
            )

    def _devices_of(self, slot: int) -> list[str | None]:
        rows = self._starts[slot + 1] - self._starts[slot]
        ix = self._device[slot]
        return list(self._per_row[slot]) if ix < 0 else [self._names[ix]] * rows

    def _append(self, table: np.ndarray, ranks: list[tuple[int, int, list]]) -> None:
        for rank, rows, devices in ranks:
            slot = self._ranks.add(rank)
            self._starts.append(self._starts[-1] + rows)
            if len(set(devices)) <= 1:
                name = devices[0] if devices else None
                ix = self._name_ix.get(name)
                if ix is None:
                    ix = self._name_ix[name] = len(self._names)
                    self._names.append(name)
                self._device.append(ix)
            else:
                self._device.append(-1)
                self._per_row[slot] = tuple(devices)
        self._rows += len(table)
        if not self._files.used:
            self._blocks.append(table)
            if self._rows > SPILL_ROWS:
                self._spill()
        else:
            self._write(table)

    def _span(self, rank: int) -> tuple[int, int]:
        slot = self._ranks.slot(rank)
        return self._starts[slot], self._starts[slot + 1]

    def _spill(self) -> None:
        blocks, self._blocks = self._blocks, []
        for table in blocks:
            self._write(table)

    def _write(self, table: np.ndarray) -> None:
        for i, name in enumerate(COLUMNS):
            self._files.append(name, table[:, i])

    def _table(self, first: int = 0, end: int | None = None) -> np.ndarray:
        """Rows [first, end) with every column."""
        end = self._rows if end is None else end
        return (
            np.stack([self._read(name, first, end) for name in COLUMNS], axis=1)
            if end > first
            else np.empty((0, len(COLUMNS)))
        )

    def _read(self, name: str, first: int, end: int) -> np.ndarray:
        index = COLUMNS.index(name)
        if self._files.used:
            return self._files.read(name, first, end - first)
        out, base = [], 0
        for table in self._blocks:
            lo, hi = max(first, base), min(end, base + len(table))
            if lo < hi:
                out.append(table[lo - base : hi - base, index])
            base += len(table)
        return np.concatenate(out) if out else np.empty(0)

    def __getitem__(self, rank: int) -> list[StepTime]:
        slot = self._ranks.slot(rank)
        first, end = self._starts[slot], self._starts[slot + 1]
        return [
            StepTime(
                None if math.isnan(row[0]) else int(row[0]),
                *row[1:8].tolist(),
                preparing_us=_none(float(row[8])),
                device_id=d,
            )
            for row, d in zip(self._table(first, end), self._devices_of(slot))
        ]

    def __contains__(self, rank: object) -> bool:
        return rank in self._ranks

    def __iter__(self) -> Iterator[int]:
        return iter(self._ranks)

    def __len__(self) -> int:
        return len(self._ranks)

    @property
    def spilled(self) -> bool:
        return self._files.used

    def column(self, name: str, rank: int | None = None) -> np.ndarray:
        """One of :data:`COLUMNS` over every rank's rows, rank after rank, or over one rank's."""
        first, end = self._span(rank) if rank is not None else (0, self._rows)
        return self._read(name, first, end)

    def summary_blocks(self, names: tuple[str, ...], rank: int | None = None) -> Iterator[dict[str, np.ndarray]]:
        """:func:`common.analyze.bounds.step.summarize_blocks`' columns (named as :data:`SUMMARY_COLUMNS` and
        "step"; NaN for a missing Step or Preparing): of one rank's rows, or (``rank`` None) of every rank's, a
        block of rows at a time."""
        if rank is not None:
            yield {name: self.column(SUMMARY_COLUMNS.get(name, name), rank) for name in names}
            return
        for block in self.row_blocks(tuple(SUMMARY_COLUMNS.get(name, name) for name in names)):
            yield {name: block[SUMMARY_COLUMNS.get(name, name)] for name in names}

    def rows_per_rank(self) -> int | None:
        """How many rows every rank has; None when the ranks have different numbers of rows (or there are none)."""
        counts = np.diff(np.array(self._starts, dtype=np.int64))
        if not len(counts) or (counts != counts[0]).any():
            return None
        return int(counts[0])

    def row_blocks(self, names: tuple[str, ...], rows: int = 1 << 13) -> Iterator[dict[str, np.ndarray]]:
        """``names``' values over consecutive rows, ``rows`` at a time (rank after rank, as :meth:`column`; "rank":
        each row's rank): a row-wise figure over a capture of any size holds one block."""
        if "rank" in names:
            starts, numbers = np.array(self._starts, dtype=np.int64), self._ranks.array()
        for first in range(0, self._rows, rows):
            end = min(first + rows, self._rows)
            yield {
                name: self._read(name, first, end)
                if name != "rank"
                else numbers[np.searchsorted(starts, np.arange(first, end), side="right") - 1]
                for name in names
            }

    def by_step(
        self, names: tuple[str, ...], steps: list[int | None], values: int = 1 << 16
    ) -> Iterator[tuple[int | None, dict[str, np.ndarray]]]:
        """Per step of ``steps`` (None: the rows without one), in that order: ``names``' values over its rows, in
        the store's order ("rank": each row's rank). A group of steps at a time, each read from a pass over the
        rows, so that about ``values`` values a name are held, whatever the rank count."""
        per_group = max(1, values // max(1, len(self)))
        for first in range(0, len(steps), per_group):
            group = steps[first : first + per_group]
            pieces: dict[int | None, dict[str, list[np.ndarray]]] = {step: {n: [] for n in names} for step in group}
            for block in self.row_blocks(("step", *names)):
                step_of = block["step"]
                for step in group:
                    mask = np.isnan(step_of) if step is None else step_of == step
                    for name in names:
                        pieces[step][name].append(block[name][mask])
            for step in group:
                found = pieces.pop(step)
                yield step, {name: np.concatenate(found[name]) for name in names}

    def rank_blocks(
        self, names: tuple[str, ...], ranks: int = 256
    ) -> Iterator[tuple[list[int], dict[str, np.ndarray]]]:
        """``ranks`` ranks at a time, in the order added: their numbers and each of ``names`` as a (ranks, steps)
        array, so that a per-rank figure over a capture of any size holds one block (the ranks must have as many
        rows each: :meth:`rows_per_rank`)."""
        rows = self.rows_per_rank()
        if rows is None:
            raise ValueError("the ranks have different numbers of rows")
        for first in range(0, len(self._ranks), ranks):
            block = self._ranks.numbers(first, first + ranks)
            lo, hi = first * rows, (first + len(block)) * rows
            yield block, {name: self._read(name, lo, hi).reshape(len(block), rows) for name in names}
