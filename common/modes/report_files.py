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
from common.modes.reports import directory_report
from common.render.directory import INTEGRITY
from common.render.html import report_page
from common.render.report import Report
from common.render.text import render_markdown, render_text, section_lines
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


def write_report_files(out: Path, report: Report, name: str = "report") -> list[str]:
    """``name``.md and ``name``.html of ``report`` into ``out``: the 'written to' line of each (or why not)."""
    return [
        write_beside(out, f"{name}.md", render_markdown(report)),
        write_beside(out, f"{name}.html", report_page(report)),
    ]


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

    The peaks are found once (a calibration on the portable backend); a calibration whose repeats spread
    widely adds its own 'disturbed' warning.
    """
    from common.collect.calibrate import calibration_disturbance

    root = Path(root)
    info, datasets = find_run_info(root), find_datasets(root)
    found = peaks_for(info, datasets, None)
    warnings = [
        *warnings,
        *([w] if found[1] == "calibrated" and (w := calibration_disturbance(recorded_count(info, "threads"))) else []),
    ]
    report, integrity = directory_report(root, verdicts, peaks=found, warnings=warnings, datasets=datasets, notes=notes)
    return WrittenReport(render_text(report), write_report_files(root, report), warnings, integrity)


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
    root: Path, body: str, verdicts: list[Verdict], checked: Checked, out: Path | None = None
) -> tuple[str, list[str]]:
    """For a mode that renders its own report text (03's variant table): report.md and report.html of the data
    under ``root`` with ``body`` first, into ``out`` (default: beside the data), written once its run_info.json
    says how the run ended (the page shows that status). ``checked``: own_integrity's. Returns (the integrity
    section's text, the 'written to' lines)."""
    report, _ = directory_report(root, verdicts, datasets=checked.datasets, integrity=checked.integrity, body=body)
    (integrity,) = ("\n".join(section_lines(s)) for s in report.sections if s.title == INTEGRITY)
    return integrity, write_report_files(Path(out) if out is not None else Path(root), report)


# --- the cross-mode outputs ------------------------------------------------------------------------
def write_agree_outputs(out: Path, report: Report) -> list[str]:
    """agree.md and report.html into ``out`` (a folder the lab owns); each mode wrote its own report.html."""
    out = prepare_output_dir(out)
    (out / "agree.md").write_text(render_markdown(report))
    (out / "report.html").write_text(report_page(report))
    lines = [f"(written to {out / 'agree.md'} and {out / 'report.html'})"]
    return lines
