"""Operator advisories: rules over the task file, each with its threshold, its source and the rows that fired it.

- AI CPU ops: tasks whose Accelerator Core / Task Type is ``AI_CPU`` run on the device's control
  CPU, not the AI Core, usually because the AI Core kernel lacks the dtype. Flagged as
  msprof-analyze's advisor flags them (``advisor/analyzer/computation/aicpu/aicpu_checker.py``):
  when any AI CPU task ran and the longest task is at least ``AI_CPU_MIN_TASK_US``.
- Cast / TransData overhead: dtype and layout conversions that do no arithmetic. Flagged when they
  take at least ``CONVERSION_SHARE`` of the compute task time: the lab's own estimate (no cited
  source); below it they rarely pay back the model change that removes them.
- Dynamic-shape ops: the task file's ``OP State`` column. msprof-analyze's advisor
  (``advisor/analyzer/computation/operator_checker.py`` ``is_dynamic_shape``, used by
  ``op_compile/dynamic_shape_checker.py``; ``OpSummary.get_static_shape_operators`` in
  ``advisor/dataset/profiling/op_summary.py``) calls a profile dynamic when no op is ``static``;
  the lab does the same over the compute tasks and lists the dynamic ones with how many distinct
  Input Shapes each had. Not judged where the column is absent or N/A (Level0, older exports, databases).
- Low block dim: a task on the AI Core whose Block Dim is not a multiple of its cores, so the last
  wave leaves cores idle (msprof-analyze ``advisor/analyzer/computation/bound/block_dim_checker.py``:
  ``block_dim % core_num != 0`` for AI_CORE / AI_VECTOR_CORE / MIX_AIC). The advisor reads the core
  count from msprof's ``info.json`` (``ai_core_num``, ``aiv_num``), which an ASCEND_PROFILER_OUTPUT or
  mindstudio_profiler_output export does not hold; the lab estimates it as the Block Dim most tasks of
  that core kind use (ops tile their work to the core count), from at least
  ``BLOCK_DIM_MIN_TASKS`` tasks. Only tasks of at least ``BLOCK_DIM_MIN_TASK_US`` count.
- Launch-bound: many short launches with free time between them. msprof-analyze
  ``advisor/advisor_backend/timeline_advice/op_schedule_advice.py`` reads the timeline's Overlap
  Analysis: when Free is at least ``LAUNCH_FREE_SHARE`` of the time, a Computing block counts as a
  small op when the Free before it exceeds ``SMALL_OP_FREE_RATIO`` of its own duration, and more than
  ``SMALL_OP_SHARE`` of the blocks small means too many small ops (``common_func_advisor/constant.py``
  ``SMALL_OP_DUR_RATIO = 0.2``, ``SMALL_OP_NUM_RATIO = 0.2``). The lab builds the same blocks from the
  tasks (compute tasks merged where they overlap; Free = the device timeline not covered by any task),
  so the rule also works on msprof and database exports.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass

from common.formats.intervals import gaps, merge
from common.formats.records import Task

AI_CPU_MIN_TASK_US = 20.0  # msprof-analyze advisor AicpuChecker._MIN_TASK_DURATION (µs)
AI_CPU_SOURCE = "msprof-analyze advisor aicpu_checker.py (_MIN_TASK_DURATION = 20 us)"
CONVERSION_TYPES = ("Cast", "TransData")
CONVERSION_SHARE = 0.10  # estimate: the lab's own threshold, not a cited figure
COMMUNICATION_CORES = ("HCCL", "COMMUNICATION")
HEADER = ["OP Type", "Core", "Count", "Total(us)", "Max(us)", "Share(%)", "Dtypes (in -> out)"]

STATIC_STATE, DYNAMIC_STATE = "static", "dynamic"  # OP State values (op_summary / kernel_details)
DYNAMIC_SOURCE = (
    "msprof-analyze advisor operator_checker.py is_dynamic_shape: no op whose op_state is "
    "'static' (dataset/profiling/op_summary.py)"
)
DYNAMIC_HEADER = ["OP Type", "Core", "Count", "Total(us)", "Share(%)", "Input Shapes seen"]

# Which core count a task's Block Dim is judged against: AI_CORE / MIX_AIC count AI Cores (Cube),
# AI_VECTOR_CORE / MIX_AIV count vector cores.
CORE_KINDS = {"AI_CORE": "AIC", "MIX_AIC": "AIC", "AI_VECTOR_CORE": "AIV", "MIX_AIV": "AIV"}
BLOCK_DIM_MIN_TASKS = 10  # estimate: fewer tasks of a core kind say too little about its core count
BLOCK_DIM_MIN_TASK_US = 20.0  # estimate: the advisor's AI CPU floor (_MIN_TASK_DURATION); its block dim check has none
BLOCK_DIM_SOURCE = "msprof-analyze advisor bound/block_dim_checker.py (block_dim % core_num != 0)"
BLOCK_DIM_HEADER = ["OP Type", "Core", "Count", "Total(us)", "Max(us)", "Share(%)", "Block Dim", "Cores (est.)"]

# msprof-analyze advisor_backend timeline_advice/op_schedule_advice.py (free ratio >= 0.2) and
# common_func_advisor/constant.py (SMALL_OP_DUR_RATIO, SMALL_OP_NUM_RATIO).
LAUNCH_FREE_SHARE = 0.2
SMALL_OP_FREE_RATIO = 0.2
SMALL_OP_SHARE = 0.2
LAUNCH_SOURCE = (
    "msprof-analyze advisor_backend op_schedule_advice.py (free >= 0.2 of the time) and "
    "constant.py (SMALL_OP_DUR_RATIO = 0.2, SMALL_OP_NUM_RATIO = 0.2)"
)
LAUNCH_HEADER = ["OP Type", "Core", "Launches", "Busy(us)", "Free before(us)", "Max free(us)"]


@dataclass(frozen=True)
class Advisory:
    name: str
    rule: str  # the threshold and where it comes from
    text: str
    rows: list[list[object]]  # per OP Type of the tasks that fired it
    header: list[str] = dataclasses.field(default_factory=lambda: list(HEADER))


def _compute(tasks: list[Task]) -> list[Task]:
    return [t for t in tasks if (t.task_type or "") not in COMMUNICATION_CORES]


def _by_op(chosen: list[Task]) -> list[tuple[str, str, list[Task], float]]:
    """(OP Type, core, its tasks, their total µs) per OP Type and core, the largest total first."""
    per: dict[tuple[str, str], list[Task]] = {}
    for t in chosen:
        per.setdefault((t.op_type, t.task_type or ""), []).append(t)
    groups = [(op, core, ts, sum(t.duration_us for t in ts)) for (op, core), ts in per.items()]
    return sorted(groups, key=lambda g: -g[3])


def _share(spent: float, total_us: float) -> float:
    return round(100 * spent / total_us, 2) if total_us else 0.0


def _rows(chosen: list[Task], total_us: float) -> list[list[object]]:
    rows = []
    for op, core, ts, spent in _by_op(chosen):
        dtypes = sorted({f"{t.input_dtypes or 'N/A'} -> {t.output_dtypes or 'N/A'}" for t in ts})
        rows.append(
            [
                op,
                core,
                len(ts),
                round(spent, 3),
                max(t.duration_us for t in ts),
                _share(spent, total_us),
                "; ".join(dtypes),
            ]
        )
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


def dynamic_shapes(tasks: list[Task]) -> Advisory | None:
    """Every compute task dynamic-shape (OP State), none static: the advisor's rule; None when not recorded."""
    compute = _compute(tasks)
    states = Counter(t.op_state for t in compute)
    if states[STATIC_STATE] or not states[DYNAMIC_STATE]:
        return None
    dynamic = [t for t in compute if t.op_state == DYNAMIC_STATE]
    total = sum(t.duration_us for t in compute)
    spent = sum(t.duration_us for t in dynamic)
    rows = [
        [op, core, len(ts), round(spent_op, 3), _share(spent_op, total), len({t.input_shapes for t in ts})]
        for op, core, ts, spent_op in _by_op(dynamic)
    ]
    varying = sum(1 for r in rows if r[5] > 1)
    return Advisory(
        "dynamic-shape ops",
        f"no compute task with OP State '{STATIC_STATE}' ({DYNAMIC_SOURCE})",
        f"all {len(dynamic)} compute tasks ({len(rows)} OP Types, {spent:,.2f} us) ran as dynamic-shape kernels; "
        f"{varying} OP Type(s) saw more than one input shape. A dynamic-shape kernel computes its tiling on "
        "the host at every launch. Try: fixed shapes (pad batches to a few sizes), and "
        "torch_npu.npu.set_compile_mode(jit_compile=False) as msprof-analyze advises",
        rows,
        DYNAMIC_HEADER,
    )


def _core_counts(compute: list[Task]) -> dict[str, int]:
    """Per core kind, the Block Dim most tasks use (the estimated core count), from enough tasks."""
    dims: dict[str, Counter[int]] = {}
    for t in compute:
        kind = CORE_KINDS.get(t.task_type or "")
        if kind and t.block_dim:
            dims.setdefault(kind, Counter())[t.block_dim] += 1
    return {kind: c.most_common(1)[0][0] for kind, c in dims.items() if sum(c.values()) >= BLOCK_DIM_MIN_TASKS}


def low_block_dim(tasks: list[Task]) -> Advisory | None:
    """AI Core tasks >= BLOCK_DIM_MIN_TASK_US whose Block Dim is not a multiple of the (estimated) core count."""
    compute = _compute(tasks)
    cores = _core_counts(compute)
    chosen = [
        t
        for t in compute
        if t.duration_us >= BLOCK_DIM_MIN_TASK_US
        and t.block_dim
        and CORE_KINDS.get(t.task_type or "") in cores
        and t.block_dim % cores[CORE_KINDS[t.task_type]]
    ]
    if not chosen:
        return None
    total = sum(t.duration_us for t in compute)
    spent = sum(t.duration_us for t in chosen)
    rows = [
        [
            op,
            core,
            len(ts),
            round(spent_op, 3),
            max(t.duration_us for t in ts),
            _share(spent_op, total),
            ", ".join(str(d) for d in sorted({t.block_dim for t in ts})),
            cores[CORE_KINDS[core]],
        ]
        for op, core, ts, spent_op in _by_op(chosen)
    ]
    counted = ", ".join(f"{kind} {n}" for kind, n in sorted(cores.items()))
    return Advisory(
        "low block dim",
        f"a task >= {BLOCK_DIM_MIN_TASK_US:g} us whose Block Dim is not a multiple of its core count ({BLOCK_DIM_SOURCE}); "
        f"core count estimated as the Block Dim most tasks use ({counted}; at least {BLOCK_DIM_MIN_TASKS} tasks)",
        f"{len(chosen)} task(s), {spent:,.2f} us ({100 * spent / total:.1f}% of the compute task time), ran on a "
        "number of blocks that is not a multiple of the cores: the last wave leaves cores idle, and an op with "
        "fewer blocks than cores never uses them all. Try: a shape whose tiling fills the cores, or a fused op "
        "that does more work per launch",
        rows,
        BLOCK_DIM_HEADER,
    )


def launch_bound(tasks: list[Task]) -> Advisory | None:
    """Free >= LAUNCH_FREE_SHARE of the device timeline and > SMALL_OP_SHARE of the compute blocks small."""
    compute = _compute(tasks)
    if not compute:
        return None
    busy = merge([(t.start_us, t.end_us) for t in tasks])
    start, end = busy[0][0], busy[-1][1]
    free_before = {b: b - a for a, b in gaps(busy, start, end)}  # a free gap, keyed by where work resumes
    span, free = end - start, sum(free_before.values())
    if not span or free < LAUNCH_FREE_SHARE * span:
        return None
    first = {}
    for t in sorted(compute, key=lambda t: t.start_us):
        first.setdefault(t.start_us, t)
    blocks = merge([(t.start_us, t.end_us) for t in compute])
    small = [
        (s, e, free_before.get(s, 0.0)) for s, e in blocks if free_before.get(s, 0.0) > SMALL_OP_FREE_RATIO * (e - s)
    ]
    if len(small) <= SMALL_OP_SHARE * len(blocks):
        return None
    per: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for s, e, gap in small:
        t = first[s]
        per.setdefault((t.op_type, t.task_type or ""), []).append((e - s, gap))
    rows = [
        [op, core, len(v), round(sum(d for d, _ in v), 3), round(sum(g for _, g in v), 3), max(g for _, g in v)]
        for (op, core), v in sorted(per.items(), key=lambda kv: -sum(g for _, g in kv[1]))
    ]
    return Advisory(
        "launch-bound: short ops with free time between them",
        f"Free >= {LAUNCH_FREE_SHARE:.0%} of the device timeline and more than {SMALL_OP_SHARE:.0%} of the compute "
        f"blocks preceded by Free > {SMALL_OP_FREE_RATIO:g} x their own duration ({LAUNCH_SOURCE})",
        f"the device was free {free:,.2f} us of {span:,.2f} us ({100 * free / span:.1f}%); {len(small)} of "
        f"{len(blocks)} compute blocks ({100 * len(small) / len(blocks):.0f}%) waited longer for their launch than "
        f"{SMALL_OP_FREE_RATIO:g} x the time they ran: the host does not launch work as fast as the device finishes it. "
        "Try: a larger batch, fewer and fused ops, fewer host syncs (.item(), .cpu(), prints) in the step",
        rows,
        LAUNCH_HEADER,
    )


RULES = (ai_cpu_ops, conversions, dynamic_shapes, low_block_dim, launch_bound)


def advisories(tasks: list[Task]) -> list[Advisory]:
    """Every rule that fires on ``tasks``."""
    return [a for a in (rule(tasks) for rule in RULES) if a is not None]
