"""Robust figures of noisy timings: medians with their spread, and a decision that can say "too noisy".

Profile data fluctuates: another program takes the core for a moment, an allocation faults in new
pages, a step waits for the disk. A mean or a sum over forwards is moved by one such outlier; the
median is not. So every check that reads a duration decides on the median over the forwards, steps
or launches a run holds, and takes its tolerance from the spread it measured (the interquartile
range), printed in the check's line. When the spread alone is larger than what the check could
tell apart, the check says "inconclusive" with the numbers ([N/A]) instead of failing.

Pure functions over numbers; nothing here reads a file.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from math import sqrt

import numpy as np

BINS = 1 << 12  # a pass of streamed_median counts the values in this many bins
CANDIDATES = 1 << 16  # values it gathers and sorts at once, at most


def quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) by linear interpolation between the sorted values (numpy's default rule)."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("quantile of no values")
    at = q * (len(ordered) - 1)
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


@dataclass(frozen=True)
class Estimate:
    """The median of n measurements with their quartiles."""

    median: float
    q1: float
    q3: float
    n: int

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    def scaled(self, factor: float) -> Estimate:
        """The same figures in another unit (x100: a share in percent; / samples: per sample)."""
        return Estimate(self.median * factor, self.q1 * factor, self.q3 * factor, self.n)

    def text(self, fmt: str = ",.1f", unit: str = "") -> str:
        """``median 3,295.5 us (IQR 3,105.0-3,358.0, n 5)``."""
        if self.n == 1:
            return f"{self.median:{fmt}}{unit} (one value)"
        return f"median {self.median:{fmt}}{unit} (IQR {self.q1:{fmt}}-{self.q3:{fmt}}, n {self.n})"


def quadrature(*spreads: float) -> float:
    """How far apart two medians of runs with these spreads (IQRs) can land by chance: the spreads added in
    quadrature. The one noise figure every timing check adds to its tolerance."""
    return sqrt(sum(s * s for s in spreads))


def estimate(values: list[float]) -> Estimate | None:
    """Median and quartiles of ``values``; None when there are none."""
    vals = [float(v) for v in values]
    if not vals:
        return None
    return Estimate(statistics.median(vals), quantile(vals, 0.25), quantile(vals, 0.75), len(vals))


@dataclass(frozen=True)
class Agreement:
    """Two medians compared: their difference, the tolerance (a fixed allowance plus the measured noise)
    and the outcome: ``ok`` (within), ``failed`` (beyond, with little noise) or ``inconclusive`` (beyond,
    but the noise alone is larger than ``noise_cap``)."""

    difference: float
    allowance: float
    noise: float
    tolerance: float
    outcome: str  # "ok" | "failed" | "inconclusive"

    def text(self, unit: str = "") -> str:
        return (
            f"difference {self.difference:.1f}{unit}, tolerance {self.tolerance:.1f}{unit} "
            f"= {self.allowance:g}{unit} allowed + {self.noise:.1f}{unit} measured noise"
        )


def agreement(a: Estimate, b: Estimate, allowance: float, noise_cap: float, k: float = 1.0) -> Agreement:
    """Do two medians agree? The measured noise is ``k`` x the two interquartile ranges added in quadrature:
    how far apart two honest runs of this spread can land. The tolerance is ``allowance`` (what the two
    measurements may differ by on a quiet machine: the check's own constant) plus that noise. Beyond it,
    the medians differ (``failed``), unless the noise exceeds ``noise_cap``: then a run this disturbed
    cannot decide (``inconclusive``)."""
    difference = abs(a.median - b.median)
    noise = k * quadrature(a.iqr, b.iqr)
    tolerance = allowance + noise
    if difference <= tolerance:
        outcome = "ok"
    elif noise > noise_cap:
        outcome = "inconclusive"
    else:
        outcome = "failed"
    return Agreement(difference, allowance, noise, tolerance, outcome)


def streamed_median(blocks: Callable[[], Iterable[np.ndarray]]) -> float:
    """``np.median`` of the values ``blocks()`` yields (NaN when one is NaN), exactly, without holding them all: a
    column of every rank's steps at 16,384 ranks is 2.6 MB, each block is read again a few times instead. Values
    are counted in :data:`BINS` bins between the lowest and the highest, the bin that holds the middle one is kept,
    and so on until it holds at most :data:`CANDIDATES` values (or one value many times), which are sorted."""
    n, low, high = 0, np.inf, -np.inf
    for block in blocks():
        if len(block):
            if np.isnan(block).any():
                return float("nan")
            n, low, high = n + len(block), min(low, float(block.min())), max(high, float(block.max()))
    if not n:
        return float("nan")
    if n <= CANDIDATES:
        return float(np.median(np.concatenate(list(blocks()))))
    middle = [_kth(blocks, k, low, high) for k in sorted({(n - 1) // 2, n // 2})]
    return float(np.mean(np.array(middle if n % 2 == 0 else middle[:1])))


def _kth(blocks: Callable[[], Iterable[np.ndarray]], k: int, low: float, high: float) -> float:
    """The ``k``-th smallest (from 0) of the values, all of which lie in [low, high]."""
    below, closed = 0, True  # values under ``low``; whether ``high`` itself is in the range
    while True:

        def inside(block: np.ndarray) -> np.ndarray:
            return block[(block >= low) & ((block <= high) if closed else (block < high))]

        count, least, most = 0, np.inf, -np.inf
        edges = np.linspace(low, high, BINS + 1)
        counts = np.zeros(BINS, dtype=np.int64)
        for block in blocks():
            values = inside(block)
            if len(values):
                count += len(values)
                least, most = min(least, float(values.min())), max(most, float(values.max()))
                bins = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, BINS - 1)
                counts += np.bincount(bins, minlength=BINS)
        if least == most:  # one value, however often
            return least
        if count <= CANDIDATES:
            ordered = np.sort(np.concatenate([inside(block) for block in blocks()]))
            return float(ordered[k - below])
        cumulative = below + np.cumsum(counts)
        j = int(np.searchsorted(cumulative, k, side="right"))  # the bin that holds the k-th
        below = int(cumulative[j] - counts[j])
        # the bin's values: edges[j] <= v < edges[j + 1], the last bin with its upper edge
        low, high, closed = float(edges[j]), float(edges[j + 1]), closed and j == BINS - 1
