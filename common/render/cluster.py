"""The cluster view laid out: text for the terminal and cluster_report.txt, and its own report.html."""

from __future__ import annotations

from collections.abc import Iterator

from common.analyze.cluster import ClusterReport
from common.analyze.cluster_scale import QUANTITIES, Outlier, Spread
from common.analyze.communication import OP_HEADER
from common.render import html
from common.render.text import LazyRows, Section, render_verdicts, run_info_line, text_lines
from common.verdict import Verdict

STEP_HEADER = ["Step", "Rank", "Computing", "Comm(Not Overlapped)", "Overlapped", "Free", "Step", "Bound"]
MEAN_HEADER = ["Rank", "Computing", "Comm(Not Overlapped)", "Communication", "Free", "Step", "Comm wait(%)", "Bound"]
LINK_HEADER = ["Step", "Ops", "Src", "Dst", "Transport", "Size(MB)", "Time(ms)", "GB/s"]
GROUP_HEADER = ["Kind", "Name", "Ranks", "Group id", "Group in communication.json"]
# the columns of common.analyze.parallel_layout.StageRow.cells
STAGE_HEADER = [
    "Step",
    "Stage",
    "Ranks",
    "Computing(max)",
    "Free(max)",
    "Comm(Not Overlapped)(max)",
    "Bubble(max)",
    "P2P ops",
    "P2P(us)",
    "P2P wait(us)",
    "P2P idle(us)",
]


def _head(report: ClusterReport) -> list[str]:
    view = report.view
    return [
        run_info_line(view.run_info)
        if view.run_info
        else "backend: unknown (no run_info.json: collected outside the lab)",
        f"ranks: {len(view.ranks)} ({', '.join(p.folder.name for p in view.ranks[:2])}"
        f"{', ...' if len(view.ranks) > 2 else ''})",
    ]


SPREAD_HEADER = ["Step", *(f"{q} (min / median / p95 / max)" for q in QUANTITIES)]
OUTLIER_HEADER = ["Rank", "Computing + Free", "Over the median", "Computing", "Free", "Comm(Not Overlapped)", "Group"]
COMM_RANK_LINES = 3  # in the summary: the ranks that wait most in their collectives, and the notes shown
STEPS_CSV = "cluster_steps.csv"


def _spread_cell(s: Spread) -> str:
    return " / ".join(f"{v:,.0f}" for v in (s.low, s.median, s.p95, s.high))


def _outlier_rows(rows: list[Outlier]) -> list[list[object]]:
    return [
        [o.rank, o.own_us, o.over_median_us, o.computing_us, o.free_us, o.comm_not_overlapped_us, o.group] for o in rows
    ]


def _first(lines: list[str], n: int, what: str) -> list[str]:
    """The first ``n`` lines, and how many more there are (all of them: cluster_report.txt with --out)."""
    more = len(lines) - n
    return lines if more <= 0 else lines[:n] + [f"... {more} more {what} (every one: cluster_report.txt with --out)"]


def _summary_sections(report: ClusterReport) -> list[Section]:
    """Beyond a handful of ranks: per step the distribution over the ranks, the outlying ranks, the verdicts."""
    n = len(report.view.ranks)
    sections = [
        Section(
            f"Per step, over the {n} ranks (us; every (step, rank) row: {STEPS_CSV} with --out)",
            header=SPREAD_HEADER,
            rows=[[sp.step, *(_spread_cell(sp.by_quantity[q]) for q in QUANTITIES)] for sp in report.spreads],
        ),
        Section("What bounds the step (every rank's steps)", lines=report.step_lines),
    ]
    if report.comm_lines:
        waiting = report.comm_ratios.largest(COMM_RANK_LINES) if report.comm_ratios is not None else []
        sections.append(
            Section(
                "Collectives and point-to-point ops (largest first, mean over the ranks)",
                lines=_first(report.comm_lines, COMM_RANK_LINES + 1, "notes")
                + report.rank_lines(waiting)
                + (
                    [
                        f"(the {len(waiting)} ranks with the highest wait ratio of {len(report.comm_ratios)}; every "
                        "rank's line: cluster_report.txt with --out)"
                    ]
                    if waiting
                    else []
                ),
                header=OP_HEADER,
                rows=report.op_rows,
            )
        )
    if report.layout is not None:
        sections.append(
            Section(
                "Parallel layout (profiler_metadata.json: distributed_args, parallel_group_info)",
                lines=report.layout_lines,
            )
        )
    sections.append(
        Section(
            "Slowest ranks: median of the steps (us), the most Computing + Free first",
            lines=[report.slow.text] + ([report.arrivals.text(top=COMM_RANK_LINES)] if report.arrivals else []),
            header=OUTLIER_HEADER,
            rows=_outlier_rows(report.slowest),
        )
    )
    sections.append(
        Section("Fastest ranks: median of the steps (us)", header=OUTLIER_HEADER, rows=_outlier_rows(report.fastest))
    )
    return sections


def _means_section(report: ClusterReport) -> Section:
    return Section(
        "Per rank, median of the steps (us)",
        lines=[report.slow.text] + ([report.arrivals.text()] if report.arrivals else []),
        header=MEAN_HEADER,
        rows=LazyRows(report.mean_rows, len(report.summaries)),
    )


def _rank_sections(report: ClusterReport) -> list[Section]:
    """Every rank's line: its median step, and its collectives' split (the summary shows the outliers); made as
    they are laid out, so that --out's text of thousands of ranks is written without being held."""
    sections = [_means_section(report)]
    if report.comm_ratios:
        sections.append(
            Section("Collectives per rank", lines=LazyRows(report.iter_rank_lines, len(report.comm_ratios)))
        )
    return sections


def cluster_sections(report: ClusterReport, full: bool = True) -> list[Section]:
    """The view's sections, in reading order: steps, the verdict, the collectives, the ranks. ``full=False``, for a
    capture of more ranks than :data:`~common.analyze.cluster_scale.SUMMARY_ABOVE_RANKS`: the summary instead."""
    if not full:
        return [Section("Cluster", lines=_head(report)), *_summary_sections(report)]
    if report.summarized:  # --out's text: the summary, then every rank's lines (every row: the CSV)
        return [Section("Cluster", lines=_head(report)), *_summary_sections(report), *_rank_sections(report)]
    sections = [
        Section("Cluster", lines=_head(report)),
        Section("Per step and rank (us)", header=STEP_HEADER, rows=report.per_step),
        Section("What bounds the step (every rank's steps)", lines=report.step_lines),
    ]
    if report.comm_lines:
        sections.append(
            Section(
                "Collectives and point-to-point ops (largest first, mean over the ranks)",
                lines=report.comm_lines + report.rank_lines(),
                header=OP_HEADER,
                rows=report.op_rows,
            )
        )
    if report.layout is not None:
        sections.append(
            Section(
                "Parallel layout (profiler_metadata.json: distributed_args, parallel_group_info)",
                lines=report.layout_lines,
                header=GROUP_HEADER,
                rows=report.group_rows,
            )
        )
    if report.stage_rows:
        sections.append(
            Section(
                "Pipeline stages (us; Computing, Free, Bubble: the stage's largest rank, as "
                "msprof-analyze's stage rows; P2P: mean over the stage's ranks)",
                header=STAGE_HEADER,
                rows=report.stage_rows,
            )
        )
    sections.append(_means_section(report))
    if report.link_rows:
        sections.append(
            Section(
                "Link matrix (each captured rank to its peers, all ops of the step)",
                header=LINK_HEADER,
                rows=report.link_rows,
            )
        )
    return sections


def steps_csv_header() -> list[str]:
    """The columns of cluster_steps.csv: every (step, rank) row that the summary leaves out."""
    return ["Step", "Rank", *(f"{h}(us)" for h in STEP_HEADER[2:-1]), "Bound"]  # the step's own length: Step(us)


def render_cluster(
    report: ClusterReport, verdicts: list[Verdict] | None = None, notes: list[str] | None = None, full: bool = True
) -> str:
    """The cluster view as text: per step and rank (or, ``full=False``, its summary), the verdicts, the collectives,
    per rank medians, checks."""
    return "\n".join(cluster_text_lines(report, verdicts, notes, full))


def cluster_text_lines(
    report: ClusterReport, verdicts: list[Verdict] | None = None, notes: list[str] | None = None, full: bool = True
) -> Iterator[str]:
    """:func:`render_cluster`'s lines, one at a time (what --out writes, every rank's lines never all held)."""
    sections = cluster_sections(report, full)
    lines = list(notes or [])
    if verdicts:
        lines += render_verdicts(verdicts).splitlines()
    if lines:
        sections.append(Section("Checks", lines=lines))
    return text_lines(f"msprof lab cluster view: {report.view.label or report.view.root}", sections)


def _heat_maps(report: ClusterReport) -> list[str]:
    """Per step, every rank's Computing + Free and its Communication(Not Overlapped): the outliers by colour."""
    own, wait = report.per_step_values()
    return [
        html.section(
            "Computing + Free per step and rank (each step from its smallest, pale, to its largest, dark)",
            html.heat_map("rank-own", own, "Computing + Free"),
        ),
        html.section(
            "Communication(Not Overlapped) per step and rank: who waits",
            html.heat_map("rank-wait", wait, "Communication(Not Overlapped)"),
        ),
    ]


def cluster_html(
    report: ClusterReport, verdicts: list[Verdict] | None = None, notes: list[str] | None = None, full: bool = True
) -> str:
    """The cluster view as one self-contained page: a chart of each rank's median step (``full=False``: a heat map
    per step and rank instead), then every section of :func:`cluster_sections` as it comes (its lines as prose, its
    table as a table); the checks come last unless one failed."""
    head, *sections = cluster_sections(report, full)
    if full:
        mean = {name: MEAN_HEADER.index(name) for name in ("Rank", "Computing", "Comm(Not Overlapped)", "Free")}
        bars = [
            (f"rank {row[mean['Rank']]}", row[mean["Computing"]], row[mean["Free"]], row[mean["Comm(Not Overlapped)"]])
            for row in report.means
        ]
        blocks = (
            [
                html.section(
                    "Computing / Communication / Free per rank (median of the steps, us)",
                    html.step_bars("rank-steps", bars),
                )
            ]
            if bars
            else []
        )
    else:
        blocks = _heat_maps(report)
    for sec in sections:
        prose = "".join(f"<p>{html.esc(line)}</p>" for line in sec.lines)
        rows = html.table(sec.header, sec.rows, wrap=sec.wrap) if sec.header and sec.rows else ""  # as render_text
        blocks.append(html.section(sec.title, prose, rows))
    if verdicts or notes:
        checks = html.section(
            "Checks",
            html.verdict_list(verdicts or []),
            "".join(f'<p class="note">{html.esc(n)}</p>' for n in notes or []),
        )
        failed = any(not v.ok for v in verdicts or [])
        blocks = [checks, *blocks] if failed else [*blocks, checks]
    return html.page(
        f"msprof lab cluster view: {report.view.label or report.view.root}", " | ".join(head.lines), blocks
    )
