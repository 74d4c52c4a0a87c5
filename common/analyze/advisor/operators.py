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
NO_BOUND_SOURCE = (
    "msprof-analyze advisor computation/bound/operator_bound_checker.py (operator_bound_ratio = 0.8 "
    "in config/config.ini; _MIN_TASK_DURATION = 20 us)"
)
# the advisor's ratio names and where each is read: the AI Core's column first, then the vector core's
PIPES = {
    "vec": ("aiv_vec_ratio",),
    "mac": ("aic_mac_ratio",),
    "scalar": ("aic_scalar_ratio", "aiv_scalar_ratio"),
    "mte1": ("aic_mte1_ratio", "aiv_mte1_ratio"),
    "mte2": ("aic_mte2_ratio", "aiv_mte2_ratio"),
    "mte3": ("aic_mte3_ratio", "aiv_mte3_ratio"),
}
TOP = 10


def _advisory(rule: str, advisory, threshold: str, figures: dict, fix: str | None = None) -> Finding:
    return found(
        rule, advisory.text, threshold, figures=figures, header=advisory.header, rows=advisory.rows[:TOP], fix=fix
    )


NO_TASKS = "no task table (kernel_details.csv, op_summary or a profiler database)"


def _wrapped(rule: str, threshold: str, check, nothing: str, figures, fix: str | None = None):
    """A rule of :mod:`common.analyze.advisories` under the advisor's name: ``figures(advisory, tasks)`` its key figures."""

    def run(rank) -> Finding:
        if not rank.tasks:
            return not_run(rule, NO_TASKS, threshold)
        a = check(rank.tasks)
        return (
            clear(rule, nothing, threshold) if a is None else _advisory(rule, a, threshold, figures(a, rank.tasks), fix)
        )

    return run


def _ai_cpu_figures(a, tasks) -> dict:
    chosen = [t for t in tasks if t.task_type == "AI_CPU"]
    return {
        "count": len(chosen),
        "op_types": sorted({t.op_type for t in chosen}),
        "total_us": round(sum(t.duration_us for t in chosen), 3),
    }


ai_cpu = _wrapped(
    "AICPU Issues", advisories.AI_CPU_SOURCE, advisories.ai_cpu_ops, "no AI CPU task of 20 us or more", _ai_cpu_figures
)


def dynamic_shape(rank) -> Finding:
    rule, threshold = "Operator Dynamic Shape Issues", advisories.DYNAMIC_SOURCE
    if not rank.tasks:
        return not_run(rule, NO_TASKS, threshold)
    states = {t.op_state for t in rank.tasks if t.op_state not in (None, "N/A")}
    if not states:
        return not_run(
            rule,
            "the task table records no OP State (Level0, an older export or a database without "
            "opState); msprof-analyze calls such a capture 'all dynamic', the lab does not judge it",
            threshold,
        )
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
    return _advisory(
        rule,
        a,
        f"{a.rule}; msprof-analyze reads the core count from msprof's info.json instead",
        {"tasks": sum(r[2] for r in a.rows), "op_types": [r[0] for r in a.rows]},
    )


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
    threshold = (
        f"no pipe ratio above {BOUND_RATIO:g} and one above zero, a task >= {NO_BOUND_MIN_US:g} us ({NO_BOUND_SOURCE})"
    )
    ratios = [(t, pipe_ratios(t)) for t in rank.tasks or [] if t.task_type != "CPU"]
    if not any(r for _, r in ratios):
        if any(t.pmu for t in rank.tasks or []):
            return not_run(
                rule,
                "the pipe ratios here are the CPU twin's timers (the portable backend), not an AI "
                "Core's: no tiling is judged on them",
                threshold,
            )
        return not_run(
            rule,
            "the task table has no pipe ratios (profile with aic-metrics PipeUtilization, torch_npu Level1 or above)",
            threshold,
        )
    chosen = [(t, r) for t, r in ratios if r and any(r.values()) and max(r.values()) <= BOUND_RATIO]
    if not any(t.duration_us > NO_BOUND_MIN_US for t, _ in chosen):
        return clear(
            rule,
            f"every task with pipe ratios is bound by one (> {BOUND_RATIO:g}) or shorter than {NO_BOUND_MIN_US:g} us",
            threshold,
        )
    total = sum(t.duration_us for t in rank.tasks)
    spent = sum(t.duration_us for t, _ in chosen)
    chosen.sort(key=lambda tr: -tr[0].duration_us)
    types = list(dict.fromkeys(t.op_type for t, _ in chosen))
    rows = [
        [t.op_name, t.op_type, t.task_type, round(t.duration_us, 3), *(round(r[k], 3) for k in PIPES), t.block_dim]
        for t, r in chosen[:TOP]
    ]
    head = ", ".join(types[:5])
    return found(
        rule,
        f"{len(chosen)} task(s) with no bound pipe, {spent:,.3f} us ({spent / total:.2%} of all task "
        f"time); the longest op types: {head}. Neither a unit nor memory limits them: the tiling does",
        threshold,
        remedy="tune them with AOE (a static-shape run); the op's developer: more work per block",
        fix="aoe",
        figures={"count": len(chosen), "total_us": round(spent, 3), "op_types": types[:TOP]},
        header=["Op", "OP Type", "Core", "Duration(us)", *PIPES, "Block Dim"],
        rows=rows,
    )


launch_bound = _wrapped(
    "Timeline Op Schedule (small ops)",
    advisories.LAUNCH_SOURCE,
    advisories.launch_bound,
    "the device is not waiting on many short launches",
    lambda a, _: {"blocks": sum(r[2] for r in a.rows)},
    fix="batch",
)
conversions = _wrapped(
    "Cast / TransData overhead (lab rule)",
    f"Cast + TransData >= {advisories.CONVERSION_SHARE:.0%} of the compute task time (the lab's estimate)",
    advisories.conversions,
    "dtype and layout conversions take little of the compute time",
    lambda a, _: {"tasks": sum(r[2] for r in a.rows)},
)


# rules/en/fusible_operator.yaml: run lengths, the host and MTE thresholds, how often and how long a run must be
FUSIBLE_LENGTHS, HOST_BUSY, MTE_SHARE, FUSIBLE_MIN_COUNT, FUSIBLE_MIN_SHARE = (3, 10), 0.4, 0.8, 5, 0.01
FUSIBLE_COLUMNS = (
    "aic_mte2_time(us)",
    "aiv_mte2_time(us)",
    "aic_fixpipe_time(us)",
    "aiv_mte3_time(us)",
    "aicore_time(us)",
)


def _breaks_run(t: Task) -> bool:
    return t.task_type in ("COMMUNICATION", "HCCL", "AI_CPU") or t.op_name.lower().startswith(("hcom", "lccl", "lcoc"))


def _pmu(t: Task, column: str) -> float:
    return float(t.pmu.get(column) or 0.0)


def fusible_operators(rank) -> Finding:
    """Runs of 3 to 10 consecutive ops (no communication or AI CPU op inside) that repeat more than 5 times and are
    host-bound (their tasks busy < 0.4 of the run's span) or MTE-bound (MTE > 0.8 of their AI Core time)."""
    rule = "Fusible Operator Analysis"
    threshold = (
        f"runs of {FUSIBLE_LENGTHS[0]} to {FUSIBLE_LENGTHS[1]} ops seen more than {FUSIBLE_MIN_COUNT} times, "
        f"host-bound (busy < {HOST_BUSY:g} of their span) or MTE-bound (MTE > {MTE_SHARE:g} of AI Core time), "
        f"over {FUSIBLE_MIN_SHARE:.0%} of the capture or MTE-bound (msprof-analyze advisor schedule/fusible_ops, "
        "rules/en/fusible_operator.yaml)"
    )
    tasks = [t for t in rank.tasks or [] if t.task_type != "CPU"]
    if not tasks and rank.tasks:
        return not_run(
            rule,
            "the tasks ran on the CPU (the portable backend): no AI Core MTE or launch pattern to "
            "judge; the Timeline Op Schedule rule covers the host gaps",
            threshold,
        )
    if not tasks or any(c not in tasks[0].pmu for c in FUSIBLE_COLUMNS):
        return not_run(rule, "the task table has no MTE / fixpipe / AI Core time columns (PipeUtilization)", threshold)
    span = tasks[-1].end_us - tasks[0].start_us
    runs: dict[str, list] = {}
    for i, first in enumerate(tasks):
        if _breaks_run(first):
            continue
        busy = mte = core = 0.0
        key = []
        for j in range(i, min(i + FUSIBLE_LENGTHS[1], len(tasks))):
            t = tasks[j]
            if j > i and _breaks_run(t):
                break
            busy += t.duration_us
            mte += max(_pmu(t, "aic_mte2_time(us)"), _pmu(t, "aiv_mte2_time(us)")) + max(
                _pmu(t, "aic_fixpipe_time(us)"), _pmu(t, "aiv_mte3_time(us)")
            )
            core += _pmu(t, "aicore_time(us)")
            key.append(f"{t.op_name}-{t.input_shapes}-{t.output_shapes}")
            if j - i + 1 < FUSIBLE_LENGTHS[0]:
                continue
            total = t.end_us - first.start_us
            host, bound = total > 0 and busy / total < HOST_BUSY, core > 0 and mte / core > MTE_SHARE
            if host or bound:
                types = " ".join(x.op_type for x in tasks[i : j + 1])
                seen = runs.setdefault("|".join(key), [0, 0.0, 0.0, 0.0, False, False, j - i + 1, types])
                seen[:6] = [seen[0] + 1, seen[1] + total, seen[2] + busy, seen[3] + mte, host, bound]
    chosen = {
        k: v for k, v in runs.items() if v[0] > FUSIBLE_MIN_COUNT and (span and v[1] / span > FUSIBLE_MIN_SHARE or v[5])
    }
    # a run that is the start of a longer chosen run taking at least as long is that run, counted once
    chosen = {
        k: v
        for k, v in chosen.items()
        if not any(o != k and o.startswith(k + "|") and w[1] >= v[1] for o, w in chosen.items())
    }
    if not chosen:
        return clear(rule, "no repeated run of ops is host- or MTE-bound", threshold)
    rows = sorted(
        ([v[6], v[7], v[0], round(v[1], 3), round(v[2], 3), round(v[3], 3), v[5], v[4]] for v in chosen.values()),
        key=lambda r: -r[3],
    )
    top = rows[0]
    share = f"{(top[3] - top[4]) / top[3]:.1%} of its span between its tasks" if top[3] else "no span"
    return found(
        rule,
        f"{len(rows)} repeated run(s) of ops worth fusing (runs may overlap); the longest-running: "
        f"{top[0]} ops ({top[1]}), {top[2]} times, {top[3]:,.1f} us spanned, {top[4]:,.1f} us busy "
        f"({share}; MTE {top[5]:,.1f} us)",
        threshold,
        remedy="a fused operator for the run (or a graph mode that fuses it); fewer host launches",
        figures={"sequences": len(rows), "longest_running": top[1], "occurrences": top[2]},
        header=["Ops", "OP Types", "Occurrences", "Span(us)", "Busy(us)", "MTE(us)", "MTE-bound", "Host-bound"],
        rows=rows[:TOP],
    )


RULES = (ai_cpu, dynamic_shape, block_dim, no_bound, fusible_operators, launch_bound, conversions)
