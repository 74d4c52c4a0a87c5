"""Every rank's step rows in columns: what a cluster of thousands of ranks keeps of its step tables.

A :class:`~common.formats.records.StepTime` row is a Python object of ten boxed values (about 600
bytes); 16,384 ranks of 20 steps would hold 200 MB of them. :class:`StepStore` keeps each rank's
rows as one float64 array (72 bytes a row: the step and eight times; a missing Preparing or Step is
NaN) and hands a rank's rows back as ``StepTime`` objects when asked (it is a ``Mapping`` rank ->
rows, as the cluster view's ``steps`` always was). Whole-capture figures read :meth:`column`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping

import numpy as np

from common.formats.records import StepTime

FIELDS = ("computing_us", "communication_not_overlapped_us", "overlapped_us", "communication_us", "free_us",
          "stage_us", "bubble_us", "preparing_us")
_COLUMN = {name: i + 1 for i, name in enumerate(FIELDS)}  # column 0: the step
SUMMARY_COLUMNS = {"computing": "computing_us", "comm_not_overlapped": "communication_not_overlapped_us",
                   "overlapped": "overlapped_us", "communication": "communication_us", "free": "free_us",
                   "preparing": "preparing_us"}


def _none(value: float) -> float | None:
    return None if math.isnan(value) else value


class StepStore(Mapping):
    """rank -> its step rows (``list[StepTime]``), kept as one array per rank, in the order ranks were added."""

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
        self._blocks: list[np.ndarray] = []  # each: rows of consecutive ranks (the step, then FIELDS)
        self._where: dict[int, tuple[int, int, int]] = {}  # rank -> (block, first row, end row)
        self._devices: list[tuple[str | None, ...]] = []  # per block, each row's device id (shared strings)
        self._names: dict[str | None, str | None] = {}

    def add(self, rank: int, rows: list[StepTime]) -> None:
        table = np.empty((len(rows), len(FIELDS) + 1), dtype=np.float64)
        for i, s in enumerate(rows):
            table[i, 0] = math.nan if s.step is None else s.step
            table[i, 1:] = [math.nan if v is None else v for v in (getattr(s, f) for f in FIELDS)]
        self._where[rank] = (len(self._blocks), 0, len(rows))
        self._blocks.append(table)
        self._devices.append(tuple(self._names.setdefault(s.device_id, s.device_id) for s in rows))

    def merge(self, other: StepStore) -> None:
        """Add another store's ranks (a later chunk of the capture), as one block."""
        if not other._blocks:
            return
        block, offsets, base = len(self._blocks), [0], 0
        for table in other._blocks:
            base += len(table)
            offsets.append(base)
        for rank, (b, first, end) in other._where.items():
            self._where[rank] = (block, offsets[b] + first, offsets[b] + end)
        self._blocks.append(np.concatenate(other._blocks))
        self._devices.append(tuple(self._names.setdefault(d, d) for part in other._devices for d in part))

    def __getitem__(self, rank: int) -> list[StepTime]:
        block, first, end = self._where[rank]
        table, devices = self._blocks[block][first:end], self._devices[block][first:end]
        return [StepTime(None if math.isnan(row[0]) else int(row[0]), *row[1:8].tolist(),
                         preparing_us=_none(float(row[8])), device_id=device)
                for row, device in zip(table, devices)]

    def __iter__(self) -> Iterator[int]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)

    def _table(self, rank: int | None = None) -> np.ndarray:
        if rank is not None:
            block, first, end = self._where[rank]
            return self._blocks[block][first:end]
        return np.concatenate(self._blocks) if self._blocks else np.empty((0, len(FIELDS) + 1))

    def column(self, name: str) -> np.ndarray:
        """One field over every rank's rows, rank after rank ("step": the steps, NaN for an empty Step)."""
        index = 0 if name == "step" else _COLUMN[name]
        return np.concatenate([t[:, index] for t in self._blocks]) if self._blocks else np.empty(0)

    def arrays(self, rank: int | None = None) -> dict[str, np.ndarray]:
        """The columns :func:`common.analyze.bounds.step.summarize_columns` takes (NaN for a missing Step or
        Preparing), of one rank's rows or (``rank`` None) of every rank's."""
        table = self._table(rank)
        return {"step": table[:, 0], **{name: table[:, _COLUMN[field]] for name, field in SUMMARY_COLUMNS.items()}}

    def by_rank(self, name: str) -> np.ndarray | None:
        """One field as a (ranks, steps) array, ranks in the order added; None when the ranks have different
        numbers of rows."""
        counts = {end - first for _, first, end in self._where.values()}
        if len(counts) != 1:
            return None
        return self.column(name).reshape(len(self._where), counts.pop())

    def rank_column(self) -> np.ndarray:
        """The rank of each row of :meth:`column`."""
        ranks = np.empty(sum(len(t) for t in self._blocks), dtype=np.int64)
        starts = np.cumsum([0] + [len(t) for t in self._blocks])
        for rank, (block, first, end) in self._where.items():
            ranks[starts[block] + first:starts[block] + end] = rank
        return ranks
