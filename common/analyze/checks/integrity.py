"""The files of one export: present and parsing with their columns, and agreeing with each other (op_statistic with
the task file, the step table with the timeline's Overlap Analysis, a text export with its database)."""

from __future__ import annotations


from common.formats.datasets import FileRows
from common.formats.export_facts import ExportFacts
from common.formats.records import StepTime
from common.verdict import Verdict


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
