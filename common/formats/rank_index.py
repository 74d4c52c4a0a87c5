"""rank -> its slot (0, 1, 2 ... in the order ranks were added), in a few bytes a rank.

A cluster view keeps per-rank rows for thousands of ranks; a ``dict`` entry with its key and value costs
about 100 bytes a rank, an ``array`` of the ranks 8. Ranks come in ascending order (a capture is read in rank
order), so a rank is found by bisection; were one ever added out of order, a dict takes over from then on.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterator, Mapping, Sequence

import numpy as np


class RankIndex:
    def __init__(self) -> None:
        self._ranks = array("q")
        self._order: dict[int, int] | None = None  # only once a rank came out of ascending order

    def add(self, rank: int) -> int:
        """Its slot (the next one)."""
        slot = len(self._ranks)
        if self._order is not None:
            self._order[rank] = slot
        elif slot and rank <= self._ranks[-1]:
            self._order = {r: i for i, r in enumerate(self._ranks)} | {rank: slot}
        self._ranks.append(rank)
        return slot

    def slot(self, rank: int) -> int:
        """``rank``'s slot; KeyError when it was never added."""
        if self._order is not None:
            return self._order[rank]
        i = bisect.bisect_left(self._ranks, rank)
        if i == len(self._ranks) or self._ranks[i] != rank:
            raise KeyError(rank)
        return i

    def __contains__(self, rank: object) -> bool:
        try:
            self.slot(rank)  # type: ignore[arg-type]
        except (KeyError, TypeError):
            return False
        return True

    def __iter__(self) -> Iterator[int]:
        return iter(self._ranks)

    def __len__(self) -> int:
        return len(self._ranks)

    def __getitem__(self, slot: int) -> int:
        return self._ranks[slot]

    def numbers(self, first: int, end: int) -> list[int]:
        """The ranks of slots [first, end)."""
        return self._ranks[first:end].tolist()

    def array(self) -> np.ndarray:
        """The ranks, slot by slot (a copy)."""
        return np.array(self._ranks, dtype=np.int64)


class MadeOnAccess(Sequence):
    """A sequence of thousands of items kept in columns: each item made when it is asked for (a subclass gives
    ``_item(i)`` and ``__len__``)."""

    def _item(self, i: int):
        raise NotImplementedError

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self._item(i) for i in range(*index.indices(len(self)))]
        return self._item(range(len(self))[index])


class RankValues(Mapping):
    """rank -> one number, for thousands of ranks in two arrays (ranks ascending) instead of a dict's entries;
    iterates in rank order, as a dict filled in rank order would."""

    def __init__(self, ranks: np.ndarray, values: np.ndarray) -> None:
        self.ranks, self.values = np.asarray(ranks, dtype=np.int64), np.asarray(values)

    @classmethod
    def of(cls, mapping: Mapping) -> RankValues:
        """A mapping rank -> number as RankValues (one already is returned as it is)."""
        if isinstance(mapping, RankValues):
            return mapping
        ranks = sorted(mapping)
        return cls(np.array(ranks, dtype=np.int64), np.array([mapping[r] for r in ranks]))

    def __getitem__(self, rank: int):
        i = int(np.searchsorted(self.ranks, rank))
        if i == len(self.ranks) or self.ranks[i] != rank:
            raise KeyError(rank)
        return self.values[i].item()

    def __iter__(self) -> Iterator[int]:
        return iter(self.ranks.tolist())

    def __len__(self) -> int:
        return len(self.ranks)

    def largest(self, top: int) -> list[int]:
        """The ``top`` ranks of the largest values, ties in rank order."""
        return self.ranks[np.argsort(-self.values, kind="stable")[:top]].tolist()

    def first_largest(self) -> int | None:
        """The rank of the largest value (the first of equals), as ``max(mapping, key=mapping.get)``."""
        return int(self.ranks[np.argmax(self.values)]) if len(self.ranks) else None
