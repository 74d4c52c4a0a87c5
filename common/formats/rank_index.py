"""rank -> its slot (0, 1, 2 ... in the order ranks were added), in a few bytes a rank.

A cluster view keeps per-rank rows for thousands of ranks; a ``dict`` entry with its key and value costs
about 100 bytes a rank, an ``array`` of the ranks 8. Ranks come in ascending order (a capture is read in rank
order), so a rank is found by bisection; were one ever added out of order, a dict takes over from then on.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterator

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

    def array(self) -> np.ndarray:
        """The ranks, slot by slot (a copy)."""
        return np.array(self._ranks, dtype=np.int64)
