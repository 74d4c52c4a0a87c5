"""Every check the lab makes: the functions that return a :class:`~common.verdict.Verdict`.

A verdict names what was compared, prints the numbers and says whether it held; a failing
verdict fails the run that made it. A check with nothing to compare with (a lesson check whose
expectation the workload does not declare) is "not applicable": shown as [N/A], never a failure.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter

from common.analyze.families import op_family
from common.errors import LabError
from common.formats.datasets import FileRows
from common.formats.export_facts import ExportFacts
from common.formats.engine import np
from common.formats.outputs import SavedOutput
from common.formats.records import OpStat, StepTime, Task
from common.formats.writers import aggregate_op_statistic
from common.verdict import Verdict, not_applicable
from common.workload import Expected, compare_outputs


def tasks_in(tasks: list[Task], windows: list[tuple[float, float]]) -> list[list[Task]]:
    """The tasks that start inside each window (start, end µs), one list per window."""
    ordered = sorted(tasks, key=lambda t: t.start_us)
    starts = [t.start_us for t in ordered]
    return [ordered[bisect_left(starts, lo) : bisect_left(starts, hi)] for lo, hi in windows]


def measured_forward_groups(tasks: list[Task], windows: list[tuple[float, float]], warmup: int) -> list[list[Task]]:
    """The tasks of each measured forward (the windows after the ``warmup`` first), one list per forward."""
    return tasks_in(tasks, windows[warmup:]) if len(windows) > warmup else []


def measured_forward_stats(tasks: list[Task], windows: list[tuple[float, float]], warmup: int) -> list[OpStat] | None:
    """op_statistic of the tasks inside the measured forwards' ranges (the windows after the ``warmup`` first):
    the forward time of a run that marks its forwards, without set-up and warm-up; None when it marked none."""
    if len(windows) <= warmup:
        return None
    return aggregate_op_statistic([t for inside in tasks_in(tasks, windows[warmup:]) for t in inside])


def records_in(tasks: list[Task], windows: list[tuple[float, float]]) -> list[Counter[str]]:
    """The op types of the tasks that start inside each window (start, end µs), one multiset per window."""
    return [Counter(t.op_type for t in inside) for inside in tasks_in(tasks, windows)]


def records_by_step(tasks: list[Task]) -> list[Counter[str]]:
    """The op types of each recorded step (tasks with a Step Id), in step order."""
    return [Counter(t.op_type for t in group) for group in tasks_by_step(tasks)]


def tasks_by_step(tasks: list[Task]) -> list[list[Task]]:
    """The tasks of each recorded step (those with a Step Id), in step order: one group per step."""
    steps: dict[int, list[Task]] = {}
    for t in tasks:
        if t.step_id is not None:
            steps.setdefault(t.step_id, []).append(t)
    return [steps[k] for k in sorted(steps)]


def tasks_by_execute(tasks: list[Task], executes: int | None) -> list[list[Task]] | None:
    """A graph run ``executes`` times, its tasks in start order cut into equal consecutive executes (every
    execute of one graph runs the same tasks); None when the count does not divide evenly."""
    if not executes or not tasks or len(tasks) % executes:
        return None
    ordered, size = sorted(tasks, key=lambda t: t.start_us), len(tasks) // executes
    return [ordered[i : i + size] for i in range(0, len(ordered), size)]


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


def check_output(metrics: dict[str, float] | None, where: str, max_abs_tol: float, cosine_min: float) -> Verdict:
    """The model's output matches the reference within the given tolerances (None: nothing recorded)."""
    if not metrics:
        return Verdict(f"output matches fp32 reference ({where})", False, "run_info.json has no accuracy")
    measured = (
        f"max abs diff {metrics['max_abs_diff']:.3g} (tol {max_abs_tol:g}), mean abs diff "
        f"{metrics['mean_abs_diff']:.3g}, cosine {metrics['cosine']:.6f} (min {cosine_min})"
    )
    ok = metrics["max_abs_diff"] <= max_abs_tol and metrics["cosine"] >= cosine_min
    if not ok and metrics.get("fp16_range"):  # a lab-made fp16 variant cannot hold this output: its limit, not an error
        return not_applicable(
            f"output matches fp32 reference ({where})",
            f"not applicable: {metrics['fp16_range']}, so this fp16 variant cannot represent the "
            f"output (the fp32 variant checks it); measured: {measured}",
        )
    return Verdict(f"output matches fp32 reference ({where})", ok, measured)


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


def check_program_verified(info: dict, how: str, where: str) -> Verdict:
    """A program that verifies its own output finished and said so (run_info: completed, exit code 0)."""
    ok = bool(info.get("completed")) and info.get("exit_code") == 0
    return Verdict(
        f"output verified ({where})",
        ok,
        f"{how}; run_info: completed={info.get('completed')}, exit_code={info.get('exit_code')}",
    )


def check_family_presence(per_forward: dict[str, float], family: str, present: bool, where: str) -> Verdict:
    """``family`` appears (present=True) or does not appear (False) per forward in ``where``."""
    got = per_forward.get(family, 0.0)
    ok = got > 0 if present else got == 0
    return Verdict(
        f"{family} {'present' if present else 'absent'} ({where})",
        ok,
        f"{got:g} {family} tasks per forward (want {'> 0' if present else '0'})",
    )


# --- over a whole output folder ---------------------------------------------------------------
# The output tolerance, one rule for every mode and for agree: max |output - reference| within a share
# of the reference's largest value (its scale), plus a floor for outputs near zero.
# Portable backend: the mode runs the same CPU kernels on the same thread count as the reference, so
# the outputs match bit for bit; 1e-5 of the scale still fails a model whose output drifts by 2e-4.
# NPU (estimates, not measured here): fp32 MatMuls differ from the CPU by accumulation order (~1e-6),
# but torch_npu runs fp32 convolutions in HF32 by default (torch.npu.conv.allow_hf32), ~1e-3 relative;
# fp16 keeps 11 significant bits (~1e-3 per op, growing with depth), bf16 8 bits.
OUTPUT_RTOL = {("portable", None): 1e-5, ("npu", "fp32"): 2e-3, ("npu", "fp16"): 2e-2, ("npu", "bf16"): 6e-2}
OUTPUT_ATOL = 1e-6
COSINE_MIN = {"portable": 0.99999, "npu": 0.999}


def check_files(found: list[FileRows], where: str) -> Verdict:
    """Every named file exists in every dataset, parses with its columns, and has rows (per file: the
    rows of each dataset, in order, ``/`` apart). ``found``: common.formats.datasets.file_rows' answer."""
    problems, seen = [], {}
    for f in found:
        if f.first is None:
            problems.append(f"{f.dataset}: no {f.name} file")
        elif f.error is not None:
            problems.append(f.error)
        else:
            if f.rows == 0:
                problems.append(f"{f.first}: no rows")
            seen.setdefault(f.name, []).append(f.rows)
    detail = (
        "; ".join(problems)
        if problems
        else ", ".join(
            f"{name} {'/'.join(map(str, rows))} row{'' if rows == [1] else 's'}" for name, rows in seen.items()
        )
    )
    return Verdict(f"files present with expected columns ({where})", not problems, detail)


def output_tolerance(expected: Expected, npu: bool = False) -> tuple[float, float, str]:
    """(max abs diff allowed, minimum cosine, the rule in words) for the workload's outputs (OUTPUT_RTOL)."""
    scale = max((float(np.abs(a).max()) for a in expected.outputs if a.size), default=0.0)
    key = ("npu", expected.precision) if npu else ("portable", None)
    rtol = OUTPUT_RTOL[key]
    where = "npu, " + expected.precision if npu else "portable"
    rule = f"{rtol:g} x max|reference| {scale:.3g} + {OUTPUT_ATOL:g} ({where})"
    return rtol * scale + OUTPUT_ATOL, COSINE_MIN["npu" if npu else "portable"], rule


def check_output_file(saved: SavedOutput, where: str, expected: Expected, npu: bool = False) -> Verdict:
    """The saved model output (common.formats.outputs.read_output) matches the workload's reference (one rule:
    output_tolerance); a missing file fails."""
    name = f"output matches {expected.precision} reference ({where})"
    if saved is None or saved.arrays is None:
        return Verdict(name, False, f"{saved.path if saved else 'output.npy'} was not written")
    try:
        metrics = compare_outputs(saved.arrays, expected.outputs)
    except LabError as err:  # a different shape or number of outputs: a wrong output, not a bad input
        return Verdict(name, False, str(err))
    tol, cosine_min, rule = output_tolerance(expected, npu)
    v = check_output(metrics, where, tol, cosine_min)
    return Verdict(name, v.ok, f"{v.detail}; tol = {rule}{expected.precision_pointer()}")


# The same training steps from the same weights, with and without the profiler, on one device: the
# profiler must not change what is computed. CPU runs agree bit for bit; the margin is for devices
# whose reductions are not deterministic (atomic accumulation in some backward kernels).
LOSS_RTOL = 1e-4


def check_training_losses(profiled: list[float], plain: list[float], where: str) -> Verdict:
    """Each step's loss under the profiler equals the same step's loss without it (fresh model, same seed)."""
    name = f"training losses match an unprofiled run ({where})"
    if not profiled or len(profiled) != len(plain):
        return Verdict(name, False, f"{len(profiled)} profiled vs {len(plain)} unprofiled losses")
    worst = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(profiled, plain))
    return Verdict(
        name,
        worst <= LOSS_RTOL,
        f"{len(plain)} steps, loss {plain[0]:.6g} -> {plain[-1]:.6g}; largest relative difference "
        f"{worst:.2e} (tolerance {LOSS_RTOL:g})",
    )


# --- integrity: the files of one export agree with each other -------------------------------------
# A profiler derives op_statistic from the task file, step_trace_time from the timeline's Overlap
# Analysis, and its text export from the same data as its database. A disagreement beyond rounding
# means a file was edited, cut short, or comes from another export.

# Both files print µs with 3 decimals: each task-file row is rounded by up to 0.0005 µs, the total
# once more; 0.001 µs per task covers the sum of the rounded rows. msprof prints op_statistic totals
# with 2 decimals, hence the 0.01 µs floor.
ROUNDING_US_PER_TASK = 0.001
ROUNDING_US_FLOOR = 0.01
# op_statistic counts compute tasks only: torch_npu leaves its HCCL rows out, msprof may list them
# under Core Type COMMUNICATION. A communication row missing from op_statistic is by design.
COMMUNICATION_CORES = ("HCCL", "COMMUNICATION")
# step tables: every value is a sum of µs durations printed with 3 decimals (trace events, or ns
# divided by 1000); 0.05 µs, or a millionth of the step for long ones, is rounding, anything more is not.
STEP_TABLE_ABS_US = 0.05
STEP_TABLE_REL = 1e-6
# Across exports the rounding is per timeline event, not per step: the text export's step_trace_time
# sums the timeline's events, each printed in µs with 3 decimals from its own rounded start and end
# (torch_npu's convert_ns2us_*), while the database holds ns integers. On the msinsight Level1 text
# export 47 of the 187 Computing events differ from their task's own Duration(us) by 0.001 µs (53.742
# vs 53.741), so a column summed over N events may be off by up to N x 0.001 µs: 0.19 µs for that
# step's 187 Computing events, more than a millionth of the 136 ms step (0.14 µs). The task count of a
# step bounds its events.
EXPORT_ROUNDING_US_PER_EVENT = 0.001
STEP_FIELDS = {
    "Computing": "computing_us",
    "Communication(Not Overlapped)": "communication_not_overlapped_us",
    "Communication": "communication_us",
    "Free": "free_us",
}


def _task_tolerance(count: int) -> float:
    return ROUNDING_US_FLOOR + ROUNDING_US_PER_TASK * count


def check_op_statistic(facts: ExportFacts) -> Verdict | None:
    """op_statistic agrees with the task file, per (OP Type, Core Type): same count, same total time.

    None when there is nothing to compare: a database (its op_statistic is built from its tasks)
    or a text export without op_statistic (Level0) or without a task file.
    """
    if facts.stat_file is None:
        return None
    stat_file, task_file = facts.stat_file, facts.task_file
    name = f"op_statistic agrees with {facts.task_kind} ({facts.where})"
    stats = facts.op_statistic
    totals = facts.task_totals
    by_device = all(s.device_id for s in stats) and totals["device_id"].null_count() == 0
    theirs: dict[tuple, tuple[int, float]] = {}
    for s in stats:
        key = (s.device_id if by_device else None, s.op_type, s.core_type)
        count, total = theirs.get(key, (0, 0.0))
        theirs[key] = (count + s.count, total + s.total_us)
    ours: dict[tuple, tuple[int, float]] = {}
    for device, op_type, core, count, total in totals.select(
        "device_id", "op_type", "task_type", "count", "total_us"
    ).iter_rows():
        key = (device if by_device else None, op_type, core)
        c, t = ours.get(key, (0, 0.0))
        ours[key] = (c + int(count), t + float(total))

    def label(key: tuple) -> str:
        device, op_type, core = key
        return f"{op_type} ({core}{f', device {device}' if device is not None else ''})"

    problems, by_design = [], []
    for key in sorted(set(ours) | set(theirs), key=lambda k: tuple(str(x) for x in k)):
        mine, stat = ours.get(key), theirs.get(key)
        if stat is None:
            if key[2] in COMMUNICATION_CORES:
                by_design.append(f"{label(key)} {mine[0]} tasks")
                continue
            problems.append(f"{label(key)}: {stat_file} has no row, {task_file} has {mine[0]} tasks, {mine[1]:,.3f} us")
        elif mine is None:
            problems.append(f"{label(key)}: {stat_file} has {stat[0]} tasks, {stat[1]:,.3f} us; {task_file} has none")
        elif mine[0] != stat[0] or abs(mine[1] - stat[1]) > _task_tolerance(mine[0]):
            problems.append(
                f"{label(key)}: {stat_file} {stat[0]} tasks, {stat[1]:,.3f} us; "
                f"{task_file} {mine[0]} tasks, {mine[1]:,.3f} us"
            )
    if problems:
        shown = "; ".join(problems[:5]) + (f"; ... {len(problems) - 5} more" if len(problems) > 5 else "")
        return Verdict(name, False, f"{len(problems)} OP Type(s) disagree: {shown}")
    compared = [ours[k] for k in theirs]
    detail = (
        f"{len(theirs)} OP Types, {sum(c for c, _ in compared):,} tasks, {sum(t for _, t in compared):,.3f} us: "
        f"count equal and total within {ROUNDING_US_FLOOR:g} us + {ROUNDING_US_PER_TASK:g} us per task "
        f"(rounding) in {stat_file} and {task_file}"
    )
    if by_design:
        detail += f"; communication, not in op_statistic by design: {', '.join(by_design)}"
    return Verdict(name, True, detail)


def _step_key_rows(rows: list[StepTime]) -> dict[tuple, StepTime]:
    steps = [s.step for s in rows]
    with_device = len(set(steps)) != len(steps)
    return {((s.device_id if with_device else None), s.step): s for s in rows}


def compare_step_tables(
    mine: list[StepTime],
    other: list[StepTime],
    name: str,
    mine_src: str,
    other_src: str,
    events: dict[int | None, int] | None = None,
) -> Verdict:
    """Two step tables of one capture: the same steps, Computing / Communication / Free within rounding.

    ``events`` (exports compared with each other): the number of timeline events per step, each of
    which may carry EXPORT_ROUNDING_US_PER_EVENT of rounding (None: a step not listed gets the largest).
    """
    a, b = _step_key_rows(mine), _step_key_rows(other)
    most = max(events.values(), default=0) if events else 0
    if set(a) != set(b):

        def steps(keys) -> str:
            return ", ".join("(none)" if k[1] is None else str(k[1]) for k in sorted(keys, key=str)) or "none"

        return Verdict(name, False, f"steps differ: {mine_src} has {steps(a)}, {other_src} has {steps(b)}")
    problems, worst = [], 0.0
    for key, row in a.items():
        for column, attr in STEP_FIELDS.items():
            x, y = getattr(row, attr), getattr(b[key], attr)
            diff = abs(x - y)
            tolerance = max(
                STEP_TABLE_ABS_US,
                STEP_TABLE_REL * max(row.total_us, b[key].total_us),
                EXPORT_ROUNDING_US_PER_EVENT * (events.get(key[1], most) if events else 0),
            )
            worst = max(worst, diff)
            if diff > tolerance:
                step = "(none)" if key[1] is None else key[1]
                problems.append(f"step {step} {column}: {mine_src} {x:,.3f} us, {other_src} {y:,.3f} us")
    if problems:
        return Verdict(
            name, False, "; ".join(problems[:6]) + (f"; ... {len(problems) - 6} more" if len(problems) > 6 else "")
        )
    per_event = f", or {EXPORT_ROUNDING_US_PER_EVENT:g} us per task of the step" if events else ""
    return Verdict(
        name,
        True,
        f"{len(a)} step(s) x {', '.join(STEP_FIELDS)}: largest difference {worst:.4f} us "
        f"(tolerance {STEP_TABLE_ABS_US:g} us or {STEP_TABLE_REL:g} of the step{per_event}: "
        "rounding)",
    )


def check_step_table(facts: ExportFacts) -> Verdict | None:
    """step_trace_time agrees with the timeline's Overlap Analysis events it is built from.

    Text: step_trace_time.csv vs trace_view.json; database: analysis.db StepTraceTime vs the
    OVERLAP_ANALYSIS table. None when the capture lacks one of the two (or the timeline has no
    Overlap Analysis events: a Level0 or msprof export).
    """
    tables = facts.step_tables
    if tables is None:
        return None
    return compare_step_tables(
        tables.table,
        tables.rebuilt,
        f"step table agrees with the Overlap Analysis ({facts.where})",
        tables.table_source,
        tables.rebuilt_source,
    )


def check_exports_agree(facts: ExportFacts) -> list[Verdict]:
    """A capture exported as text and as a database: the same tasks per OP Type and the same step rows."""
    if facts.sides is None:
        return []
    text, db = facts.sides
    name = f"text and database exports agree ({facts.where})"
    problems = []
    for op in sorted(set(text.per_type) | set(db.per_type)):
        t, d = text.per_type.get(op), db.per_type.get(op)
        if t is None or d is None:
            have, lack = (text.source, db.source) if d is None else (db.source, text.source)
            count, total = t or d
            problems.append(f"{op}: {have} has {count} tasks, {total:,.3f} us; {lack} has none")
        elif t[0] != d[0] or abs(t[1] - d[1]) > _task_tolerance(t[0]):
            problems.append(
                f"{op}: {text.source} {t[0]} tasks, {t[1]:,.3f} us; {db.source} {d[0]} tasks, {d[1]:,.3f} us"
            )
    out = [
        Verdict(
            name + ": tasks per OP Type",
            not problems,
            "; ".join(problems[:5]) + (f"; ... {len(problems) - 5} more" if len(problems) > 5 else "")
            if problems
            else f"{len(text.per_type)} OP Types, {sum(c for c, _ in text.per_type.values()):,} tasks: count equal "
            f"and total within {ROUNDING_US_FLOOR:g} us + {ROUNDING_US_PER_TASK:g} us per task in "
            f"{text.source} and {db.source}",
        )
    ]
    if text.steps and db.steps:
        out.append(
            compare_step_tables(
                text.steps,
                db.steps,
                name + ": step table",
                text.steps_source,
                db.steps_source,
                events=text.step_tasks or None,
            )
        )
    return out


def integrity_verdicts(exports: list[ExportFacts]) -> list[Verdict]:
    """Every integrity check that applies to each export (common.formats.export_facts.integrity_facts reads them)."""
    out: list[Verdict] = []
    for facts in exports:
        out += [v for v in (check_op_statistic(facts), check_step_table(facts)) if v is not None]
        out += check_exports_agree(facts)
    return out
