"""Interval arithmetic shared by collectors and analysers."""

from __future__ import annotations


def merge(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Sorted, non-overlapping [start, end) intervals covering the same time."""
    merged: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def union_us(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of intervals: busy time, overlaps counted once."""
    return sum(end - start for start, end in merge(intervals))


def gaps(busy: list[tuple[float, float]], start: float, end: float) -> list[tuple[float, float]]:
    """The parts of [start, end) not covered by the merged ``busy`` intervals."""
    out, cursor = [], start
    for b_start, b_end in busy:
        if b_start > cursor:
            out.append((cursor, min(b_start, end)))
        cursor = max(cursor, b_end)
    if cursor < end:
        out.append((cursor, end))
    return [(s, e) for s, e in out if e > s]
