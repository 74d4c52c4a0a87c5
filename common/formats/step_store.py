"""Every rank's step rows in columns: what a cluster of thousands of ranks keeps of its step tables.

A :class:`~common.formats.records.StepTime` row is a Python object of ten boxed values (about 600
bytes); 16,384 ranks of 20 steps would hold 200 MB of them. :class:`StepStore` keeps the rows as
float64 columns (the step and eight times, 72 bytes a row; a missing Preparing or Step is NaN) and
hands a rank's rows back as ``StepTime`` objects when asked (it is a ``Mapping`` rank -> rows, as the
cluster view's ``steps`` always was). Whole-capture figures read one :meth:`column` at a time.

Past :data:`SPILL_ROWS` rows the columns move to files of their own in a temporary folder (removed
with the store), so what a capture of any size holds in memory is bounded: one column while it is
read, and per rank where its rows are and its device id.
"""

from __future__ import annotations

import math
import shutil
import tempfile
import weakref
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np

from common.formats.records import StepTime

FIELDS = ("computing_us", "communication_not_overlapped_us", "overlapped_us", "communication_us", "free_us",
          "stage_us", "bubble_us", "preparing_us")
COLUMNS = ("step", *FIELDS)
SUMMARY_COLUMNS = {"computing": "computing_us", "comm_not_overlapped": "communication_not_overlapped_us",
                   "overlapped": "overlapped_us", "communication": "communication_us", "free": "free_us",
                   "preparing": "preparing_us"}
SPILL_ROWS = 1 << 17  # 131,072 rows (9.4 MB of columns) in memory at most; beyond, on disk


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
        self._where: dict[int, tuple[int, int]] = {}  # rank -> its rows [first, end)
        self._devices: dict[int, str | None | tuple[str | None, ...]] = {}  # rank -> its device id (or one a row)
        self._names: dict[str | None, str | None] = {}  # one string per device id, shared by the ranks
        self._folder: Path | None = None  # the columns' files, once spilled

    def add(self, rank: int, rows: list[StepTime]) -> None:
        table = np.empty((len(rows), len(COLUMNS)), dtype=np.float64)
        for i, s in enumerate(rows):
            table[i, 0] = math.nan if s.step is None else s.step
            table[i, 1:] = [math.nan if v is None else v for v in (getattr(s, f) for f in FIELDS)]
        self._append(table, {rank: (0, len(rows))}, {rank: [s.device_id for s in rows]})

    def merge(self, other: StepStore) -> None:
        """Add another store's ranks (a later chunk of the capture)."""
        if other._where:
            devices = {r: list(d) if isinstance(d, tuple) else [d] * (e - f)
                       for (r, (f, e)), d in zip(other._where.items(), other._devices.values())}
            self._append(other._table(), other._where, devices)

    def _append(self, table: np.ndarray, where: dict[int, tuple[int, int]], devices: dict[int, list]) -> None:
        for rank, (first, end) in where.items():
            self._where[rank] = (self._rows + first, self._rows + end)
            ids = [self._names.setdefault(d, d) for d in devices[rank]]
            self._devices[rank] = ids[0] if len(set(ids)) <= 1 and ids else tuple(ids)
        self._rows += len(table)
        if self._folder is None:
            self._blocks.append(table)
            if self._rows > SPILL_ROWS:
                self._spill()
        else:
            self._write(table)

    def _spill(self) -> None:
        self._folder = Path(tempfile.mkdtemp(prefix="msprof_lab_steps_"))
        weakref.finalize(self, shutil.rmtree, self._folder, True)
        blocks, self._blocks = self._blocks, []
        for table in blocks:
            self._write(table)

    def _write(self, table: np.ndarray) -> None:
        for i, name in enumerate(COLUMNS):
            with (self._folder / f"{name}.f64").open("ab") as f:
                np.ascontiguousarray(table[:, i]).tofile(f)

    def _table(self, first: int = 0, end: int | None = None) -> np.ndarray:
        """Rows [first, end) with every column."""
        end = self._rows if end is None else end
        return np.stack([self._read(name, first, end) for name in COLUMNS], axis=1) if end > first else \
            np.empty((0, len(COLUMNS)))

    def _read(self, name: str, first: int, end: int) -> np.ndarray:
        index = COLUMNS.index(name)
        if self._folder is not None:
            return np.fromfile(self._folder / f"{name}.f64", dtype=np.float64, count=end - first, offset=8 * first)
        out, base = [], 0
        for table in self._blocks:
            lo, hi = max(first, base), min(end, base + len(table))
            if lo < hi:
                out.append(table[lo - base:hi - base, index])
            base += len(table)
        return np.concatenate(out) if out else np.empty(0)

    def __getitem__(self, rank: int) -> list[StepTime]:
        first, end = self._where[rank]
        device = self._devices[rank]
        devices = device if isinstance(device, tuple) else [device] * (end - first)
        return [StepTime(None if math.isnan(row[0]) else int(row[0]), *row[1:8].tolist(),
                         preparing_us=_none(float(row[8])), device_id=d)
                for row, d in zip(self._table(first, end), devices)]

    def __iter__(self) -> Iterator[int]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)

    @property
    def spilled(self) -> bool:
        return self._folder is not None

    def column(self, name: str, rank: int | None = None) -> np.ndarray:
        """One of :data:`COLUMNS` over every rank's rows, rank after rank, or over one rank's."""
        first, end = self._where[rank] if rank is not None else (0, self._rows)
        return self._read(name, first, end)

    def arrays(self, rank: int | None = None) -> Mapping[str, np.ndarray]:
        """The columns :func:`common.analyze.bounds.step.summarize_columns` takes (NaN for a missing Step or
        Preparing), of one rank's rows or (``rank`` None) of every rank's: each read when asked for."""
        return _Columns(self, rank)

    def by_rank(self, name: str) -> np.ndarray | None:
        """One field as a (ranks, steps) array, ranks in the order added; None when the ranks have different
        numbers of rows."""
        counts = {end - first for first, end in self._where.values()}
        if len(counts) != 1:
            return None
        return self.column(name).reshape(len(self._where), counts.pop())

    def rank_column(self) -> np.ndarray:
        """The rank of each row of :meth:`column`."""
        ranks = np.empty(self._rows, dtype=np.int64)
        for rank, (first, end) in self._where.items():
            ranks[first:end] = rank
        return ranks


class _Columns(Mapping):
    """summarize_columns' names -> one of a store's columns, read on each access (never all held)."""

    def __init__(self, store: StepStore, rank: int | None) -> None:
        self._store, self._rank = store, rank

    def __getitem__(self, name: str) -> np.ndarray:
        return self._store.column(SUMMARY_COLUMNS.get(name, name), self._rank)

    def __iter__(self) -> Iterator[str]:
        return iter([*SUMMARY_COLUMNS, "step"])

    def __len__(self) -> int:
        return len(SUMMARY_COLUMNS) + 1
