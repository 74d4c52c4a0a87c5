"""The AscendC twins' timer CSV, read: the C++ twin (``02_api_AscendC``'s CPU stand-in headers) and the pyasc twin
write the same columns when the program exits (to ``$ASCENDC_TWIN_TIMINGS``), one row per block and launch; here
they become one record per launch (common.modes.ascendc.twin_profile writes those in msprof's layout)."""

from __future__ import annotations

import csv
import statistics
from dataclasses import dataclass
from pathlib import Path


@dataclass
class LaunchPipes:
    """One launch on the twin: wall time and the per-block mean time of each pipe (µs)."""

    start_us: float
    duration_us: float
    aiv_time_us: float
    pipe_us: dict[str, float]  # vec, scalar, mte2, mte3
    blocks: int = 1  # the blocks that ran it (Block Dim)


def parse_twin_timings(path: Path) -> list[LaunchPipes]:
    """A twin's per-block timer CSV -> one LaunchPipes per launch, in launch order."""
    with path.open(newline="") as f:
        return launch_pipes(csv.DictReader(f))


def launch_pipes(rows) -> list[LaunchPipes]:
    """Per-block timer rows (``launch``, ``start_unix_ns``, ``wall_ns``, ``kernel_ns``, ``vec_ns``,
    ``mte2_ns``, ``mte3_ns``; the C++ twin's CSV or the pyasc twin's rows) -> one LaunchPipes per launch.

    aiv_time is the mean block time (op_summary's aiv_time is a per-core figure too); scalar is
    what is left of a block's time outside the three timed pipes.
    """
    blocks: dict[int, list] = {}
    for row in rows:
        blocks.setdefault(int(row["launch"]), []).append(row)
    launches = []
    for _, rows in sorted(blocks.items()):
        aiv, vec, mte2, mte3 = (
            statistics.fmean(int(r[key]) for r in rows) / 1000.0
            for key in ("kernel_ns", "vec_ns", "mte2_ns", "mte3_ns")
        )
        launches.append(
            LaunchPipes(
                start_us=int(rows[0]["start_unix_ns"]) / 1000.0,
                duration_us=int(rows[0]["wall_ns"]) / 1000.0,
                aiv_time_us=aiv,
                pipe_us={"vec": vec, "scalar": aiv - vec - mte2 - mte3, "mte2": mte2, "mte3": mte3},
                blocks=len(rows),
            )
        )
    return launches


TIMINGS_HEADER = "launch,block,start_unix_ns,wall_ns,"  # how a twin's timings CSV starts (either twin's)


def is_timings_file(path: Path) -> bool:
    try:
        with Path(path).open(encoding="utf-8", errors="replace") as f:
            return f.readline().startswith(TIMINGS_HEADER)
    except OSError:
        return False
