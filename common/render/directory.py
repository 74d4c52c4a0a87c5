"""The report of an output folder, from its exports' records (common.formats.report_input): per export the top
ops, op families, steps or forwards, memory, bottlenecks and advisor findings, then the checks.

Shared by ``python -m common report`` and every mode's harness (common.modes.reports reads the records and the
peaks, :mod:`common.modes.report_files` writes report.md / report.html).
"""

from __future__ import annotations

import statistics

from common.analyze import families, grouping, memory
from common.analyze.advisor import FOUND
from common.analyze.advisor.rules import RANK_RULES
from common.analyze.bounds import op as bounds
from common.analyze.bounds import step as step_bound
from common.analyze.bounds.op import Peaks
from common.formats.records import StepTime
from common.formats.report_input import TASK_RECORDS_MAX, ExportRecord
from common.formats.rundir import recorded_count
from common.render import html
from common.render.report import Figure, Report, Section
from common.render.text import STEP_ROWS, TOP_N, run_info_line
from common.verdict import Verdict
from common.workload import WARMUP_FORWARDS

BOUND_ROWS = 8
REPEAT_IS = {"execute": "one forward each", "launch": "per forward: per launch of the kernel"}
INTEGRITY = "Integrity (the files of each export agree with each other)"  # the integrity section's title
BOUND_HEADER = [
    "OP Type",
    "Input Shapes",
    "Count",
    "Mean(us)",
    "GFLOP",
    "MB moved",
    "Lower bound(us)",
    "Achieved(%)",
    "Bound",
]


def bottleneck_sections(ds: ExportRecord, label: str, peaks: Peaks | None, peaks_note: str) -> list[Section]:
    """Per-op lower bounds and roofline side; per-op dominant pipe when PMU ratios were collected."""
    if not ds.small:  # per-op bounds need per-task records: too many here
        return [
            Section(
                f"Bottlenecks per op: {label}",
                lines=[f"skipped: {ds.task_count:,} tasks (per-task records above {TASK_RECORDS_MAX:,} are not built)"],
            )
        ]
    op_bounds = bounds.op_bounds(ds.tasks, peaks)
    if not op_bounds:
        return []
    rows = []
    for b in op_bounds[:BOUND_ROWS]:
        w = b.work
        rows.append(
            [
                b.op_type,
                b.shapes,
                b.count,
                b.mean_us,
                w.flops / 1e9 if w else None,
                w.bytes / 1e6 if w else None,
                b.lower_bound_us,
                100 * b.achieved if b.achieved is not None else None,
                b.verdict,
            ]
        )
    lines = [
        f"peaks: {peaks.source}" if peaks else f"peaks: none ({peaks_note})",
        "lower bound = max(FLOPs / peak FLOP/s, bytes moved / peak bytes/s) from the shapes in the profile; "
        "achieved = lower bound / mean time; bound = the larger of the two terms (roofline)",
        *(
            [f"the {BOUND_ROWS} of {len(op_bounds)} (OP Type, Input Shapes) that took the most time"]
            if len(op_bounds) > BOUND_ROWS
            else []
        ),
    ]
    sections = [
        Section(
            f"Bottlenecks per op: {label}", lines=lines, header=BOUND_HEADER, rows=rows, wrap=("Input Shapes", "Bound")
        )
    ]
    pipes = bounds.pipe_verdicts(ds.tasks)
    if pipes:
        sections.append(
            Section(
                f"Pipes (PMU): {label}",
                lines=[
                    f"dominant pipe: the busiest *_ratio; limited by it at >= {bounds.DOMINANT_RATIO}; "
                    f"scalar leading with cube/vector below {bounds.COMPUTE_PIPE_LOW} = issue-bound"
                ],
                header=["OP Type", "Count", "ratios", "verdict"],
                rows=[
                    [p.op_type, p.count, ", ".join(f"{k} {v:.2f}" for k, v in p.ratios.items()), p.text] for p in pipes
                ],
                # each op's chart under its own label: unlabelled, 40 charts per rank could not be told apart
                figures=[
                    Figure(
                        html.value_bars,
                        ("pipes", list(p.ratios.items()), "of core time"),
                        {"top": 1.0, "width": html.GRID_CHART},
                        label=p.op_type,
                        caption=f" ({p.count} tasks): {p.text}",
                    )
                    for p in pipes
                ],
                grid=True,
            )
        )
    return sections


def dataset_sections(
    ds: ExportRecord, forwards: int | None, samples: int | None = None, repeats: tuple[str, int] | None = None
) -> list[Section]:
    """Top ops, families, per-forward counts and (when present) the step table of one dataset (``samples``: the
    run's batch, which the advice names)."""
    label = ds.label
    stats = ds.op_statistic
    if not stats:  # a timeline or a step table alone: nothing per op to show
        sections = [
            Section(
                f"Ops: {label} ({ds.kind})",
                lines=[
                    *([ds.source] if ds.source else []),
                    "no op statistics and no task file (op_summary / kernel_details) in this export: top ops and op "
                    "families N/A",
                ],
            )
        ]
        if ds.steps:
            sections.append(step_section(ds, label, samples))
        return sections + memory_sections(ds, label)
    sections = [
        Section(
            f"Top ops: {label} ({ds.kind})",
            lines=[ds.source] if ds.source else [],
            header=["OP Type", "Core Type", "Count", "Total Time(us)", "Avg Time(us)", "Ratio(%)"],
            rows=[
                [s.op_type, s.core_type, s.count, s.total_us, s.avg_us, s.ratio_pct]
                for s in families.top_ops(stats, TOP_N)
            ],
        )
    ]
    shares = families.family_share(stats)
    has_tasks = ds.task_count > 0
    counts = families.family_counts_of_types(ds.type_counts) if has_tasks else {}
    groups, unit = forward_groups(ds, repeats)
    if forwards is None and groups and unit not in ("forward", "step"):
        forwards = len(groups)  # an execute of 03's graph (one forward), a launch of 02's kernel
    medians = families.forward_share_estimates(groups) if len(groups) >= 2 else {}
    fam_rows, labels = [], families.family_labels(stats)
    for family in families.FAMILY_ORDER:
        if family in shares:
            if family == "init":
                per_fwd = "one-off"  # weight init and input generation happen once, not per forward
            else:
                per_fwd = f"{counts.get(family, 0) / forwards:.2f}" if forwards and has_tasks else "N/A"
            e = medians.get(family)
            median = f"{100 * e.median:.1f} ({100 * e.q1:.1f}-{100 * e.q3:.1f})" if e else "N/A"
            fam_rows.append(
                [
                    family,
                    100 * shares[family],
                    median,
                    counts.get(family, 0) if has_tasks else "N/A",
                    per_fwd,
                    ", ".join(labels.get(family, [])),
                ]
            )
    note = (
        f"{forwards} profiled {'forwards' if unit in ('forward', 'step') else f'{_plural(unit)} ({REPEAT_IS[unit]})'}"
        if forwards
        else "number of forwards unknown: per-forward counts N/A"
    )
    per = (
        f"median share per {unit} over {len(groups)} {_plural(unit)} with its IQR (init excluded: what the checks "
        "judge)"
        if medians
        else "median per forward N/A: the capture marks no forwards or steps, and its run recorded no repeats"
    )
    sections.append(
        Section(
            f"Op families: {label}",
            lines=[
                f"share of summed op time; {per}; counts from "
                f"{'op_summary/kernel_details' if has_tasks else 'no task file'}; {note}"
            ],
            header=["family", "share(%)", "median(%) (IQR)", "tasks", "per forward", "largest ops"],
            rows=fam_rows,
        )
    )
    if ds.steps:
        sections.append(step_section(ds, label, samples))
    elif unit == "forward" and len(groups) >= 2:
        sections.append(forward_section(groups, label, samples))
    sections += memory_sections(ds, label)
    return sections


def forward_section(groups: list[list], label: str, samples: int | None = None) -> Section:
    """A capture that marks its forwards but has no step table (01): per forward, the op time against the
    Task Wait Time between its tasks (op_summary's gap before each task; the first task's, before the forward
    began, left out), as the median forward, with the hypothesis and what to try."""
    busy = [sum(t.duration_us for t in g) for g in groups]
    wait = [sum(t.wait_us or 0.0 for t in g[1:]) for g in groups]
    b, w = statistics.median(busy), statistics.median(wait)
    durations = sorted(t.duration_us for g in groups for t in g)
    hint = bounds.run_hint(
        step_bound.StepSummary(len(groups), b + w, b, w),
        None,
        None,
        bounds.compute_precision([t for g in groups for t in g]),
        samples,
    )[:2]
    share = 100 * w / (b + w) if b + w else 0.0
    evidence = (
        f"evidence: per forward (median of {len(groups)}): op time {b:,.1f} us, Task Wait Time between its "
        f"tasks {w:,.1f} us ({share:.1f}% of the forward waiting; host-bound above "
        f"{100 * (1 - step_bound.HOST_BOUND_BELOW):.0f}%), {statistics.median(len(g) for g in groups):g} tasks "
        f"per forward, median task {durations[len(durations) // 2]:,.1f} us"
    )
    return Section(
        f"Forwards: {label}", lines=[*hint, evidence, "Task Wait Time: the gap before each task, in op_summary"]
    )


def forward_groups(ds: ExportRecord, repeats: tuple[str, int] | None = None) -> tuple[list[list], str]:
    """The tasks of each measured forward of a dataset, and what one is called: its steps (tasks with a Step Id),
    else the lab's forward ranges (msprof_tx, the warm-up ones left out), else the ``repeats`` the run recorded,
    (what one is called, how many: 03's executes of one graph, 02's kernel launches; the same tasks each time, in
    order); none for a capture that marks none."""
    if not ds.small:
        return [], "forward"
    stepped = grouping.tasks_by_step(ds.tasks)
    if stepped:
        return stepped, "step"
    forwards = grouping.measured_forward_groups(ds.tasks, ds.forward_windows, WARMUP_FORWARDS)
    if not forwards and repeats:
        return grouping.tasks_by_execute(ds.tasks, repeats[1]) or [], repeats[0]
    return forwards, "forward"


STEP_HEADER = [
    "Step",
    "Computing(us)",
    "Comm Not Overlapped(us)",
    "Overlapped(us)",
    "Free(us)",
    "Preparing(us)",
    "Step(us)",
    "Computing(%)",
    "Comm(%)",
    "Free(%)",
    "Bound",
]


def step_rows(steps: list[StepTime]) -> list[list[object]]:
    """One row per step: its parts, their shares of the step and the step's own verdict."""
    rows = []
    for s in steps:
        total = s.total_us
        rows.append(
            [
                s.step if s.step is not None else "",
                s.computing_us,
                s.communication_not_overlapped_us,
                s.overlapped_us,
                s.free_us,
                s.preparing_us,
                total,
                *(
                    100 * v / total if total else 0.0
                    for v in (s.computing_us, s.communication_not_overlapped_us, s.free_us)
                ),
                step_bound.step_kind(s),
            ]
        )
    return rows


def step_lines(ds: ExportRecord, samples: int | None = None) -> list[str]:
    """The verdict over the median step, then its hypothesis, what to try (knowing the run's batch, ``samples``) and
    the evidence."""
    summary = step_bound.summarize_steps(ds.steps)
    verdict = step_bound.step_verdict(summary)
    precision = bounds.compute_precision(ds.tasks) if ds.small else None
    if verdict.kind in ("host-bound", "compute-bound"):
        hint = bounds.run_hint(summary, *_step_task_stats(ds), precision, samples) + step_bound.preparing_note(summary)
    else:
        hint = step_bound.advice(summary, verdict, precision, samples)
    return [verdict.text, *hint]


def step_section(ds: ExportRecord, label: str, samples: int | None = None) -> Section:
    shown = ds.steps if len(ds.steps) <= STEP_ROWS else sorted(ds.steps, key=lambda s: -s.total_us)[:TOP_N]
    return Section(
        f"Steps: {label}",
        lines=[
            *step_lines(ds, samples),
            f"steps from {ds.steps_source}",
            *([f"{len(ds.steps):,} steps: the {TOP_N} longest are listed"] if shown is not ds.steps else []),
        ],
        header=STEP_HEADER,
        rows=step_rows(shown),
        figures=[
            Figure(
                html.step_bars,
                (
                    "steps",
                    [
                        (
                            f"step {s.step}" if s.step is not None else "whole trace",
                            s.computing_us,
                            s.free_us,
                            s.communication_not_overlapped_us,
                        )
                        for s in shown
                    ],
                ),
            )
        ],
    )


def memory_summary(ds: ExportRecord) -> memory.MemorySummary | None:
    """Memory of a torch_npu text export (its memory files) or of a database (MEMORY_RECORD / OP_MEMORY)."""
    return memory.summarize_memory(ds.memory) if ds.memory is not None else None


MEMORY_OP_HEADER = ["Operator", "Allocations", "Allocated(MB)", "Largest(MB)", "Held(us)"]


def memory_sections(ds: ExportRecord, label: str, summary: memory.MemorySummary | None = None) -> list[Section]:
    """Peak allocated / reserved per allocator and the top ops by memory, when the capture recorded memory."""
    summary = summary or memory_summary(ds)
    if summary is None:
        return []
    sections = [
        Section(
            f"Memory: {label}",
            lines=memory.memory_lines(summary),
            header=["Component", "Peak allocated(MB)", "Peak reserved(MB)", "Peak active(MB)", "Samples"],
            rows=[
                [p.component, p.peak_allocated_mb, p.peak_reserved_mb, p.peak_active_mb, p.samples]
                for p in summary.peaks
            ],
            figures=[
                Figure(html.value_bars, ("memory-peaks", items, "MB"), {"color": html.MEMORY, "fmt": ",.1f"})
                for items in [memory_peak_items(summary)]
                if items
            ],
        )
    ]
    if summary.operators:
        sections.append(
            Section(
                f"Top ops by memory: {label}",
                lines=memory.operator_lines(summary),
                header=MEMORY_OP_HEADER,
                rows=[[o.name, o.count, o.total_mb, o.largest_mb, o.mean_held_us] for o in summary.operators],
            )
        )
    return sections


def memory_peak_items(summary: memory.MemorySummary) -> list[tuple[str, float]]:
    """The bars of the memory chart: each allocator's peak allocated and reserved (MB), where recorded."""
    items = []
    for p in summary.peaks:
        if p.peak_allocated_mb is not None:
            items.append((f"{p.component} allocated", p.peak_allocated_mb))
        if p.peak_reserved_mb is not None:
            items.append((f"{p.component} reserved", p.peak_reserved_mb))
    return items


def _step_task_stats(ds: ExportRecord) -> tuple[float | None, float | None]:
    """Tasks per step and the median task time, for the run-level hint."""
    if not ds.small:
        return None, None
    stepped = [t for t in ds.tasks if t.step_id is not None]
    if not stepped or not ds.steps:
        return None, None
    durations = sorted(t.duration_us for t in stepped)
    return len(stepped) / len(ds.steps), durations[len(durations) // 2]


NOTHING_TO_CROSS_CHECK = (
    "nothing to cross-check: no export here holds two files derived from the same data "
    "(op_statistic and its task file, a step table and its timeline, text and database)"
)


def advisory_sections(ds: ExportRecord, label: str) -> list[Section]:
    """One section per advisor rule of one export that fires (common.analyze.advisor), with its figures and rows:
    what ``python -m common advise`` finds on this export (the rules across ranks are ``advise``'s and ``cluster``'s)."""
    if not ds.small:
        return []
    found = [f for f in (rule(ds.advice) for rule in RANK_RULES) if f.status == FOUND]
    return [
        Section(
            f"Advisor: {f.rule}: {label}",
            lines=[
                f.text,
                f"rule: {f.threshold}",
                *([f"remedy: {f.remedy}"] if f.remedy else []),
                *([f"fix: nox -s fix -- 0 --pairs {f.fix}"] if f.fix else []),
            ],
            header=f.header,
            rows=f.rows,
            wrap=("Dtypes (in -> out)", "Why", "Set"),
        )
        for f in found
    ]


def folder_report(
    title: str,
    records: list[ExportRecord],
    info: dict | None,
    *,
    verdicts: list[Verdict] = (),
    integrity: list[Verdict] = (),
    peaks: tuple[Peaks | None, str] | None = None,
    warnings: list[str] = (),
    notes: list[str] = (),
    body: str = "",
    damaged: list[str] = (),
    page_title: str = "",
) -> Report:
    """The report of a folder's exports (``records``, read by common.formats.report_input): its run, then per
    export the top ops, op families, steps or forwards, memory, bottlenecks and advisor findings, then the checks
    (a mode's ``verdicts``) and the ``integrity`` checks (on the page first when one failed). ``peaks``: the lower
    bounds' peaks and where they come from (None: no bottleneck sections); ``notes``: what the mode found besides
    its checks (02's answer); ``body``: a mode's own report text (03's variant table), first; ``damaged``: one
    line per file left out as unreadable (on the page first)."""
    forwards, samples = (info or {}).get("forwards"), recorded_count(info, "samples")
    executes, launches = recorded_count(info, "measured_executes"), recorded_count(info, "measured_launches")
    repeats = ("execute", executes) if executes else ("launch", launches) if launches else None  # 03, 02
    sections = [Section("Report", lines=body.splitlines(), preformatted=True)] if body else []
    sections.append(
        Section("Run", lines=[run_info_line(info), *workload_lines(info), f"datasets: {len(records)}", *warnings])
    )
    if damaged:
        sections.append(Section("Damaged files (left out; the rest is reported)", lines=damaged, leads=True))
    sections.append(
        Section(
            "Op time by family",
            lines=["share of summed op time per dataset (init = one-off weight/input generation)"],
            figures=[
                Figure(
                    html.share_bars,
                    ("op-share", [(_short(r.label), families.family_share(r.op_statistic)) for r in records]),
                    {"order": families.FAMILY_ORDER},
                )
            ],
            in_text=False,
        )
    )
    for ds in records:
        sections += dataset_sections(ds, forwards, samples, repeats)
        if peaks is not None:
            sections += bottleneck_sections(ds, ds.label, *peaks)
        sections += advisory_sections(ds, ds.label)
    if verdicts:
        sections.append(Section("Checks", verdicts=list(verdicts)))
    if notes:
        sections.append(Section("Notes", lines=[line for n in notes for line in n.splitlines()], preformatted=True))
    sections.append(
        Section(
            INTEGRITY,
            lines=[] if integrity else [NOTHING_TO_CROSS_CHECK],
            verdicts=list(integrity),
            leads=not all(v.ok for v in integrity),
        )
    )
    return Report(title, sections, page_title=page_title)  # the Run section says what a subtitle would


def workload_lines(info: dict | None) -> list[str]:
    """What run_info.json says was profiled: the workload's name and hash, the thread count."""
    work, program = (info or {}).get("workload"), (info or {}).get("program")
    threads = (info or {}).get("threads")
    suffix = f" | threads: {threads}" if threads is not None else ""
    if isinstance(program, list) and program:  # a program of the user's, profiled whole (01 with -- ...)
        return [f"program: {' '.join(map(str, program))} (profiled whole: no workload of the lab's)" + suffix]
    if not work:
        return []
    where = work.get("path") or "built in"
    line = f"workload: {work.get('name')} ({where}, sha256 {str(work.get('sha256'))[:12]})"
    if (info or {}).get("kernel"):  # mode 02 records the workload it was given, and profiles its kernel instead
        return [f"kernel: {info['kernel']} (profiled instead of the workload, recorded only: {line[10:]})" + suffix]
    return [line + suffix]


def _plural(unit: str) -> str:
    return unit + ("es" if unit.endswith("ch") else "s")  # launches, executes, steps, forwards


def _short(label: str) -> str:
    """A dataset label without msprof's / torch_npu's generated folder names."""
    parts = [p for p in label.split("/") if p not in ("mindstudio_profiler_output", "ASCEND_PROFILER_OUTPUT")]
    named = [p for p in parts if not p.startswith("PROF_") and not p.endswith("_ascend_pt")]
    return "/".join(named or parts) or label.split("/")[-1]  # generated names only: keep them (rank0_ascend_pt)
