"""msprobe's compare result: ``compare_result_<proc|rank>_<timestamp>.csv``, written by ``msprobe compare -tp <target>
-gp <golden> -o <out>`` (mindstudio-probe 26.2.0), one row per dumped tensor: each module call's inputs, parameters
and outputs (``Module.net.0.Linear.forward.0.output.0``).

The lab reads the names and two metrics. msprobe writes them in float64, a cosine above 0.9999 rounded to 6 decimals,
every other value with 12 (``format_value``, ``alg_cosine_similarity.py``); a value it could not compute is a word
(``N/A``, ``unsupported``, ``nan``), read as nan. Its ``Result`` column says ``error`` for every row when the two dumps
have different dtypes (``The dtype of NPU and Bench are inconsistent``, in ``Err_message``), fp16 against fp32 always:
the metrics are computed all the same, so the lab ignores that column.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

from common.errors import LabError

NAME, BENCH_NAME, COSINE, MAX_ABS_ERR, MESSAGE = "NPU Name", "Bench Name", "Cosine", "MaxAbsErr", "Err_message"
REQUIRED = (NAME, BENCH_NAME, COSINE, MAX_ABS_ERR)
PATTERN = "compare_result_*.csv"


@dataclass(frozen=True)
class ProbeRow:
    """One row of msprobe's compare: the target's tensor name, the golden's, and two metrics (nan: not computed)."""

    name: str
    bench_name: str
    cosine: float
    max_abs_err: float
    message: str


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def read_compare_result(path: Path) -> list[ProbeRow]:
    """The rows of one ``compare_result_*.csv``, in file order."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
        if missing:
            raise LabError(
                f"{path}: no column {missing[0]!r} (not an msprobe compare result?)",
                "check the msprobe version: the lab reads mindstudio-probe 26.2.0's layout",
            )
        return [
            ProbeRow(
                row[NAME], row[BENCH_NAME], _number(row[COSINE]), _number(row[MAX_ABS_ERR]), row.get(MESSAGE) or ""
            )
            for row in reader
        ]


def compare_result_file(folder: Path) -> Path:
    """The newest ``compare_result_*.csv`` in ``folder`` (msprobe names it after the dump's process or rank and the
    time); one error line when there is none."""
    found = sorted(folder.glob(PATTERN), key=lambda p: p.stat().st_mtime)
    if not found:
        raise LabError(f"msprobe compare wrote no {PATTERN} into {folder}", f"read its output in {folder}")
    return found[-1]
