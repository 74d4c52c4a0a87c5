"""The report files of an output folder: report.md and report.html beside the data (or in a folder the lab owns),
agree.md for the cross-mode check; what :mod:`common.modes.reports` lays out, written, or why it was not."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from common.analyze.checks import integrity_verdicts
from common.collect.calibrate import peaks_for
from common.formats.datasets import Dataset, find_datasets, find_run_info
from common.formats.export_facts import integrity_facts
from common.formats.rundir import prepare_output_dir, recorded_count
from common.modes.reports import NOTHING_TO_CROSS_CHECK, directory_html, directory_report
from common.render.text import Section, render_markdown, render_text, render_verdicts
from common.verdict import Verdict


def write_beside(root: Path, name: str, text: str) -> str:
    """Save ``name`` (report.md, report.html) beside the data; say so, or say why not (read-only input is fine)."""
    target = Path(root) / name
    try:
        target.write_text(text)
    except OSError as err:
        return f"({name} not written: {err.strerror} for {target})"
    return f"(written to {target})"


def write_lines_beside(root: Path, name: str, lines: Iterable[str]) -> str:
    """:func:`write_beside` for a text made line by line (each line and a newline written as it comes)."""
    target = Path(root) / name
    try:
        with target.open("w") as f:
            for line in lines:
                f.write(line + "\n")
    except OSError as err:
        return f"({name} not written: {err.strerror} for {target})"
    return f"(written to {target})"


def write_report_md(root: Path, markdown: str) -> str:
    return write_beside(root, "report.md", markdown)


@dataclass(frozen=True)
class WrittenReport:
    """A mode's report once written: its text, the 'written to' lines of report.md and report.html, the warnings
    (the run's and the calibration's) and the integrity checks."""

    text: str
    written: list[str]
    warnings: list[str]
    integrity: list[Verdict]


def write_reports(
    root: Path, verdicts: list[Verdict], notes: list[str] = (), warnings: list[str] = ()
) -> WrittenReport:
    """A mode's report (report.md and report.html beside the data) and what it said.

    The peaks are found once (a calibration on the portable backend) and serve both files; a
    calibration whose repeats spread widely adds its own 'disturbed' warning.
    """
    from common.collect.calibrate import calibration_disturbance

    root = Path(root)
    info, datasets = find_run_info(root), find_datasets(root)
    found = peaks_for(info, datasets, None)
    warnings = [
        *warnings,
        *([w] if found[1] == "calibrated" and (w := calibration_disturbance(recorded_count(info, "threads"))) else []),
    ]
    text, markdown, integrity = directory_report(root, verdicts, peaks=found, warnings=warnings, datasets=datasets)
    page = directory_html(
        root, verdicts, peaks=found, warnings=warnings, notes=notes, integrity=integrity, datasets=datasets
    )
    written = [
        write_report_md(root, markdown + "".join(note_markdown(note) for note in notes)),
        write_report_html(root, page),
    ]
    return WrittenReport(text, written, warnings, integrity)


def note_markdown(note: str) -> str:
    """A note below report.md: a line as it is, a block of several (a table) kept as printed."""
    return f"\n```\n{note}\n```\n" if "\n" in note else f"\n{note}\n"


@dataclass(frozen=True)
class Checked:
    """The datasets of a folder, read once, and their integrity checks (for a mode that renders its own report)."""

    datasets: list[Dataset]
    integrity: list[Verdict]


def own_integrity(root: Path) -> Checked:
    """Every dataset under ``root`` and its integrity checks: what write_own_report writes beside them."""
    datasets = find_datasets(Path(root))
    return Checked(datasets, integrity_verdicts(integrity_facts(datasets, Path(root))))


def write_own_report(
    root: Path, title: str, body: str, verdicts: list[Verdict], checked: Checked, out: Path | None = None
) -> tuple[str, list[str]]:
    """For a mode that renders its own report text (03's variant table): report.md (``body``, its checks, the
    integrity checks of ``checked``, own_integrity's) and report.html of the data under ``root``, into ``out``
    (default: beside the data), written once its run_info.json says how the run ended (the page shows that
    status). Returns (the integrity section's text, the 'written to' lines)."""
    root, integrity = Path(root), checked.integrity
    section = Section(
        "Integrity (the files of each export agree with each other)",
        lines=render_verdicts(integrity).splitlines() if integrity else [NOTHING_TO_CROSS_CHECK],
    )
    markdown = render_markdown(
        title,
        [
            Section("Report", lines=["```", *body.splitlines(), "```"]),
            Section("Checks", lines=render_verdicts(verdicts).splitlines()),
            section,
        ],
    )
    page = directory_html(root, verdicts, integrity=integrity, datasets=checked.datasets)
    target = Path(out) if out is not None else root
    written = [write_report_md(target, markdown), write_report_html(target, page)]
    return render_text("", [section]).strip(), written


def write_report_html(root: Path, page: str) -> str:
    return write_beside(root, "report.html", page)


# --- the cross-mode outputs ------------------------------------------------------------------------
def write_agree_outputs(out: Path, markdown: str, page: str) -> list[str]:
    """agree.md and report.html into ``out`` (a folder the lab owns); each mode wrote its own report.html."""
    out = prepare_output_dir(out)
    (out / "agree.md").write_text(markdown)
    (out / "report.html").write_text(page)
    lines = [f"(written to {out / 'agree.md'} and {out / 'report.html'})"]
    return lines
