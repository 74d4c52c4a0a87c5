"""The lab's output in the Ascend toolkit's own analysis tool, msprof-analyze, with matching numbers.

msprof-analyze (MindStudio Profiler Analyze, on PyPI, runs on a CPU) reads torch_npu output
directories. Here it is installed into an environment of its own (``.nox/ecosystem``, from
the ``ecosystem`` dependency group; the lab's environment never sees it), then

- ``msprof-analyze advisor all -d <dir>`` runs on the candidate (default: mode 04's output)
  and on the baseline (default: a real torch_npu capture, ``tests/fixtures/npu``);
- ``msprof-analyze compare -d <candidate> -bp <baseline>`` compares the two;
- the Computing and Free totals each of them reports are checked against the lab's own
  report of the same folder (its step table: step_trace_time.csv, or the trace_view.json
  Overlap Analysis events when that file is absent) and printed side by side.

    python -m common.cli.ecosystem [--candidate DIR] [--baseline DIR] [--output DIR]   (nox -s ecosystem)

Set ``MSPROF_ANALYZE=/path/to/msprof-analyze`` to use an installation of your own instead.
"""

from __future__ import annotations

import csv
import math
import os
import re
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

from common.collect import launcher
from common.environments import ensure_environment
from common.errors import LabError
from common.analyze.export_rounding import STEP_FIELDS, Rounding, text_rounding
from common.formats.cluster import MSA_OUTPUT, step_order
from common.formats.datasets import find_datasets
from common.formats.cluster_analysis_db import CLUSTER_ANALYSIS_DB, read_cluster_step_trace_time
from common.formats.records import StepTime
from common.formats.rundir import REPO_ROOT
from common.verdict import Verdict

GROUP = "ecosystem"  # the dependency group in pyproject.toml that pins msprof-analyze
ENV_DIR = REPO_ROOT / ".nox" / "ecosystem"
EXE_VAR = "MSPROF_ANALYZE"
INSTALL_TIMEOUT_S = 900
TOOL_TIMEOUT_S = 600
# The lab and msprof-analyze must agree within 1%. advisor prints times in ms with 3 decimals
# (compare's xlsx keeps every digit), so below 0.05 ms a 1% band is finer than what advisor
# prints: there half its last digit (0.0005 ms) is the tolerance instead.
REL_TOLERANCE = 0.01
PRINT_RESOLUTION_MS = 0.001


@dataclass(frozen=True)
class Totals:
    """Computing and Free over a whole profile, in ms."""

    computing_ms: float
    free_ms: float


# --- the tool -------------------------------------------------------------------------------------
def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def _run(argv: list[str], what: str, timeout: float, log_path: Path) -> tuple[int, str]:
    """Run under the lab's launcher (own session, group stopped on timeout, SIGINT, SIGTERM); (exit code, output).

    stdout and stderr both land in ``log_path`` (stderr first, then stdout) and are returned together. The tool
    runs in the log's folder: the advisor writes an operator_tuning_file_*.cfg into its working directory.
    """
    try:
        run = launcher.run_command(
            argv, {**os.environ, "PYTHONUNBUFFERED": "1"}, timeout, capture=True, stderr=log_path, cwd=log_path.parent
        )
    except FileNotFoundError:
        raise LabError(f"{what}: {argv[0]} not found", f"install msprof-analyze, or unset {EXE_VAR}") from None
    run.raise_if_stopped()  # Ctrl-C or SIGTERM: the tool was stopped with the lab
    output = log_path.read_text(errors="replace") + run.output
    log_path.write_text(output)
    if run.timed_out:
        raise LabError(f"{what}: no answer after {timeout:.0f} s", f"run it by hand to see where it hangs ({log_path})")
    return run.exit_code, output


def ensure_tool(log=print) -> Path:
    """The ``msprof-analyze`` executable: $MSPROF_ANALYZE, or the ecosystem environment (built when stale).

    The environment is built by the same function as the lab's own (common.environments), from
    the ``ecosystem`` group of pyproject.toml, on first use.
    """
    given = os.environ.get(EXE_VAR)
    if given:
        exe = Path(given)
        if not exe.is_file() or not os.access(exe, os.X_OK):
            raise LabError(f"{EXE_VAR}={given}: not an executable file", "point it at an msprof-analyze, or unset it")
        return exe
    ensure_environment(
        ENV_DIR,
        [GROUP],
        expect=("msprof-analyze",),
        log=log,
        timeout_s=INSTALL_TIMEOUT_S,
        fix=f"it comes from PyPI: check the network, or set {EXE_VAR} to one you installed; the modes do not need it",
    )
    return ENV_DIR / "bin" / "msprof-analyze"


def tool_version(exe: Path) -> str:
    """The installed msprof-analyze version, from the package metadata beside the executable."""
    python = exe.parent / "python"
    if not python.is_file():
        return "unknown version"
    with tempfile.TemporaryDirectory() as tmp:
        code, output = _run(
            [str(python), "-c", "import importlib.metadata as m; print(m.version('msprof-analyze'))"],
            "reading msprof-analyze's version",
            60,
            Path(tmp) / "version.log",
        )
    lines = output.strip().splitlines()
    return lines[-1] if code == 0 and lines else "unknown version"


def run_tool(exe: Path, args: list[str], log_path: Path) -> str:
    """Run ``msprof-analyze <args>`` (an argv list, no shell); its full output goes to ``log_path``."""
    code, output = _run([str(exe), *args], f"msprof-analyze {args[0]}", TOOL_TIMEOUT_S, log_path)
    if code != 0:
        raise LabError(
            f"msprof-analyze {' '.join(args[:2])} failed (exit {code}): {_last_line(output)}",
            f"its full output is in {log_path}",
        )
    return output


# --- reading what it reports ------------------------------------------------------------------------
# ===== The cluster view against msprof-analyze cluster ========================================
# When both read the same export (the text step_trace_time.csv, or every rank's database), msprof-analyze
# copies the values the lab read: they must agree to the last printed digit (µs with 3 decimals); any
# larger difference is a rank or step mapped differently. When the lab read the text export and the tool
# the analysis.db beside it, the text's own resolution is the tolerance (common.analyze.export_rounding).
CROSS_CHECK_ABS_US = 0.002
# cluster_step_trace_time.csv's step columns (msprof-analyze copies them from each rank's
# step_trace_time.csv) and the StepTime field each is compared with.
MSA_STEP_COLUMNS = STEP_FIELDS
COMPARED_COLUMNS = ("Computing", "Communication(Not Overlapped)", "Free")  # required in the tool's table


def _msa_step(text: str | None) -> int | None:
    """A Step cell of cluster_step_trace_time.csv: empty when the capture had no schedule."""
    text = (text or "").strip()
    if not text:
        return None
    value = float(text)
    if not value.is_integer():
        raise ValueError(text)
    return int(value)


CROSS_CHECK_NAME = "agrees with msprof-analyze cluster (cluster_step_trace_time.csv)"


CROSS_CHECK_DB_NAME = f"agrees with msprof-analyze cluster ({CLUSTER_ANALYSIS_DB} ClusterStepTraceTime)"


def compare_with_cluster_db(
    steps: dict[int, list[StepTime]], db_path: Path, name: str = CROSS_CHECK_DB_NAME, rounding: Rounding | None = None
) -> Verdict:
    """:func:`compare_with_msprof_analyze` against the ClusterStepTraceTime table msprof-analyze writes for db input;
    ``rounding``: the lab read the text export beside each database (:func:`text_rounding`), not the databases."""
    try:
        records = read_cluster_step_trace_time(db_path)
    except LabError as err:
        return Verdict(name, False, str(err))
    header = list(records[0]) if records else ["Step", "Type", "Index"]
    return compare_step_rows(
        steps, header, records, f"{db_path.name} ClusterStepTraceTime", name, head_line=1, rounding=rounding
    )


def compare_with_msprof_analyze(
    steps: dict[int, list[StepTime]], csv_path: Path, name: str = CROSS_CHECK_NAME
) -> Verdict:
    """Every ``rank`` row msprof-analyze wrote against this view's (rank, step) rows, every step column both have.

    Rows are matched by (Index, Step), an empty Step (no schedule) matching this view's empty Step;
    a row the tool wrote twice, a row it wrote and this view lacks (or the reverse), a cell that is
    not a number, or a value on one side only fails the check.
    """
    try:
        with csv_path.open(newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            header = list(reader.fieldnames or [])
            records = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        return Verdict(name, False, f"{csv_path.name} unreadable ({err})")
    return compare_step_rows(steps, header, records, csv_path.name, name)


def compare_step_rows(
    steps: dict[int, list[StepTime]],
    header: list[str],
    records: list[dict],
    source: str,
    name: str,
    head_line: int = 2,
    rounding: Rounding | None = None,
) -> Verdict:
    """The comparison itself, over rows under cluster_step_trace_time.csv's column names (``source`` names them;
    ``head_line``: the line or row number of the first record, for messages). Each value within
    :data:`CROSS_CHECK_ABS_US` (the same export read twice) or, given ``rounding``, within what the text
    export's resolution allows for its column."""
    missing = [c for c in ("Step", "Type", "Index", *COMPARED_COLUMNS) if c not in header]
    if missing:
        return Verdict(name, False, f"{source} has no column {', '.join(map(repr, missing))} (header {header})")
    theirs: dict[tuple[int, int | None], dict] = {}
    other_types: dict[str, int] = {}
    for line, row in enumerate(records, start=head_line):
        if row.get("Type") != "rank":
            other_types[str(row.get("Type"))] = other_types.get(str(row.get("Type")), 0) + 1
            continue
        try:
            key = (int(float(row["Index"])), _msa_step(row["Step"]))
        except (TypeError, ValueError, OverflowError):
            return Verdict(
                name,
                False,
                f"{source}:{line}: Index {row.get('Index')!r} / Step {row.get('Step')!r} is not a rank and a step",
            )
        if key in theirs:
            return Verdict(name, False, f"{source}:{line}: rank {key[0]} step {key[1]} written twice")
        theirs[key] = row
    ours = {(rank, s.step): s for rank, rows in steps.items() for s in rows}
    if set(theirs) != set(ours):

        def show(keys) -> str:
            listed = sorted(keys, key=lambda k: (k[0], step_order(k[1])))
            return f"{listed[:6]}{'...' if len(listed) > 6 else ''}"

        return Verdict(
            name,
            False,
            f"(rank, step) pairs differ: only ours {show(set(ours) - set(theirs))}, "
            f"only theirs {show(set(theirs) - set(ours))}",
        )
    columns = [c for c in MSA_STEP_COLUMNS if c in header]
    allowed = {c: rounding.tolerance_us(c) if rounding else CROSS_CHECK_ABS_US for c in columns}
    worst, where, compared, beyond = 0.0, "", 0, []
    for key, mine in ours.items():
        for column in columns:
            cell = (theirs[key][column] or "").strip()
            value = getattr(mine, MSA_STEP_COLUMNS[column])
            if not cell and value is None:
                continue
            if not cell or value is None:
                return Verdict(
                    name,
                    False,
                    f"rank {key[0]} step {key[1]} {column}: msprof-analyze "
                    f"{cell or 'empty'}, ours {'empty' if value is None else value}",
                )
            try:
                diff = abs(float(cell) - value)
            except ValueError:
                diff = math.nan
            if not math.isfinite(diff):
                return Verdict(
                    name, False, f"rank {key[0]} step {key[1]} {column}: msprof-analyze wrote {cell!r}, ours {value}"
                )
            compared += 1
            at = f"rank {key[0]} step {'(none)' if key[1] is None else key[1]} {column}"
            if diff >= worst:
                worst, where = diff, at
            if diff > allowed[column]:
                beyond.append(f"{at} by {diff:.4f} us")
    extra = f"; rows of other types not compared: {other_types}" if other_types else ""
    rule = f"{rounding.text()}" if rounding else f"tolerance {CROSS_CHECK_ABS_US} us (the same export read twice)"
    over = f"; beyond it: {', '.join(beyond[:3])}{' ...' if len(beyond) > 3 else ''}" if beyond and rounding else ""
    return Verdict(
        name,
        not beyond,
        f"{len(ours)} rank-steps x {', '.join(columns)} ({compared} values): largest difference {worst:.4f} us "
        f"({where}); {rule}{over}{extra}",
    )


NOT_ASKED = (
    "cross-check with msprof-analyze: not run (add --cross-check: it runs msprof-analyze cluster on the "
    f"same folder, installing it on first use or taking ${EXE_VAR}, and compares every step row)"
)


def cross_check(view) -> Verdict:
    """``msprof-analyze cluster -d <root> -m all``: its cluster_step_trace_time.csv (for database input, the
    ClusterStepTraceTime table of its cluster_analysis.db) vs this view.

    ``view``: a :class:`common.formats.cluster.ClusterView`. The tool is found (or installed) by
    :func:`ensure_tool`. Run only when asked: it takes several times the view's own time.
    """
    import shutil

    from common.formats.rundir import MARKER

    exe = ensure_tool()
    name = CROSS_CHECK_NAME
    keep = view.root / MSA_OUTPUT
    with tempfile.TemporaryDirectory(prefix="msprof_lab_cluster_") as tmp:
        log = Path(tmp) / "msprof_analyze.log"
        run_tool(exe, ["cluster", "-d", str(view.root.resolve()), "-m", "all", "-o", tmp], log)
        csv_path = Path(tmp) / MSA_OUTPUT / "cluster_step_trace_time.csv"
        db_path = Path(tmp) / MSA_OUTPUT / CLUSTER_ANALYSIS_DB
        if csv_path.is_file():
            verdict = compare_with_msprof_analyze(view.steps, csv_path, name)
        elif db_path.is_file():  # database input: the tool writes its tables into cluster_analysis.db
            # a rank with a text export beside its analysis.db: the lab read the text, the tool the database
            mixed = any(not p.dataset.is_db for p in view.ranks)
            verdict = compare_with_cluster_db(
                view.steps, db_path, rounding=text_rounding(view.steps) if mixed else None
            )
        else:
            return Verdict(
                name,
                False,
                f"msprof-analyze wrote neither {MSA_OUTPUT}/cluster_step_trace_time.csv nor "
                f"{MSA_OUTPUT}/{CLUSTER_ANALYSIS_DB}; last output: {log.read_text().strip().splitlines()[-1:]}",
            )
        if (view.root / MARKER).is_file():  # a lab output folder: keep the tool's output beside the data
            shutil.rmtree(keep, ignore_errors=True)
            shutil.copytree(Path(tmp) / MSA_OUTPUT, keep)
            shutil.copy(log, keep / "msprof_analyze.log")
    return verdict


def view_checks(view, cross: bool = False) -> tuple[list[Verdict], list[str]]:
    """The checks every cluster view gets: the step tables add up, and, with ``cross``, msprof-analyze agrees
    (without it, a note says how to ask). Returns (verdicts, notes)."""
    from common.analyze.cluster import check_step_sums

    verdicts = [check_step_sums(view)]
    return (verdicts + [cross_check(view)], []) if cross else (verdicts, [NOT_ASKED])


def _first_error(log_path: Path) -> str:
    """The first ``[ERROR]`` line msprof-analyze logged (it exits 0 on some failures), for a one-line message."""
    errors = [line.split("]", 3)[-1].strip() for line in log_path.read_text().splitlines() if "[ERROR]" in line]
    return f" (it logged: {errors[0]})" if errors else ""


_ADVISOR_TIME = re.compile(r"-- (Computing|Free) Time is ([0-9.]+)ms")


def advisor_totals(output: str, log_path: Path) -> Totals:
    """Computing/Free from the Overall Summary ``advisor all -l en`` prints."""
    found = dict(_ADVISOR_TIME.findall(output))
    if set(found) != {"Computing", "Free"}:
        raise LabError(
            f"msprof-analyze advisor printed no Overall Summary (Computing Time / Free Time){_first_error(log_path)}",
            f"it did not take the folder for torch_npu output; see {log_path}",
        )
    return Totals(float(found["Computing"]), float(found["Free"]))


_NS = {"m": "http://schemas.openxmlformats.org/spreadsheetml/2006/main"}
_REL = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"


def xlsx_rows(path: Path, sheet: str) -> list[dict[str, str]]:
    """The cells of one worksheet as rows of ``{column letter: text}`` (standard library only)."""
    try:
        with zipfile.ZipFile(path) as z:
            book = ElementTree.fromstring(z.read("xl/workbook.xml"))
            rels = ElementTree.fromstring(z.read("xl/_rels/workbook.xml.rels"))
            target = next(
                (
                    r.get("Target")
                    for s in book.iter(f"{{{_NS['m']}}}sheet")
                    if s.get("name") == sheet
                    for r in rels
                    if r.get("Id") == s.get(_REL)
                ),
                None,
            )
            if target is None:
                raise LabError(f"{path}: no sheet {sheet!r}", "the msprof-analyze version may differ; see its output")
            shared = []
            if "xl/sharedStrings.xml" in z.namelist():
                shared = [
                    "".join(t.text or "" for t in si.iter(f"{{{_NS['m']}}}t"))
                    for si in ElementTree.fromstring(z.read("xl/sharedStrings.xml")).findall("m:si", _NS)
                ]
            data = ElementTree.fromstring(z.read("xl/" + target.removeprefix("/xl/").removeprefix("xl/")))
    except (zipfile.BadZipFile, KeyError, ElementTree.ParseError) as err:
        raise LabError(f"{path}: not a readable xlsx ({err})", "re-run msprof-analyze compare") from None
    rows = []
    for row in data.iter(f"{{{_NS['m']}}}row"):
        cells = {}
        for c in row.findall("m:c", _NS):
            value = c.find("m:v", _NS)
            text = "" if value is None or value.text is None else value.text
            if c.get("t") == "s" and text:
                text = shared[int(text)]
            elif c.get("t") == "inlineStr":
                text = "".join(t.text or "" for t in c.iter(f"{{{_NS['m']}}}t"))
            cells[re.sub(r"\d", "", c.get("r", ""))] = text
        rows.append(cells)
    return rows


def xlsx_sheets(path: Path) -> list[str]:
    """The worksheet names of a workbook, in order (standard library only)."""
    try:
        with zipfile.ZipFile(path) as z:
            book = ElementTree.fromstring(z.read("xl/workbook.xml"))
    except (zipfile.BadZipFile, KeyError, ElementTree.ParseError) as err:
        raise LabError(f"{path}: not a readable xlsx ({err})", "run msprof-analyze advisor again") from None
    return [s.get("name") for s in book.iter(f"{{{_NS['m']}}}sheet")]


def compare_totals(out_dir: Path) -> tuple[Totals, Totals]:
    """(comparison, base) Computing/Free from the OverallMetrics sheet ``compare`` writes.

    ``-d`` is the comparison profiling (columns E..), ``-bp`` the base (columns B..), in ms.
    """
    found = sorted(out_dir.glob("performance_comparison_result_*.xlsx"))
    if not found:
        raise LabError(
            f"msprof-analyze compare wrote no performance_comparison_result_*.xlsx in {out_dir}"
            f"{_first_error(out_dir / 'compare.log')}",
            f"see {out_dir / 'compare.log'}",
        )
    by_name = {row.get("A", "").strip(): row for row in xlsx_rows(found[-1], "OverallMetrics")}
    try:
        return tuple(
            Totals(float(by_name["Computing Time"][col]), float(by_name["Free Time"][col])) for col in ("E", "B")
        )
    except (KeyError, ValueError):
        raise LabError(
            f"{found[-1]}: no Computing Time / Free Time in ms in OverallMetrics",
            "the msprof-analyze version may differ from the one checked; see compare.log",
        ) from None


# --- the lab's side --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Profile:
    """One torch_npu output folder as the tool takes it, with the lab's own totals for it."""

    label: str
    tool_dir: Path  # the *_ascend_pt folder (msprof-analyze recognises torch_npu output by that name)
    lab: Totals
    steps_source: str


def lab_profile(path: Path | str, label: str) -> Profile:
    """The single torch_npu dataset under ``path`` and the Computing/Free totals the lab's report gives it."""
    datasets = [ds for ds in find_datasets(path) if ds.kind == "torch_npu"]
    if len(datasets) != 1:
        raise LabError(
            f"{path}: {len(datasets)} torch_npu outputs found (ASCEND_PROFILER_OUTPUT/ folders)",
            "give a folder holding exactly one *_ascend_pt/ output",
        )
    ds = datasets[0]
    if not ds.steps:
        raise LabError(
            f"{ds.folder}: no step_trace_time.csv and no Overlap Analysis events in trace_view.json",
            "msprof-analyze reports Computing/Free from those; collect with torch_npu.profiler Level1",
        )
    tool_dir = ds.folder.parent if ds.folder.name == "ASCEND_PROFILER_OUTPUT" else ds.folder
    if not tool_dir.name.endswith("_ascend_pt"):
        raise LabError(
            f"{tool_dir}: not a *_ascend_pt folder", "msprof-analyze recognises torch_npu output by that name"
        )
    lab = Totals(sum(s.computing_us for s in ds.steps) / 1000, sum(s.free_us for s in ds.steps) / 1000)
    return Profile(label, tool_dir, lab, ds.steps_source)


def check_agreement(what: str, lab_ms: float, tool_ms: float, where: str) -> Verdict:
    """``tool_ms`` equals ``lab_ms`` within 1% (or half of advisor's 0.001 ms print resolution)."""
    allowed = max(REL_TOLERANCE * abs(lab_ms), PRINT_RESOLUTION_MS / 2)
    off = abs(tool_ms - lab_ms)
    rel = f"{100 * off / abs(lab_ms):.2f}%" if lab_ms else "n/a"
    return Verdict(
        f"{what} agrees ({where})",
        off <= allowed,
        f"lab {lab_ms:.4f} ms vs msprof-analyze {tool_ms:.4f} ms, off by {off:.4f} ms ({rel}; tolerance "
        f"{100 * REL_TOLERANCE:g}%, or {PRINT_RESOLUTION_MS / 2:g} ms where advisor rounds to {PRINT_RESOLUTION_MS:g} ms)",
    )
