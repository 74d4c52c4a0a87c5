"""What a workload file may declare in ``EXPECT``: the keys, the type of each value, and the op family
names a family-valued expectation may take.

The family names live here, below every layer that uses them, because loading a workload checks them;
common.analyze.families maps each backend's op names to these families.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from common.errors import LabError

# Declared expectations a workload may state in EXPECT, and the type of each value.
EXPECT_KEYS: dict[str, type] = {
    "top_family": str,  # the op family with the largest share of forward time
    "cast_on_03_default": bool,  # ATC's default precision policy inserts Casts (mode 03)
    "share_agreement_01_04": str,  # this family's share of forward time agrees between modes 01 and 04
}

# The op families, in the order reports list them (common.analyze.families says what each holds).
FAMILY_ORDER = [
    "matmul",
    "conv",
    "attention",
    "recurrent",
    "norm",
    "activation",
    "softmax",
    "elementwise",
    "reduce",
    "pool",
    "resize",
    "embedding",
    "indexing",
    "cast",
    "layout",
    "memcpy",
    "communication",
    "optimizer",
    "init",
    "other",
]


def expectations(expect: Any, file: Path) -> dict[str, Any]:
    """A workload file's ``EXPECT``, checked: a dict of known keys, each value of its type, family names
    among FAMILY_ORDER."""
    if not isinstance(expect, dict):
        raise LabError(
            f"workload file {file}: EXPECT is a {type(expect).__name__}, not a dict",
            f"write EXPECT = {{...}} with keys among {', '.join(EXPECT_KEYS)}",
        )
    for key, value in expect.items():
        if key not in EXPECT_KEYS:
            raise LabError(
                f"workload file {file}: EXPECT has an unknown key {key!r}", f"use keys among {', '.join(EXPECT_KEYS)}"
            )
        kind = EXPECT_KEYS[key]
        if not isinstance(value, kind):
            raise LabError(
                f"workload file {file}: EXPECT[{key!r}] is {value!r}, not a {kind.__name__}",
                f"give EXPECT[{key!r}] a {kind.__name__} value",
            )
        if kind is str and value not in FAMILY_ORDER:
            raise LabError(
                f"workload file {file}: EXPECT[{key!r}] names no op family: {value!r}",
                f"use one of {', '.join(FAMILY_ORDER)}",
            )
    return dict(expect)
