"""The task-table rules: AI CPU ops, dynamic shape, block dim, ops with no bound pipe, launch-bound
small ops and the lab's own Cast / TransData rule.

AI CPU, dynamic shape, block dim, launch-bound and Cast / TransData are judged by
:mod:`common.analyze.advisories` (the report's advisories, the same thresholds); here they get the
advisor's category names and its key figures (the advisor counts AI CPU *tasks*, and an export without
an OP State column is "all dynamic" to it). The no-bound rule follows ``computation/bound/
operator_bound_checker.py``: a task with at least one pipe ratio above zero and none above 0.8.
"""

from __future__ import annotations

from common.analyze import advisories
from common.analyze.advisor import Finding, clear, found, not_run
from common.formats.records import Task

BOUND_RATIO = 0.8  # msprof-analyze advisor config.ini operator_bound_ratio
NO_BOUND_MIN_US = 20.0  # OperatorBoundChecker._MIN_TASK_DURATION
NO_BOUND_SOURCE = ("msprof-analyze advisor computation/bound/operator_bound_checker.py (operator_bound_ratio = 0.8 "
                   "in config/config.ini; _MIN_TASK_DURATION = 20 us)")
# the advisor's ratio names and where each is read: the AI Core's column first, then the vector core's
PIPES = {"vec": ("aiv_vec_ratio",), "mac": ("aic_mac_ratio",), "scalar": ("aic_scalar_ratio", "aiv_scalar_ratio"),
         "mte1": ("aic_mte1_ratio", "aiv_mte1_ratio"), "mte2": ("aic_mte2_ratio", "aiv_mte2_ratio"),
         "mte3": ("aic_mte3_ratio", "aiv_mte3_ratio")}
TOP = 10


def _advisory(rule: str, advisory, threshold: str, figures: dict, fix: str | None = None) -> Finding:
    return found(rule, advisory.text, threshold, figures=figures, header=advisory.header, rows=advisory.rows[:TOP],
                 fix=fix)


NO_TASKS = "no task table (kernel_details.csv, op_summary or a profiler database)"


def _wrapped(rule: str, threshold: str, check, nothing: str, figures, fix: str | None = None):
    """A rule of :mod:`common.analyze.advisories` under the advisor's name: ``figures(advisory, tasks)`` its key figures."""

    def run(rank) -> Finding:
        if not rank.tasks:
            return not_run(rule, NO_TASKS, threshold)
        a = check(rank.tasks)
        return clear(rule, nothing, threshold) if a is None else _advisory(rule, a, threshold, figures(a, rank.tasks), fix)

    return run


def _ai_cpu_figures(a, tasks) -> dict:
    chosen = [t for t in tasks if t.task_type == "AI_CPU"]
    return {"count": len(chosen), "op_types": sorted({t.op_type for t in chosen}),
            "total_us": round(sum(t.duration_us for t in chosen), 3)}


ai_cpu = _wrapped("AICPU Issues", advisories.AI_CPU_SOURCE, advisories.ai_cpu_ops, "no AI CPU task of 20 us or more",
                  _ai_cpu_figures)


def dynamic_shape(rank) -> Finding:
    rule, threshold = "Operator Dynamic Shape Issues", advisories.DYNAMIC_SOURCE
    if not rank.tasks:
        return not_run(rule, NO_TASKS, threshold)
    states = {t.op_state for t in rank.tasks if t.op_state not in (None, "N/A")}
    if not states:
        return not_run(rule, "the task table records no OP State (Level0, an older export or a database without "
                             "opState); msprof-analyze calls such a capture 'all dynamic', the lab does not judge it",
                       threshold)
    a = advisories.dynamic_shapes(rank.tasks)
    if a is None:
        return clear(rule, "static-shape ops ran", threshold)
    return _advisory(rule, a, threshold, {"all_dynamic": True, "op_types": len(a.rows)}, fix="binary-operators")


def block_dim(rank) -> Finding:
    rule, threshold = "Block Dim Issues", advisories.BLOCK_DIM_SOURCE
    if not rank.tasks or all(t.block_dim is None for t in rank.tasks):
        return not_run(rule, "the task table has no Block Dim", threshold)
    a = advisories.low_block_dim(rank.tasks)
    if a is None:
        return clear(rule, "every AI Core task of 20 us or more fills whole waves of cores", threshold)
    return _advisory(rule, a, f"{a.rule}; msprof-analyze reads the core count from msprof's info.json instead",
                     {"tasks": sum(r[2] for r in a.rows), "op_types": [r[0] for r in a.rows]})


def pipe_ratios(task: Task) -> dict[str, float] | None:
    """The advisor's six pipe ratios of a task (a missing value is 0); None without PMU columns."""
    if not task.pmu:
        return None
    out = {}
    for name, columns in PIPES.items():
        column = next((c for c in columns if c in task.pmu), None)
        out[name] = float(task.pmu.get(column) or 0.0) if column else 0.0
    return out


def no_bound(rank) -> Finding:
    rule = "Operator No Bound Issues"
    threshold = f"no pipe ratio above {BOUND_RATIO:g} and one above zero, a task >= {NO_BOUND_MIN_US:g} us ({NO_BOUND_SOURCE})"
    ratios = [(t, pipe_ratios(t)) for t in rank.tasks or []]
    if not any(r for _, r in ratios):
        return not_run(rule, "the task table has no pipe ratios (profile with aic-metrics PipeUtilization, torch_npu "
                             "Level1 or above)", threshold)
    chosen = [(t, r) for t, r in ratios if r and any(r.values()) and max(r.values()) <= BOUND_RATIO]
    if not any(t.duration_us > NO_BOUND_MIN_US for t, _ in chosen):
        return clear(rule, f"every task with pipe ratios is bound by one (> {BOUND_RATIO:g}) or shorter than "
                           f"{NO_BOUND_MIN_US:g} us", threshold)
    total = sum(t.duration_us for t in rank.tasks)
    spent = sum(t.duration_us for t, _ in chosen)
    chosen.sort(key=lambda tr: -tr[0].duration_us)
    types = list(dict.fromkeys(t.op_type for t, _ in chosen))
    rows = [[t.op_name, t.op_type, t.task_type, round(t.duration_us, 3), *(round(r[k], 3) for k in PIPES), t.block_dim]
            for t, r in chosen[:TOP]]
    head = ", ".join(types[:5])
    return found(rule, f"{len(chosen)} task(s) with no bound pipe, {spent:,.3f} us ({spent / total:.2%} of all task "
                       f"time); the longest op types: {head}. Neither a unit nor memory limits them: the tiling does",
                 threshold, remedy="tune them with AOE (a static-shape run); the op's developer: more work per block",
                 fix="aoe", figures={"count": len(chosen), "total_us": round(spent, 3), "op_types": types[:TOP]},
                 header=["Op", "OP Type", "Core", "Duration(us)", *PIPES, "Block Dim"], rows=rows)


launch_bound = _wrapped("Timeline Op Schedule (small ops)", advisories.LAUNCH_SOURCE, advisories.launch_bound,
                        "the device is not waiting on many short launches",
                        lambda a, _: {"blocks": sum(r[2] for r in a.rows)}, fix="batch")
conversions = _wrapped("Cast / TransData overhead (lab rule)",
                       f"Cast + TransData >= {advisories.CONVERSION_SHARE:.0%} of the compute task time (the lab's estimate)",
                       advisories.conversions, "dtype and layout conversions take little of the compute time",
                       lambda a, _: {"tasks": sum(r[2] for r in a.rows)})


RULES = (ai_cpu, dynamic_shape, block_dim, no_bound, launch_bound, conversions)
