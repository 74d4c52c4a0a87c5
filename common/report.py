"""Rendering only: every function returns text; callers print or save it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from common import analysis, bottleneck
from common.analysis import Verdict
from common.bottleneck import Peaks
from common.calibrate import peaks_for
from common.profile import TASK_RECORDS_MAX, Dataset, find_datasets, find_run_info

TOP_N = 10
STEP_ROWS = 20  # more steps than this: the step table lists the TOP_N longest, the verdict covers all


@dataclass
class Section:
    """A titled block: lines of prose and/or one table."""

    title: str
    lines: list[str] = field(default_factory=list)
    header: list[str] = field(default_factory=list)
    rows: list[list[object]] = field(default_factory=list)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 1000 else f"{value:,.1f}"
    return "N/A" if value is None else str(value)


def render_table(header: list[str], rows: list[list[object]]) -> str:
    """A plain aligned text table (numeric columns right-aligned)."""
    cells = [list(header)] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    numeric = [bool(rows) and all(isinstance(r[i], (int, float)) for r in rows) for i in range(len(header))]

    def line(r: list[str]) -> str:
        return "  ".join(c.rjust(w) if numeric[i] else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()

    return "\n".join([line(cells[0]), "  ".join("-" * w for w in widths), *(line(r) for r in cells[1:])])


def render_markdown_table(header: list[str], rows: list[list[object]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(_fmt(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def render_text(title: str, sections: list[Section]) -> str:
    parts = [title, "=" * len(title)]
    for s in sections:
        parts += ["", f"-- {s.title} --", *s.lines]
        if s.header:
            parts.append(render_table(s.header, s.rows))
    return "\n".join(parts)


def render_markdown(title: str, sections: list[Section]) -> str:
    parts = [f"# {title}"]
    for s in sections:
        parts += ["", f"## {s.title}", ""]
        parts += [f"{line}  " for line in s.lines]
        if s.header:
            parts += ["", render_markdown_table(s.header, s.rows)]
    return "\n".join(parts) + "\n"


def render_verdicts(verdicts: list[Verdict]) -> str:
    """One line per check: PASS/FAIL, its name, and the numbers it compared."""
    return "\n".join(f"[{'PASS' if v.ok else 'FAIL'}] {v.name}: {v.detail}" for v in verdicts)


def run_info_line(info: dict | None) -> str:
    if info is None:
        return "backend: unknown (no run_info.json: collected outside the lab)"
    state = "complete" if info.get("completed") else "INCOMPLETE (the run did not finish; numbers are partial)"
    return (
        f"backend: {str(info['backend']).upper()} | mode {info['mode']} | device {info.get('device')} | "
        f"{info.get('start')} | {state}"
    )


BOUND_ROWS = 8


def bottleneck_sections(ds: Dataset, label: str, peaks: Peaks | None, peaks_note: str) -> list[Section]:
    """Per-op lower bounds and roofline side; per-op dominant pipe when PMU ratios were collected."""
    if not ds.small:  # per-op bounds need per-task records: too many here
        return [Section(f"Bottlenecks per op: {label}", lines=[
            f"skipped: {ds.task_count:,} tasks (per-task records above {TASK_RECORDS_MAX:,} are not built)"])]
    bounds = bottleneck.op_bounds(ds.tasks, peaks)
    if not bounds:
        return []
    rows = []
    for b in bounds[:BOUND_ROWS]:
        w = b.work
        rows.append([
            b.op_type, b.shapes, b.count, b.mean_us,
            w.flops / 1e9 if w else None, w.bytes / 1e6 if w else None,
            b.lower_bound_us, 100 * b.achieved if b.achieved is not None else None,
            b.verdict,
        ])
    lines = [
        f"peaks: {peaks.source}" if peaks else f"peaks: none ({peaks_note})",
        "lower bound = max(FLOPs / peak FLOP/s, bytes moved / peak bytes/s) from the shapes in the profile; "
        "achieved = lower bound / mean time; bound = the larger of the two terms (roofline)",
    ]
    sections = [Section(
        f"Bottlenecks per op: {label}", lines=lines,
        header=["OP Type", "Input Shapes", "Count", "Mean(us)", "GFLOP", "MB moved", "Lower bound(us)",
                "Achieved(%)", "Bound"],
        rows=rows,
    )]
    pipes = bottleneck.pipe_verdicts(ds.tasks)
    if pipes:
        sections.append(Section(
            f"Pipes (PMU): {label}",
            lines=[f"dominant pipe: the busiest *_ratio; limited by it at >= {bottleneck.DOMINANT_RATIO}; "
                   f"scalar leading with cube/vector below {bottleneck.COMPUTE_PIPE_LOW} = issue-bound"],
            header=["OP Type", "Count", "ratios", "verdict"],
            rows=[[p.op_type, p.count, ", ".join(f"{k} {v:.2f}" for k, v in p.ratios.items()), p.text]
                  for p in pipes],
        ))
    return sections


def dataset_sections(ds: Dataset, root: Path, forwards: int | None) -> list[Section]:
    """Top ops, families, per-forward counts and (when present) the step table of one dataset."""
    label = ds.label(root)
    stats = ds.op_statistic
    sections = [
        Section(
            f"Top ops: {label} ({ds.kind})",
            header=["OP Type", "Core Type", "Count", "Total Time(us)", "Avg Time(us)", "Ratio(%)"],
            rows=[[s.op_type, s.core_type, s.count, s.total_us, s.avg_us, s.ratio_pct] for s in analysis.top_ops(stats, TOP_N)],
        )
    ]
    shares = analysis.family_share(stats)
    has_tasks = ds.task_count > 0
    counts = ds.family_counts if has_tasks else {}
    fam_rows = []
    for family in analysis.FAMILY_ORDER:
        if family in shares:
            if family == "init":
                per_fwd = "one-off"  # weight init and input generation happen once, not per forward
            else:
                per_fwd = f"{counts.get(family, 0) / forwards:.2f}" if forwards and has_tasks else "N/A"
            fam_rows.append([family, 100 * shares[family], counts.get(family, 0) if has_tasks else "N/A", per_fwd])
    note = f"{forwards} profiled forwards" if forwards else "number of forwards unknown: per-forward counts N/A"
    sections.append(
        Section(
            f"Op families: {label}",
            lines=[f"share of summed op time; counts from {'op_summary/kernel_details' if has_tasks else 'no task file'}; {note}"],
            header=["family", "share(%)", "tasks", "per forward"],
            rows=fam_rows,
        )
    )
    if ds.steps:
        summary = analysis.summarize_steps(ds.steps)
        shown = ds.steps if len(ds.steps) <= STEP_ROWS else sorted(ds.steps, key=lambda s: -s.total_us)[:TOP_N]
        rows = [
            [s.step if s.step is not None else "", s.computing_us, s.free_us, s.total_us,
             100 * s.computing_us / s.total_us if s.total_us else 0.0]
            for s in shown
        ]
        sections.append(
            Section(
                f"Steps: {label}",
                lines=[analysis.bound_verdict(summary), *bottleneck.run_hint(summary, *_step_task_stats(ds)),
                       *([f"{len(ds.steps):,} steps: the {TOP_N} longest are listed"] if shown is not ds.steps else [])],
                header=["Step", "Computing(us)", "Free(us)", "Step(us)", "Computing(%)"],
                rows=rows,
            )
        )
    return sections


def _step_task_stats(ds: Dataset) -> tuple[float | None, float | None]:
    """Tasks per step and the median task time, for the run-level hint."""
    if not ds.small:
        return None, None
    stepped = [t for t in ds.tasks if t.step_id is not None]
    if not stepped or not ds.steps:
        return None, None
    durations = sorted(t.duration_us for t in stepped)
    return len(stepped) / len(ds.steps), durations[len(durations) // 2]


def directory_report(
    root: Path | str, verdicts: list[Verdict] | None = None, soc: str | None = None, bottlenecks: bool = True
) -> tuple[str, str]:
    """The report of everything under ``root``, with a mode's checks if given: (text, Markdown)."""
    root = Path(root)
    datasets = find_datasets(root)
    info = find_run_info(root)
    forwards = info.get("forwards") if info else None
    sections = [Section("Run", lines=[run_info_line(info), f"datasets: {len(datasets)}"])]
    peaks, note = peaks_for(info, datasets, soc) if bottlenecks else (None, "")
    for ds in datasets:
        sections += dataset_sections(ds, root, forwards)
        if bottlenecks:
            sections += bottleneck_sections(ds, ds.label(root), peaks, note)
    if verdicts:
        sections.append(Section("Checks", lines=render_verdicts(verdicts).splitlines()))
    title = f"msprof lab report: {root}"
    return render_text(title, sections), render_markdown(title, sections)


def write_beside(root: Path, name: str, text: str) -> str:
    """Save ``name`` (report.md, report.html) beside the data; say so, or say why not (read-only input is fine)."""
    target = Path(root) / name
    try:
        target.write_text(text)
    except OSError as err:
        return f"({name} not written: {err.strerror} for {target})"
    return f"(written to {target})"


def write_report_md(root: Path, markdown: str) -> str:
    return write_beside(root, "report.md", markdown)


def _pct(value: float | None) -> str:
    return "N/A" if value is None else f"{100 * value:.1f}%"


def side_by_side(cols: list, info_line: str) -> Section:
    """The four modes in one table: one column per mode, one row per figure."""
    def row(name: str, values: list[object]) -> list[object]:
        return [name, *values]

    share_rows = [row(f"{family} share of forward time", [_pct(c.shares.get(family, 0.0)) if c.shares else "N/A"
                                                          for c in cols])
                  for family in analysis.FAMILY_ORDER if family != "init" and any(family in c.shares for c in cols)]
    count_rows = [row(f"{family} per forward", [f"{c.per_forward.get(family, 0):g}" if c.forwards else "N/A"
                                                for c in cols])
                  for family in ("matmul", "gelu", "cast", "add")]
    rows = [
        row("profiled forwards (02: kernel launches)", [c.forwards or c.launches or "N/A" for c in cols]),
        row("op time per forward (us, init excluded)",
            [f"{c.op_us_per_forward:,.1f}" if c.op_us_per_forward is not None else "N/A" for c in cols]),
        *share_rows,
        row("init ops, one-off (us, shown apart)", [f"{c.init_us:,.1f}" for c in cols]),
        *count_rows,
        row("Computing share of step", [_pct(c.computing_ratio) for c in cols]),
        row("output vs fp32 reference", [c.accuracy for c in cols]),
    ]
    return Section("The four modes side by side", lines=[info_line],
                   header=["", *[c.label for c in cols]], rows=rows)


def agree_report(cols: list, verdicts: list[Verdict], notes: list[str], info_line: str) -> tuple[str, str]:
    """The cross-mode view: the side-by-side table, then the verdicts: (text, Markdown)."""
    sections = [side_by_side(cols, info_line)]
    if notes:
        sections[0].lines += notes
    sections.append(Section("Cross-mode verdicts", lines=render_verdicts(verdicts).splitlines()))
    title = "msprof lab: cross-mode agreement"
    return render_text(title, sections), render_markdown(title, sections)


def comparison_report(cmp, base: str, cand: str) -> str:
    """Per-op and total deltas of a run comparison, regressions marked, then one verdict line."""
    unit = f"us per {cmp.per}"
    rows = []
    for d in cmp.ops:
        where, op_type, shapes = d.key
        rows.append([
            where or ".", op_type, shapes, d.base_us if d.base_us is not None else "absent",
            d.cand_us if d.cand_us is not None else "absent", d.delta_us,
            f"{d.delta_pct:+.1f}%" if d.delta_pct is not None else "new",
            "REGRESSION" if d.flagged else "",
        ])
    total_pct = 100 * (cmp.cand_total_us - cmp.base_total_us) / cmp.base_total_us
    lines = [
        f"baseline: {base} ({cmp.base_runs} run{'s' if cmp.base_runs > 1 else ''}); candidate: {cand} "
        f"({cmp.cand_runs} run{'s' if cmp.cand_runs > 1 else ''}); medians over runs, {unit}",
        f"matched by (where, OP Type, Input Shapes); flagged when slower by more than {cmp.threshold_pct:g}% "
        f"and at least 1% of the baseline total; init ops listed, never flagged",
    ]
    table = render_table(["where", "OP Type", "Input Shapes", "baseline", "candidate", "delta(us)", "delta", ""], rows)
    n = len(cmp.regressions) + int(cmp.total_flagged)
    verdict = Verdict(
        "no regression beyond the threshold", n == 0,
        f"total (init excluded) {cmp.base_total_us:,.1f} -> {cmp.cand_total_us:,.1f} {unit} ({total_pct:+.1f}%, "
        f"threshold {cmp.threshold_pct:g}%); {len(cmp.regressions)} op(s) flagged",
    )
    return "\n".join([*lines, table, render_verdicts([verdict])])


# --- HTML (inline SVG; see common.html) ------------------------------------------------------------
def _family_rows(labelled_stats: list[tuple[str, list]]) -> list[tuple[str, dict[str, float]]]:
    return [(label, analysis.family_share(stats)) for label, stats in labelled_stats]


def _pipe_items(ratios: dict[str, float]) -> list[tuple[str, float]]:
    return [(pipe, value) for pipe, value in ratios.items()]


def directory_html(root: Path | str, verdicts: list[Verdict] | None = None, soc: str | None = None) -> str:
    """report.html of one output folder: op-share bars, steps, bottlenecks and pipes, as inline SVG."""
    from common import html

    root = Path(root)
    datasets = find_datasets(root)
    info = find_run_info(root)
    peaks, note = peaks_for(info, datasets, soc)
    blocks = []
    if verdicts:
        blocks.append(html.section("Checks", html.verdict_list(verdicts)))
    rows = _family_rows([(_short(ds.label(root)), ds.op_statistic) for ds in datasets])
    blocks.append(html.section(
        "Op time by family", html.share_bars("op-share", rows, analysis.FAMILY_ORDER),
        note="share of summed op time per dataset (init = one-off weight/input generation)"))
    for ds in datasets:
        label = _short(ds.label(root))
        if ds.steps:
            summary = analysis.summarize_steps(ds.steps)
            steps = [(f"step {s.step}", s.computing_us, s.free_us) for s in ds.steps]
            blocks.append(html.section(
                f"Computing / Free per step: {label}", html.step_bars("steps", steps),
                note=" ".join([analysis.bound_verdict(summary), *bottleneck.run_hint(summary, *_step_task_stats(ds))])))
        for sec in bottleneck_sections(ds, label, peaks, note):
            if sec.title.startswith("Pipes"):
                charts = "".join(
                    f"<p class=\"note\">{html.esc(r[0])}: {html.esc(r[3])}</p>" for r in sec.rows)
                ratios = bottleneck.pipe_verdicts(ds.tasks)
                bars = "".join(html.value_bars("pipes", _pipe_items(v.ratios), "of core time", top=1.0) for v in ratios)
                blocks.append(html.section(sec.title, bars, charts, note=" ".join(sec.lines)))
            else:
                blocks.append(html.section(sec.title, html.table(sec.header, sec.rows), note=" ".join(sec.lines)))
        top = analysis.top_ops(ds.op_statistic, TOP_N)
        blocks.append(html.section(f"Top ops: {label}", html.table(
            ["OP Type", "Core Type", "Count", "Total Time(us)", "Avg Time(us)", "Ratio(%)"],
            [[s.op_type, s.core_type, s.count, s.total_us, s.avg_us, s.ratio_pct] for s in top])))
    return html.page(f"msprof lab report: {root.name}", run_info_line(info), blocks)


def _short(label: str) -> str:
    """A dataset label without msprof's / torch_npu's generated folder names."""
    parts = [p for p in label.split("/") if p not in ("mindstudio_profiler_output", "ASCEND_PROFILER_OUTPUT")
             and not p.startswith("PROF_") and not p.endswith("_ascend_pt")]
    return "/".join(parts) or label.split("/")[-1]


def write_report_html(root: Path, page: str) -> str:
    return write_beside(root, "report.html", page)


def agree_html(cols: list, verdicts: list[Verdict], notes: list[str], info_line: str, charts: dict) -> str:
    """The cross-mode page: side-by-side table, verdicts, and the charts of every mode."""
    from common import html

    table = side_by_side(cols, info_line)
    blocks = [
        html.section("Op time by family, per mode",
                     html.share_bars("op-share", [(c.label, c.shares) for c in cols],
                                     analysis.FAMILY_ORDER),
                     note="share of forward-pass time; init ops (one-off) excluded and listed in the table"),
        html.section("The four modes side by side", html.table(table.header, table.rows)),
        html.section("Verdicts", html.verdict_list(verdicts), note=" ".join(notes)),
    ]
    if charts.get("steps"):
        blocks.append(html.section("04: Computing / Free per step", html.step_bars("steps", charts["steps"]),
                                   note=charts.get("steps_note", "")))
    if charts.get("pipes"):
        blocks.append(html.section("02: AscendC pipe ratios (add_custom)",
                                   html.value_bars("pipes", charts["pipes"], "of core time", top=1.0),
                                   note=charts.get("pipes_note", "")))
    if charts.get("cast_variants"):
        blocks.append(html.section(
            "03: the Cast variants",
            html.share_bars("cast-variants", charts["cast_variants"], analysis.FAMILY_ORDER),
            html.value_bars("cast-per-execute", charts["cast_counts"], "Cast per execute", color="#e45756"),
            note="default = ATC's precision policy (fp16 compute, fp32 IO); fp16-io; fp32 = no precision change"))
    if charts.get("sweep"):
        blocks.append(html.section("04 sweep: host-bound to compute-bound",
                                   html.sweep_chart("sweep", charts["sweep"], analysis.HOST_BOUND_BELOW),
                                   note=charts.get("sweep_note", "")))
    return html.page("msprof lab: cross-mode agreement", info_line, blocks)
