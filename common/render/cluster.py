"""The cluster view laid out: text for the terminal and cluster_report.txt, and its own report.html."""

from __future__ import annotations

import html

from common.analyze.cluster import ClusterReport
from common.analyze.communication import OP_HEADER
from common.render.text import Section, render_text, render_verdicts, run_info_line, verdict_tag
from common.verdict import Verdict

STEP_HEADER = ["Step", "Rank", "Computing", "Comm(Not Overlapped)", "Overlapped", "Free", "Step", "Bound"]
MEAN_HEADER = ["Rank", "Computing", "Comm(Not Overlapped)", "Communication", "Free", "Step", "Comm wait(%)", "Bound"]
LINK_HEADER = ["Step", "Ops", "Src", "Dst", "Transport", "Size(MB)", "Time(ms)", "GB/s"]


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


CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1200px; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: .5em 0 1.2em; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 6px; text-align: right; vertical-align: top; }
th { background: #f3f3f3; }
td.text { text-align: left; overflow-wrap: anywhere; max-width: 28em; }
p { line-height: 1.4; overflow-wrap: anywhere; }
.fail { color: #b00; font-weight: bold; } .pass { color: #070; }
"""


def _cell(value: object) -> str:
    if isinstance(value, float):
        text = f"{value:,.3f}" if abs(value) < 1000 else f"{value:,.1f}"
        return f"<td>{text}</td>"
    if isinstance(value, int):
        return f"<td>{value}</td>"
    return f'<td class="text">{html.escape("N/A" if value is None else str(value))}</td>'


def _table(header: list[str], rows: list[list[object]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(_cell(c) for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def cluster_html(report: ClusterReport, verdicts: list[Verdict] | None = None, notes: list[str] | None = None) -> str:
    """The cluster view as one self-contained page; the checks come last unless one failed."""
    parts = []
    for section in cluster_sections(report):
        parts.append(f"<h2>{html.escape(section.title)}</h2>")
        parts += [f"<p>{html.escape(line)}</p>" for line in section.lines]
        if section.header:
            parts.append(_table(section.header, section.rows))
    checks = [f"<p>{html.escape(n)}</p>" for n in notes or []]
    checks += [f'<p class="{"pass" if v.ok else "fail"}">{html.escape(verdict_tag(v))} {html.escape(v.name)}: '
               f"{html.escape(v.detail)}</p>" for v in verdicts or []]
    failed = any(not v.ok for v in verdicts or [])
    block = ["<h2>Checks</h2>", *checks] if checks else []
    body = block + parts if failed else parts + block
    title = html.escape(f"msprof lab cluster view: {report.view.root}")
    return (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{title}</title><style>{CSS}</style>"
            f"</head><body><h1>{title}</h1>{''.join(body)}</body></html>\n")
