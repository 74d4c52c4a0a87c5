"""The cluster view laid out: text for the terminal and cluster_report.txt, and its own report.html."""

from __future__ import annotations

import functools
from collections.abc import Callable

from common.analyze.cluster import ClusterReport
from common.analyze.cluster_scale import QUANTITIES, Outlier, Spread
from common.analyze.communication import OP_HEADER
from common.render import html
from common.render.report import Figure, Report, Section
from common.render.text import LazyRows, run_info_line
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


def cluster_view(
    report: ClusterReport, verdicts: list[Verdict] | None = None, notes: list[str] | None = None, full: bool = True
) -> Report:
    """The cluster view: per step and rank (or, ``full=False``, its summary), the verdicts, the collectives, per
    rank medians, checks; on the page first a chart of each rank's median step (``full=False``: a heat map per
    step and rank instead), and the checks first when one failed."""
    head, *sections = cluster_sections(report, full)
    if full:
        bars = Section(
            "Computing / Communication / Free per rank (median of the steps, us)",
            figures=[Figure(_rank_bars, (report,))],
            in_text=False,
        )
        charts = [bars] if report.summaries else []
    else:
        values = functools.cache(report.per_step_values)  # read from the columns once, when the page is drawn
        charts = [
            Section(
                "Computing + Free per step and rank (each step from its smallest, pale, to its largest, dark)",
                figures=[Figure(_heat_map, (values, 0, "rank-own", "Computing + Free"))],
                in_text=False,
            ),
            Section(
                "Communication(Not Overlapped) per step and rank: who waits",
                figures=[Figure(_heat_map, (values, 1, "rank-wait", "Communication(Not Overlapped)"))],
                in_text=False,
            ),
        ]
    head.in_page = False  # the page's subtitle
    checks = (
        [
            Section(
                "Checks",
                lines=list(notes or []),
                verdicts=list(verdicts or []),
                leads=not all(v.ok for v in verdicts or []),
            )
        ]
        if verdicts or notes
        else []
    )
    return Report(
        f"msprof lab cluster view: {report.view.label or report.view.root}",
        [head, *charts, *sections, *checks],
        subtitle=" | ".join(head.lines),
    )


def _rank_bars(report: ClusterReport) -> str:
    """Each rank's median step as Computing / Communication / Free bars."""
    mean = {name: MEAN_HEADER.index(name) for name in ("Rank", "Computing", "Comm(Not Overlapped)", "Free")}
    bars = [
        (f"rank {row[mean['Rank']]}", row[mean["Computing"]], row[mean["Free"]], row[mean["Comm(Not Overlapped)"]])
        for row in report.means
    ]
    return html.step_bars("rank-steps", bars)


def _heat_map(values: Callable[[], tuple], which: int, chart: str, what: str) -> str:
    """Per step, every rank's Computing + Free (``which`` 0) or Communication(Not Overlapped) (1) of ``values``
    (:meth:`ClusterReport.per_step_values`): the outliers by colour."""
    return html.heat_map(chart, values()[which], what)
