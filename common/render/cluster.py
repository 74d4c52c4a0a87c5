"""The cluster view laid out: text for the terminal and cluster_report.txt, and its own report.html."""

from __future__ import annotations

from common.analyze.cluster import ClusterReport
from common.analyze.communication import OP_HEADER
from common.render import html
from common.render.text import Section, render_text, render_verdicts, run_info_line
from common.verdict import Verdict

STEP_HEADER = ["Step", "Rank", "Computing", "Comm(Not Overlapped)", "Overlapped", "Free", "Step", "Bound"]
MEAN_HEADER = ["Rank", "Computing", "Comm(Not Overlapped)", "Communication", "Free", "Step", "Comm wait(%)", "Bound"]
LINK_HEADER = ["Step", "Ops", "Src", "Dst", "Transport", "Size(MB)", "Time(ms)", "GB/s"]
GROUP_HEADER = ["Kind", "Name", "Ranks", "Group id", "Group in communication.json"]
# the columns of common.analyze.parallel_layout.StageRow.cells
STAGE_HEADER = ["Step", "Stage", "Ranks", "Computing(max)", "Free(max)", "Comm(Not Overlapped)(max)", "Bubble(max)",
                "P2P ops", "P2P(us)", "P2P wait(us)", "P2P idle(us)"]


def _head(report: ClusterReport) -> list[str]:
    view = report.view
    return [
        run_info_line(view.run_info) if view.run_info else "backend: unknown (no run_info.json: collected outside the lab)",
        f"ranks: {len(view.ranks)} ({', '.join(p.folder.name for p in view.ranks[:2])}"
        f"{', ...' if len(view.ranks) > 2 else ''})",
    ]


def cluster_sections(report: ClusterReport) -> list[Section]:
    """The view's sections, in reading order: steps, the verdict, the collectives, the ranks."""
    sections = [
        Section("Cluster", lines=_head(report)),
        Section("Per step and rank (us)", header=STEP_HEADER, rows=report.per_step),
        Section("What bounds the step (every rank's steps)", lines=report.step_lines),
    ]
    if report.comm_lines:
        sections.append(Section("Collectives and point-to-point ops (largest first, mean over the ranks)",
                                lines=report.comm_lines, header=OP_HEADER, rows=report.op_rows))
    if report.layout is not None:
        sections.append(Section("Parallel layout (profiler_metadata.json: distributed_args, parallel_group_info)",
                                lines=report.layout_lines, header=GROUP_HEADER, rows=report.group_rows))
    if report.stage_rows:
        sections.append(Section("Pipeline stages (us; Computing, Free, Bubble: the stage's largest rank, as "
                                "msprof-analyze's stage rows; P2P: mean over the stage's ranks)",
                                header=STAGE_HEADER, rows=report.stage_rows))
    sections.append(Section(
        "Per rank, mean of the steps (us)",
        lines=[report.slow.text] + ([report.arrivals.text()] if report.arrivals else []),
        header=MEAN_HEADER, rows=report.means))
    if report.link_rows:
        sections.append(Section("Link matrix (each captured rank to its peers, all ops of the step)",
                                header=LINK_HEADER, rows=report.link_rows))
    return sections


def render_cluster(report: ClusterReport, verdicts: list[Verdict] | None = None, notes: list[str] | None = None) -> str:
    """The cluster view as text: per step and rank, the verdicts, the collectives, per rank means, checks."""
    sections = cluster_sections(report)
    lines = list(notes or [])
    if verdicts:
        lines += render_verdicts(verdicts).splitlines()
    if lines:
        sections.append(Section("Checks", lines=lines))
    return render_text(f"msprof lab cluster view: {report.view.root}", sections)


def cluster_html(report: ClusterReport, verdicts: list[Verdict] | None = None, notes: list[str] | None = None) -> str:
    """The cluster view as one self-contained page: a chart of each rank's mean step, then every section of
    :func:`cluster_sections` as it comes (its lines as prose, its table as a table); the checks come last unless
    one failed."""
    head, *sections = cluster_sections(report)
    mean = {name: MEAN_HEADER.index(name) for name in ("Rank", "Computing", "Comm(Not Overlapped)", "Free")}
    bars = [(f"rank {row[mean['Rank']]}", row[mean["Computing"]], row[mean["Free"]], row[mean["Comm(Not Overlapped)"]])
            for row in report.means]
    blocks = [html.section("Computing / Communication / Free per rank (mean of the steps, us)",
                           html.step_bars("rank-steps", bars))] if bars else []
    for sec in sections:
        prose = "".join(f"<p>{html.esc(line)}</p>" for line in sec.lines)
        rows = html.table(sec.header, sec.rows, wrap=sec.wrap) if sec.header else ""
        blocks.append(html.section(sec.title, prose, rows))
    if verdicts or notes:
        checks = html.section("Checks", html.verdict_list(verdicts or []),
                              "".join(f"<p class=\"note\">{html.esc(n)}</p>" for n in notes or []))
        failed = any(not v.ok for v in verdicts or [])
        blocks = [checks, *blocks] if failed else [*blocks, checks]
    return html.page(f"msprof lab cluster view: {report.view.root}", " | ".join(head.lines), blocks)
