"""Operator advisories: rules over the task file, each with its threshold, its source and the rows that fired it.

- AI CPU ops: tasks whose Accelerator Core / Task Type is ``AI_CPU`` run on the device's control
  CPU, not the AI Core, usually because the AI Core kernel lacks the dtype. Flagged as
  msprof-analyze's advisor flags them (``advisor/analyzer/computation/aicpu/aicpu_checker.py``):
  when any AI CPU task ran and the longest task is at least ``AI_CPU_MIN_TASK_US``.
- Cast / TransData overhead: dtype and layout conversions that do no arithmetic. Flagged when they
  take at least ``CONVERSION_SHARE`` of the compute task time: the lab's own estimate (no cited
  source); below it they rarely pay back the model change that removes them.
"""

from __future__ import annotations

from dataclasses import dataclass

from common.formats.records import Task

AI_CPU_MIN_TASK_US = 20.0  # msprof-analyze advisor AicpuChecker._MIN_TASK_DURATION (µs)
AI_CPU_SOURCE = "msprof-analyze advisor aicpu_checker.py (_MIN_TASK_DURATION = 20 us)"
CONVERSION_TYPES = ("Cast", "TransData")
CONVERSION_SHARE = 0.10  # estimate: the lab's own threshold, not a cited figure
COMMUNICATION_CORES = ("HCCL", "COMMUNICATION")
HEADER = ["OP Type", "Core", "Count", "Total(us)", "Max(us)", "Share(%)", "Dtypes (in -> out)"]


@dataclass(frozen=True)
class Advisory:
    name: str
    rule: str  # the threshold and where it comes from
    text: str
    rows: list[list[object]]  # per OP Type of the tasks that fired it (HEADER)


def _compute(tasks: list[Task]) -> list[Task]:
    return [t for t in tasks if (t.task_type or "") not in COMMUNICATION_CORES]


def _rows(chosen: list[Task], total_us: float) -> list[list[object]]:
    per: dict[tuple[str, str], list[Task]] = {}
    for t in chosen:
        per.setdefault((t.op_type, t.task_type or ""), []).append(t)
    rows = []
    for (op, core), ts in sorted(per.items(), key=lambda kv: -sum(t.duration_us for t in kv[1])):
        spent = sum(t.duration_us for t in ts)
        dtypes = sorted({f"{t.input_dtypes or 'N/A'} -> {t.output_dtypes or 'N/A'}" for t in ts})
        rows.append([op, core, len(ts), round(spent, 3), max(t.duration_us for t in ts),
                     round(100 * spent / total_us, 2) if total_us else 0.0, "; ".join(dtypes)])
    return rows


def ai_cpu_ops(tasks: list[Task]) -> Advisory | None:
    """The AI CPU tasks, when any ran and the longest is at least AI_CPU_MIN_TASK_US."""
    compute = _compute(tasks)
    ai_cpu = [t for t in compute if t.task_type == "AI_CPU"]
    if not ai_cpu or max(t.duration_us for t in ai_cpu) < AI_CPU_MIN_TASK_US:
        return None
    total = sum(t.duration_us for t in compute)
    spent = sum(t.duration_us for t in ai_cpu)
    longest = max(ai_cpu, key=lambda t: t.duration_us)
    return Advisory(
        "ops on the AI CPU",
        f"any AI_CPU task, the longest >= {AI_CPU_MIN_TASK_US:g} us ({AI_CPU_SOURCE})",
        f"{len(ai_cpu)} task(s) ran on the AI CPU: {spent:,.2f} us, {100 * spent / total:.1f}% of the compute task "
        f"time; the longest, {longest.op_name} ({longest.op_type}), {longest.duration_us:,.2f} us. The AI CPU is "
        "the device's control CPU, far slower than the AI Core; an op lands there when no AI Core kernel takes its "
        "dtype or shape. Try: the same op in a dtype the AI Core supports (msprof-analyze's aicpu_rules.yaml lists "
        "them per op), or an equivalent op",
        _rows(ai_cpu, total),
    )


def conversions(tasks: list[Task]) -> Advisory | None:
    """Cast / TransData, when they take at least CONVERSION_SHARE of the compute task time."""
    compute = _compute(tasks)
    chosen = [t for t in compute if t.op_type in CONVERSION_TYPES]
    total = sum(t.duration_us for t in compute)
    spent = sum(t.duration_us for t in chosen)
    if not chosen or not total or spent < CONVERSION_SHARE * total:
        return None
    return Advisory(
        "Cast / TransData overhead",
        f"Cast + TransData >= {CONVERSION_SHARE:.0%} of the compute task time (estimate: the lab's threshold)",
        f"{len(chosen)} Cast / TransData task(s): {spent:,.2f} us, {100 * spent / total:.1f}% of the compute task "
        "time, converting dtypes or layouts without arithmetic. Try: one dtype end to end (no float32 <-> float16 "
        "round trips), inputs already in the layout the next op wants (TransData converts ND <-> NC1HWC0 / "
        "FRACTAL_NZ for the Cube)",
        _rows(chosen, total),
    )


RULES = (ai_cpu_ops, conversions)


def advisories(tasks: list[Task]) -> list[Advisory]:
    """Every rule that fires on ``tasks``."""
    return [a for a in (rule(tasks) for rule in RULES) if a is not None]
