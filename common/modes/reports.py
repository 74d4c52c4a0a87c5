"""The report of an output folder: find its exports, read each into a record, find the peaks (a calibration on the
portable backend) and the integrity checks, and hand them to common.render.directory.

Shared by ``python -m common report`` and every mode's harness; :mod:`common.modes.report_files` writes the result
(report.md / report.html beside the data).
"""

from __future__ import annotations

from pathlib import Path

from common.analyze.bounds.op import Peaks
from common.analyze.checks import integrity_verdicts
from common.collect.calibrate import peaks_for
from common.formats.datasets import Dataset, find_datasets, find_run_info
from common.formats.export_facts import integrity_facts
from common.formats.report_input import export_record
from common.render.directory import folder_report
from common.render.report import Report
from common.verdict import Verdict


def directory_report(
    root: Path | str,
    verdicts: list[Verdict] | None = None,
    soc: str | None = None,
    bottlenecks: bool = True,
    peaks: tuple[Peaks | None, str] | None = None,
    warnings: list[str] = (),
    datasets: list[Dataset] | None = None,
    name: str | None = None,
    notes: list[str] = (),
    body: str = "",
    integrity: list[Verdict] | None = None,
    damaged: list[str] = (),
) -> tuple[Report, list[Verdict]]:
    """The report of everything under ``root``, with a mode's checks if given: (the report, its integrity checks).

    The integrity checks of every dataset (common.analyze.checks.integrity_verdicts) are shown in their own
    section and returned apart, so a caller counts them in its exit status (``integrity``: those checks, when
    the caller has them already). ``datasets``: those of ``root`` when the caller has found them already;
    ``peaks``: as :func:`common.collect.calibrate.peaks_for` returns them, when found already (``bottlenecks``
    false: no bottleneck sections, no peaks); ``name``: the input, when ``root`` is its converted copy; the rest
    as :func:`common.render.directory.folder_report` takes them.
    """
    root = Path(root)
    datasets = find_datasets(root) if datasets is None else datasets
    info = find_run_info(root)
    records = [export_record(ds, root) for ds in datasets]
    if bottlenecks and peaks is None:
        peaks = peaks_for(info, datasets, soc)
    if integrity is None:
        integrity = integrity_verdicts(integrity_facts(datasets, root))
    report = folder_report(
        f"msprof lab report: {name or root}",
        records,
        info,
        verdicts=verdicts or [],
        integrity=integrity,
        peaks=peaks if bottlenecks else None,
        warnings=warnings,
        notes=notes,
        body=body,
        damaged=damaged,
        page_title=f"msprof lab report: {name or Path(root.parent.name, root.name)}",  # a browser tab: 01_cmdline/prof_out
    )
    return report, integrity
