"""How closely two exports of one capture can agree: the text export's own resolution.

torch_npu can write a rank's step table twice: ``step_trace_time.csv`` (the text export) and the
``StepTraceTime`` table of ``analysis.db`` (the database export). The database computes each value
from full-precision rows (ns). The text export computes each one from timestamps it holds at a
coarser resolution and prints each field on its own: absolute timestamps held as µs floats are
spaced 0.25 µs apart near 1.7e15 µs (a float's 52-bit mantissa), so a real capture's Stage and
Preparing sit on a 0.25 µs grid while its device-side columns sit on 0.01 µs. A value that is a span
between two such timestamps can differ from the database's by one grid step (half a step at each
end); a value the export sums from several spans, by one step per span.

The resolution is read from the text values themselves: the coarsest grid on which every value of a
column lies, the coarsest column giving the capture's (its timestamps come from one timeline).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from common.formats.records import StepTime

# Candidate grids (µs), coarsest first: whole µs, binary fractions (float spacing of absolute µs
# timestamps) and decimal ones (printed digits), down to 1 ns, the finest step torch_npu records.
GRIDS_US = (1.0, 0.5, 0.25, 0.125, 0.1, 0.0625, 0.05, 0.03125, 0.01, 0.005, 0.001)
# Float summation leaves digits far below any grid (230903.7200000004 is 230903.72 on the 0.01 grid).
ON_GRID_US = 1e-6
SPAN_ENDS = 2  # a span's two timestamps, each off by at most half a grid step
# step_trace_time.csv columns (and the StepTime field each is) that are a sum of more than one span
# in the export: Communication = Communication(Not Overlapped) + Overlapped.
SPANS = {"Communication": 2}
STEP_FIELDS = {
    "Computing": "computing_us",
    "Communication(Not Overlapped)": "communication_not_overlapped_us",
    "Overlapped": "overlapped_us",
    "Communication": "communication_us",
    "Free": "free_us",
    "Stage": "stage_us",
    "Bubble": "bubble_us",
    "Preparing": "preparing_us",
}


def grid_of(values: Iterable[float]) -> float | None:
    """The coarsest of :data:`GRIDS_US` on which every non-zero value lies; None when all are zero."""
    found = [abs(v) for v in values if v]
    if not found:
        return None
    for grid in GRIDS_US:
        if all(abs(v - round(v / grid) * grid) <= ON_GRID_US for v in found):
            return grid
    return GRIDS_US[-1]


@dataclass(frozen=True)
class Rounding:
    """The text export's resolution and what it allows per column (µs)."""

    resolution_us: float
    column: str  # the column whose values show it

    def tolerance_us(self, column: str) -> float:
        return SPANS.get(column, 1) * SPAN_ENDS * self.resolution_us / 2

    def text(self) -> str:
        summed = ", ".join(f"{c} (the sum of {n}) {self.tolerance_us(c):g} us" for c, n in SPANS.items())
        return (
            f"tolerance from the text export's resolution: its {self.column} values sit on a "
            f"{self.resolution_us:g} us grid, so a span between two of its timestamps may differ by "
            f"{self.tolerance_us('Stage'):g} us from analysis.db's full-precision rows; {summed}"
        )


def text_rounding(steps: dict[int, list[StepTime]]) -> Rounding:
    """The resolution of a text export's step tables: the coarsest grid any of its columns sits on."""
    rows = [s for per_rank in steps.values() for s in per_rank]
    best = Rounding(GRIDS_US[-1], "Stage")
    for column, field in STEP_FIELDS.items():
        grid = grid_of(v for s in rows if (v := getattr(s, field)) is not None)
        if grid is not None and grid > best.resolution_us:
            best = Rounding(grid, column)
    return best
