"""The checks on what each forward, step or launch recorded (grouped by common.analyze.groups): the same ops every
time, one kernel per launch, a family present or absent."""

from __future__ import annotations

from collections import Counter

from common.analyze.families import op_family
from common.formats.records import Task
from common.verdict import Verdict


def _by_family(ops: Counter[str]) -> str:
    per: Counter[str] = Counter()
    for op, n in ops.items():
        per[op_family(op)] += n
    return ", ".join(f"{f} {n}" for f, n in sorted(per.items(), key=lambda kv: (-kv[1], kv[0])))


def _ops(ops: Counter[str], most: int = 4) -> str:
    listed = [f"{op} x{n} ({op_family(op)})" for op, n in sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))]
    return ", ".join(listed[:most]) + (f" and {len(listed) - most} more" if len(listed) > most else "")


def _differences(records: list[Counter[str]], first: Counter[str], start: int, unit: str) -> tuple[int, str]:
    """How many records differ from ``first``, and the first two differences (numbered from ``start``)."""
    differ = [(i, first - rec, rec - first) for i, rec in enumerate(records, start=start) if rec != first]
    shown = []
    for i, missing, extra in differ[:2]:
        parts = ([f"extra {_ops(extra)}"] if extra else []) + ([f"missing {_ops(missing)}"] if missing else [])
        shown.append(f"{unit} {i}: {'; '.join(parts)}")
    more = f" (and {len(differ) - 2} more)" if len(differ) > 2 else ""
    return len(differ), " | ".join(shown) + more


def check_same_records(
    records: list[Counter[str]], want: int | None, where: str, unit: str = "forward", warmup: int = 0
) -> Verdict:
    """The profiler recorded ``want`` windows (forwards, steps); after the first ``warmup`` of them, each
    holds the same ops as the first measured one: nothing missing, nothing extra. The reference is the same
    tool's record of the same model, so a tool's own naming, fusion and decomposition never count against
    it; a model that computes something else on some calls (noise from a later call on, a cache, a branch
    that flips) does. Warm-up windows may differ (an NPU converts weights to its private formats on the
    first call): their differences are said, not failed."""
    name = f"every {unit} records the same ops ({where})"
    if not want:
        return Verdict(name, False, f"run_info.json does not say how many {unit}s ran")
    if len(records) != want:
        return Verdict(
            name,
            False,
            f"{len(records)} {unit}s recorded, want {want}: the profile lost or gained "
            f"{unit}s (was the program marked and profiled whole?)",
        )
    first = records[warmup] if warmup < want else Counter()
    if not sum(first.values()):
        return Verdict(name, False, f"the first measured {unit} recorded no op")
    each = f"{sum(first.values())} ops ({_by_family(first)})"
    which = f"the first measured (after {warmup} warm-up)" if warmup else "the first"
    n, shown = _differences(records[warmup + 1 :], first, warmup + 2, unit)
    if n:
        return Verdict(name, False, f"{n} of {want - warmup - 1} {unit}s differ from {which} ({each}): {shown}")
    w, warm = _differences(records[:warmup], first, 1, unit)
    note = f"; warm-up {unit}s differ (not failed: a first call may do one-off work): {warm}" if w else ""
    return Verdict(name, True, f"{want} {unit}s, each {each} as {which}{note}")


def check_kernel_per_launch(tasks: list[Task], launches: int | None, kernel: str, family: str, where: str) -> Verdict:
    """A one-kernel program: every task is ``kernel`` (of ``family``), exactly once per measured launch."""
    if not launches:
        return Verdict(
            f"op counts per launch ({where})", False, "run_info.json records no measured_launches: re-run it"
        )
    kernels = sum(1 for t in tasks if op_family(t.op_type) == family)
    others = len(tasks) - kernels
    detail = f"{kernels} {kernel} tasks for {launches} measured launches (want 1 each), {others} other tasks"
    return Verdict(f"op counts per launch ({where})", kernels == launches and others == 0, detail)


def check_family_presence(per_forward: dict[str, float], family: str, present: bool, where: str) -> Verdict:
    """``family`` appears (present=True) or does not appear (False) per forward in ``where``."""
    got = per_forward.get(family, 0.0)
    ok = got > 0 if present else got == 0
    return Verdict(
        f"{family} {'present' if present else 'absent'} ({where})",
        ok,
        f"{got:g} {family} tasks per forward (want {'> 0' if present else '0'})",
    )
