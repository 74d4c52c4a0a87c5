"""The lab's per-op table of a torch path against msprobe's compare of the same two dumps, module by module.

msprobe (L0, modules) names a module call's output ``Module.<path>.<Class>.forward.<call>.output.<index>``: the
lab's leaf ``net.0`` is ``Module.net.0.Linear.forward.0.output.0``, its second call (``net.0#2``) ``...forward.1...``.
The two are matched on the module path and call; the lab compares each leaf module's first output only.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from common.analyze.precision import CandidateResult
from common.formats.msprobe_compare import ProbeRow

# msprobe rounds a cosine above 0.9999 to 6 decimals (up to 5e-7 off); both compute in float64 over the same fp16
# values, and the fp32 references, run in two processes, may differ in the last bits (summation order, ~1e-7 of the
# scale): 1e-6 holds both and is far below any disagreement about which values are compared.
COSINE_AGREE = 1e-6
# Max abs err: the fp32 references' last-bit differences (~1e-7 of the scale) against fp16's error (~5e-4 of the
# scale on TinyMLP) are ~2e-4 of it; 1e-3 of the larger value holds that. msprobe prints 12 decimals: below 1e-9 two
# values (two equal fp32 paths: 0) agree outright.
ABS_ERR_AGREE_REL = 1e-3
ABS_ERR_AGREE_FLOOR = 1e-9
NAME = re.compile(
    r"^Module\.(?P<path>.+)\.(?P<cls>[^.]+)\.(?P<direction>forward|backward)\.(?P<call>[0-9]+)\."
    r"(?P<kind>input|output|parameters)\.(?P<index>.+)$"
)


def lab_path(probe_name: str) -> tuple[str, str, str] | None:
    """(the lab's module path with ``#<n>`` for a repeated call, the tensor's kind, its index) of an msprobe L0 name;
    None for a name of another form (an API-level dump, L1)."""
    found = NAME.match(probe_name)
    if found is None or found["direction"] != "forward":
        return None
    call = int(found["call"])
    return (found["path"] if call == 0 else f"{found['path']}#{call + 1}"), found["kind"], found["index"]


@dataclass(frozen=True)
class Agreement:
    """One module in both tables: the lab's and msprobe's cosine and max abs error, and whether they agree."""

    path: str
    probe_name: str
    lab_cosine: float
    probe_cosine: float
    lab_max_abs_err: float
    probe_max_abs_err: float

    @property
    def why(self) -> str:
        """What differs beyond the tolerances; "" when the two agree."""
        said = []
        if not _close(self.lab_cosine, self.probe_cosine, COSINE_AGREE, 0.0):
            said.append(f"cosine differs by more than {COSINE_AGREE:g}")
        if not _close(self.lab_max_abs_err, self.probe_max_abs_err, ABS_ERR_AGREE_FLOOR, ABS_ERR_AGREE_REL):
            said.append(f"max abs err differs by more than {ABS_ERR_AGREE_REL:g} of it")
        return "; ".join(said)


def _close(a: float, b: float, floor: float, rel: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= max(floor, rel * max(abs(a), abs(b)))


@dataclass
class CrossCheck:
    """A lab path against msprobe: the modules in both, and what only one of them reports."""

    candidate: str
    rows: list[Agreement] = field(default_factory=list)
    lab_only: list[str] = field(default_factory=list)  # lab rows msprobe has no output of
    probe_only: list[str] = field(default_factory=list)  # msprobe module outputs the lab has no row of
    not_compared: int = 0  # msprobe's rows of inputs, parameters and further outputs: the lab compares none

    @property
    def agree(self) -> bool:
        return bool(self.rows) and all(not r.why for r in self.rows)


def cross_check(result: CandidateResult, probe: list[ProbeRow]) -> CrossCheck:
    """``result``'s rows against msprobe's module outputs, matched by module path and call (:func:`lab_path`)."""
    check = CrossCheck(result.name)
    outputs: dict[str, ProbeRow] = {}
    for row in probe:
        named = lab_path(row.name)
        if named is not None and named[1:] == ("output", "0"):
            outputs[named[0]] = row
        else:
            check.not_compared += 1
    lab_rows = {r.path: r for r in result.rows}
    for path, row in lab_rows.items():
        found = outputs.get(path)
        if found is None:
            check.lab_only.append(path)
            continue
        check.rows.append(Agreement(path, found.name, row.cosine, found.cosine, row.max_abs_err, found.max_abs_err))
    check.probe_only = [row.name for path, row in outputs.items() if path not in lab_rows]
    return check
