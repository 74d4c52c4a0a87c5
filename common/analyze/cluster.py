"""The cluster view: every rank's step table side by side, the slow rank and why.

Input is what torch_npu writes for a torch.distributed job (and the portable backend copies):
one ``*_ascend_pt/`` per rank, named by its ``profiler_info_{rank}.json``, each with
``ASCEND_PROFILER_OUTPUT/step_trace_time.csv``. The same files are what
``msprof-analyze cluster`` reads, so its ``cluster_step_trace_time.csv`` can be compared
with this view number for number (:func:`cross_check`).

Why a slow rank is found this way: in synchronous data-parallel training every rank leaves
a step's all-reduce together, so all step times look alike. What differs is how a rank's step
is split. The rank with the most time of its own (Computing + Free: work, and host-side gaps)
is the one the others wait for, and their waiting shows up as *their* Communication(Not
Overlapped) growing. So: slowest = the largest Computing + Free; the reason is whichever of
the two exceeds the other ranks' median by more.
"""

from __future__ import annotations

import csv
import functools
import json
import math
import os
import re
import shutil
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

from common.analyze import step_bound
from common.analyze.checks import Verdict
from common.errors import LabError
from common.formats.datasets import Dataset, dataset_of
from common.formats.db import CLUSTER_ANALYSIS_DB, read_cluster_step_trace_time
from common.formats.records import CommOp, StepTime
from common.formats.rundir import MARKER, read_run_info, require_directory

PROFILER_INFO = re.compile(r"^profiler_info_(\d+)\.json$")
OUTPUT_SUBDIR = "ASCEND_PROFILER_OUTPUT"
MSA_OUTPUT = "cluster_analysis_output"
# A rank is called slow when its own time (Computing + Free) exceeds the other ranks' median by
# more than this share of the mean step: below it, run-to-run noise on a shared host is as large.
SLOW_RANK_MIN_SHARE = 0.20
# msprof-analyze re-reads the same step_trace_time.csv (µs with 3 decimals): the numbers must
# agree to the last printed digit; any larger difference is a rank or step mapped differently.
CROSS_CHECK_ABS_US = 0.002
# cluster_step_trace_time.csv's step columns (msprof-analyze copies them from each rank's
# step_trace_time.csv) and the StepTime field each is compared with.
MSA_STEP_COLUMNS = {
    "Computing": "computing_us", "Communication(Not Overlapped)": "communication_not_overlapped_us",
    "Overlapped": "overlapped_us", "Communication": "communication_us", "Free": "free_us", "Stage": "stage_us",
    "Bubble": "bubble_us", "Preparing": "preparing_us",
}
COMPARED_COLUMNS = ("Computing", "Communication(Not Overlapped)", "Free")  # required in the tool's table


@dataclass
class RankProfile:
    rank: int
    folder: Path  # the rank's *_ascend_pt
    info: dict  # its profiler_info_{rank}.json

    @functools.cached_property
    def dataset(self) -> Dataset:
        """The rank's export: the text files, or the database (torch_npu export_type=db) when there are none."""
        return dataset_of(self.folder / OUTPUT_SUBDIR) or Dataset("torch_npu", self.folder / OUTPUT_SUBDIR)

    @property
    def steps(self) -> list[StepTime]:
        return self.dataset.steps

    def communication(self) -> list[CommOp]:
        """The rank's collectives from its database's COMMUNICATION_OP (empty for a text export: see communication.json)."""
        return self.dataset.profiler_db.communication() if self.dataset.is_db else []


@dataclass
class ClusterView:
    root: Path
    ranks: list[RankProfile]
    run_info: dict | None
    steps: dict[int, list[StepTime]]  # rank -> its step rows


@dataclass(frozen=True)
class RankSummary:
    """One rank's mean step (µs)."""

    rank: int
    computing_us: float
    comm_not_overlapped_us: float
    communication_us: float
    free_us: float
    step_us: float

    @property
    def own_us(self) -> float:
        return self.computing_us + self.free_us


@dataclass(frozen=True)
class SlowRank:
    rank: int | None  # None: no rank stands out
    reason: str | None  # "computing" | "free" | None
    text: str


def _rank_dirs(root: Path) -> dict[int, list[Path]]:
    found: dict[int, list[Path]] = {}
    for path in sorted(root.rglob("profiler_info_*.json")):
        if MSA_OUTPUT in path.parts or not (m := PROFILER_INFO.match(path.name)):
            continue
        found.setdefault(int(m[1]), []).append(path.parent)
    return found


def _step_order(step: int | None) -> tuple[bool, int]:
    """Sort key of a Step: an empty Step (a capture without a schedule: one whole-trace row) first."""
    return (step is not None, step or 0)


def _steps_of(rows: list[StepTime]) -> list[int | None]:
    return sorted((s.step for s in rows), key=_step_order)


def _ranges(steps: list[int | None]) -> str:
    if any(s is None for s in steps):
        return f"{steps} (an empty Step: no schedule)"
    return f"{steps[0]}..{steps[-1]}" if steps and steps == list(range(steps[0], steps[-1] + 1)) else str(steps)


def load_cluster(root: Path | str) -> ClusterView:
    """Every rank's profile under ``root``; refuses mixed, incomplete or missing ranks with one line."""
    root = Path(root)
    require_directory(root, "give the prof_out_ddp/ of run_ddp.sh or a folder of rank outputs")
    run_info = read_run_info(root)
    if run_info is not None and not run_info.get("completed"):
        reason = (run_info.get("failure") or {}).get("reason", "it did not finish")
        raise LabError(f"{root}: the run is INCOMPLETE ({reason})", "fix the failing rank and run it again")
    found = _rank_dirs(root)
    if not found:
        raise LabError(
            f"{root}: no per-rank profiles (*_ascend_pt/profiler_info_<rank>.json)",
            "give the output of a multi-rank run, e.g. 04_pyTorch/prof_out_ddp",
        )
    doubled = {r: dirs for r, dirs in found.items() if len(dirs) > 1}
    if doubled:
        r, dirs = next(iter(sorted(doubled.items())))
        raise LabError(
            f"{root}: rank {r} has {len(dirs)} profiles ({', '.join(str(d.relative_to(root)) for d in dirs)}): "
            "outputs of different runs are mixed",
            "keep exactly one folder per rank, all from one run",
        )
    world = int(run_info["world_size"]) if run_info and run_info.get("world_size") else max(found) + 1
    missing = [r for r in range(world) if r not in found]
    extra = [r for r in found if r >= world]
    if missing or extra:
        what = (
            f"rank(s) {', '.join(map(str, missing))} missing"
            if missing
            else f"rank(s) {', '.join(map(str, extra))} beyond the world size"
        )
        raise LabError(
            f"{root}: {what} (found {', '.join(map(str, sorted(found)))}; world size {world})",
            "every rank of one run must be present; re-run, or copy the missing rank's *_ascend_pt here",
        )
    ranks = []
    for r in sorted(found):
        folder = found[r][0]
        try:
            info = json.loads((folder / f"profiler_info_{r}.json").read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise LabError(
                f"{folder}/profiler_info_{r}.json: unreadable ({err})", "the rank's output is damaged"
            ) from None
        ranks.append(RankProfile(r, folder, info if isinstance(info, dict) else {}))
    launches = {p.rank: str(p.info.get("launch_id")) for p in ranks}  # written by the lab's portable ranks
    first = ranks[0].rank
    odd = next((r for r, v in launches.items() if v != launches[first]), None)
    if odd is not None:
        raise LabError(
            f"{root}: ranks come from different runs (rank {first}: launch {launches[first][:8]}, "
            f"rank {odd}: launch {launches[odd][:8]})",
            "compare the ranks of one run only",
        )
    steps = {p.rank: p.steps for p in ranks}
    reference = _steps_of(steps[ranks[0].rank])
    for p in ranks[1:]:
        mine = _steps_of(steps[p.rank])
        if mine != reference:
            raise LabError(
                f"{root}: rank {p.rank} recorded steps {_ranges(mine)} "
                f"but rank {ranks[0].rank} recorded {_ranges(reference)}",
                "the ranks are not from one run with one schedule",
            )
    if not reference:
        raise LabError(
            f"{ranks[0].folder}: no steps ({ranks[0].dataset.steps_source})",
            "profile with a schedule so steps are recorded"
        )
    return ClusterView(root, ranks, run_info, steps)


def rank_summaries(view: ClusterView) -> list[RankSummary]:
    out = []
    for rank, rows in sorted(view.steps.items()):
        out.append(
            RankSummary(
                rank=rank,
                computing_us=statistics.fmean(s.computing_us for s in rows),
                comm_not_overlapped_us=statistics.fmean(s.communication_not_overlapped_us for s in rows),
                communication_us=statistics.fmean(s.communication_us for s in rows),
                free_us=statistics.fmean(s.free_us for s in rows),
                step_us=statistics.fmean(s.total_us for s in rows),
            )
        )
    return out


@dataclass(frozen=True)
class Gap:
    """The largest difference of Computing + Free between two ranks (µs), and where."""

    us: float
    high: int  # the rank with more
    low: int
    step: int | None = None  # None: of the mean step (or the one whole-trace row)


def mean_gap(summaries: list[RankSummary]) -> Gap:
    """Largest minus smallest mean Computing + Free over the ranks."""
    high = max(summaries, key=lambda s: s.own_us)
    low = min(summaries, key=lambda s: s.own_us)
    return Gap(high.own_us - low.own_us, high.rank, low.rank)


def step_gap(steps: dict[int, list[StepTime]]) -> Gap | None:
    """The largest Computing + Free difference between two ranks within one step, over every step."""
    own: dict[int | None, dict[int, float]] = {}
    for rank, rows in steps.items():
        for s in rows:
            own.setdefault(s.step, {})[rank] = s.computing_us + s.free_us
    best = None
    for step in sorted(own, key=_step_order):
        per_rank = own[step]
        if len(per_rank) < 2:
            continue
        high, low = max(per_rank, key=per_rank.get), min(per_rank, key=per_rank.get)
        gap = Gap(per_rank[high] - per_rank[low], high, low, step)
        if best is None or gap.us > best.us:
            best = gap
    return best


def find_slow_rank(summaries: list[RankSummary], steps: dict[int, list[StepTime]] | None = None) -> SlowRank:
    """The rank the others wait for, and why (see the module docstring); ``steps`` adds the per-step gap."""
    if len(summaries) < 2:
        return SlowRank(None, None, "one rank: nothing to compare it with")
    slowest = max(summaries, key=lambda s: s.own_us)
    others = [s for s in summaries if s.rank != slowest.rank]
    own_median = statistics.median(s.own_us for s in others)
    step = statistics.fmean(s.step_us for s in summaries)
    excess = slowest.own_us - own_median
    wait_median = statistics.median(s.comm_not_overlapped_us for s in others)
    if excess < SLOW_RANK_MIN_SHARE * step:
        spread = mean_gap(summaries)
        single = step_gap(steps) if steps else None
        median = (f"; rank {slowest.rank} exceeds the other ranks' median by {excess:,.1f} us"
                  if len(summaries) > 2 else "")
        where = ""
        if single is not None and len({s.step for rows in steps.values() for s in rows}) > 1:
            where = (f"; within one step they differ by at most {single.us:,.1f} us "
                     f"(step {single.step}: rank {single.high} vs rank {single.low})")
        return SlowRank(
            None,
            None,
            (
                f"no slow rank: mean Computing + Free differ by at most {spread.us:,.1f} us between ranks "
                f"(rank {spread.high} vs rank {spread.low}){median}, under {100 * SLOW_RANK_MIN_SHARE:.0f}% of "
                f"the {step:,.1f} us mean step{where}"
            ),
        )
    d_compute = slowest.computing_us - statistics.median(s.computing_us for s in others)
    d_free = slowest.free_us - statistics.median(s.free_us for s in others)
    if d_compute >= d_free:
        reason, what = (
            "computing",
            (
                f"longest compute: Computing {slowest.computing_us:,.1f} us "
                f"vs {slowest.computing_us - d_compute:,.1f} us "
                f"(median of the other ranks)"
            ),
        )
    else:
        reason, what = (
            "free",
            (
                f"longest wait on its own host (Free: Python, data loading, dispatch): {slowest.free_us:,.1f} us vs "
                f"{slowest.free_us - d_free:,.1f} us (median of the other ranks)"
            ),
        )
    return SlowRank(
        slowest.rank,
        reason,
        (
            f"slowest rank: {slowest.rank} — {what}. The others wait for it in the collective: their "
            f"Communication(Not Overlapped) is {wait_median:,.1f} us "
            f"vs {slowest.comm_not_overlapped_us:,.1f} us on rank "
            f"{slowest.rank}"
        ),
    )


@dataclass(frozen=True)
class Arrivals:
    """Who reached each collective last, from the ranks' communication.json ``Start Timestamp(us)``."""

    collectives: int  # matched on every rank
    last: dict[int, int]  # rank -> collectives it started last
    wait_us: dict[int, float]  # rank -> mean over the collectives of (last rank's start - its own start)
    source: str = "communication.json"

    def text(self) -> str:
        order = sorted(self.last, key=lambda r: -self.last[r])
        waits = ", ".join(f"rank {r} {self.wait_us[r]:,.1f} us" for r in sorted(self.wait_us))
        return (
            f"arrival at the collectives ({self.source}): rank {order[0]} started {self.last[order[0]]} of "
            f"{self.collectives} last; mean wait for the last rank per collective: {waits}"
        )


TOTAL_OP_INFO = "Total Op Info"  # torch_npu's per-step sum inside "collective"; not a collective itself


def collectives_of(step: dict) -> dict:
    """A communication.json step's collectives, without torch_npu's ``Total Op Info`` summary entry."""
    return {name: op for name, op in (step.get("collective") or {}).items() if name != TOTAL_OP_INFO}


def collective_arrivals(view: ClusterView) -> Arrivals | None:
    """Per collective, the rank that started it last and how long each rank waited for that one.

    The same collective has the same name on every rank (``<op>_<step>_<k>@<group>``). Start
    times are comparable when the ranks share a clock: one host, or NPUs whose timestamps
    torch_npu aligns. None when a rank has no communication.json.
    """
    starts: dict[str, dict[int, float]] = {}
    sources = set()
    for p in view.ranks:
        if p.dataset.is_db:  # a database export: COMMUNICATION_OP, one row per collective
            sources.add("COMMUNICATION_OP")
            for name, start in rank_collectives(p).items():
                starts.setdefault(name, {})[p.rank] = start
            continue
        sources.add("communication.json")
        path = p.folder / OUTPUT_SUBDIR / "communication.json"
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            return None
        for step, kinds in data.items():
            for name, op in collectives_of(kinds).items():
                start = (op.get("Communication Time Info") or {}).get("Start Timestamp(us)")
                if start is not None:
                    starts.setdefault(f"{step}/{name}", {})[p.rank] = float(start)
    ranks = [p.rank for p in view.ranks]
    matched = {k: v for k, v in starts.items() if len(v) == len(ranks)}
    if not matched or len(ranks) < 2:
        return None
    last = dict.fromkeys(ranks, 0)
    waited = dict.fromkeys(ranks, 0.0)
    for per_rank in matched.values():
        latest = max(per_rank.values())
        last[max(per_rank, key=per_rank.get)] += 1
        for rank, start in per_rank.items():
            waited[rank] += latest - start
    return Arrivals(len(matched), last, {r: w / len(matched) for r, w in waited.items()}, " and ".join(sorted(sources)))


def rank_collectives(p: RankProfile) -> dict[str, float]:
    """A database rank's collectives, ``<step>/<op name>@<group>`` -> start (µs), as communication.json names them."""
    return {f"{'' if op.step_id is None else op.step_id}/{op.op_name}@{op.group or ''}": op.start_us
            for op in p.communication()}


def check_step_sums(view: ClusterView, tolerance: float = 0.01) -> Verdict:
    """Computing + Communication(Not Overlapped) + Free = the step (Stage) on every rank and step."""
    worst = 0.0
    for rows in view.steps.values():
        for s in rows:
            if s.stage_us:
                worst = max(worst, abs(s.total_us + s.bubble_us - s.stage_us) / s.stage_us)
    return Verdict(
        "step table adds up (every rank)",
        worst <= tolerance,
        f"|Computing + Communication(Not Overlapped) + Free - Stage| <= {100 * worst:.3f}% of the step "
        f"(tolerance {100 * tolerance:.0f}%)",
    )


def installed_msprof_analyze() -> Path | None:
    """msprof-analyze as :mod:`common.collect.msprof_analyze` installs it ($MSPROF_ANALYZE, or its environment), if present."""
    from common.collect import msprof_analyze

    given = os.environ.get(msprof_analyze.EXE_VAR)
    exe = Path(given) if given else msprof_analyze.ENV_DIR / "bin" / "msprof-analyze"
    return exe if exe.is_file() and os.access(exe, os.X_OK) else None


def cross_check(view: ClusterView, install: bool = False) -> Verdict | str:
    """``msprof-analyze cluster -d <root> -m all``: its cluster_step_trace_time.csv (for database input, the
    ClusterStepTraceTime table of its cluster_analysis.db) vs this view.

    The tool is found (or, with ``install``, installed) by :mod:`common.collect.msprof_analyze`. Without it,
    returns the line saying the cross-check was skipped and how to get it.
    """
    from common.collect import msprof_analyze

    exe = msprof_analyze.ensure_tool() if install else installed_msprof_analyze()
    if exe is None:
        return (
            "cross-check with msprof-analyze skipped: not installed (`nox -s ddp` installs it, or "
            f"`python -m common cluster <dir> --cross-check`; or set {msprof_analyze.EXE_VAR}=/path/to/msprof-analyze)"
        )
    name = CROSS_CHECK_NAME
    keep = view.root / MSA_OUTPUT
    with tempfile.TemporaryDirectory(prefix="msprof_lab_cluster_") as tmp:
        log = Path(tmp) / "msprof_analyze.log"
        msprof_analyze.run_tool(exe, ["cluster", "-d", str(view.root.resolve()), "-m", "all", "-o", tmp], log)
        csv_path = Path(tmp) / MSA_OUTPUT / "cluster_step_trace_time.csv"
        db_path = Path(tmp) / MSA_OUTPUT / CLUSTER_ANALYSIS_DB
        if csv_path.is_file():
            verdict = compare_with_msprof_analyze(view.steps, csv_path, name)
        elif db_path.is_file():  # database input: the tool writes its tables into cluster_analysis.db
            verdict = compare_with_cluster_db(view.steps, db_path)
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


def compare_with_cluster_db(steps: dict[int, list[StepTime]], db_path: Path,
                            name: str = CROSS_CHECK_DB_NAME) -> Verdict:
    """:func:`compare_with_msprof_analyze` against the ClusterStepTraceTime table msprof-analyze writes for db input."""
    try:
        records = read_cluster_step_trace_time(db_path)
    except LabError as err:
        return Verdict(name, False, str(err))
    header = list(records[0]) if records else ["Step", "Type", "Index"]
    return compare_step_rows(steps, header, records, f"{db_path.name} ClusterStepTraceTime", name, head_line=1)


def compare_with_msprof_analyze(steps: dict[int, list[StepTime]], csv_path: Path,
                                name: str = CROSS_CHECK_NAME) -> Verdict:
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


def compare_step_rows(steps: dict[int, list[StepTime]], header: list[str], records: list[dict], source: str,
                      name: str, head_line: int = 2) -> Verdict:
    """The comparison itself, over rows under cluster_step_trace_time.csv's column names (``source`` names them;
    ``head_line``: the line or row number of the first record, for messages)."""
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
            return Verdict(name, False, f"{source}:{line}: Index {row.get('Index')!r} / Step "
                                        f"{row.get('Step')!r} is not a rank and a step")
        if key in theirs:
            return Verdict(name, False, f"{source}:{line}: rank {key[0]} step {key[1]} written twice")
        theirs[key] = row
    ours = {(rank, s.step): s for rank, rows in steps.items() for s in rows}
    if set(theirs) != set(ours):
        def show(keys) -> str:
            listed = sorted(keys, key=lambda k: (k[0], _step_order(k[1])))
            return f"{listed[:6]}{'...' if len(listed) > 6 else ''}"
        return Verdict(name, False, f"(rank, step) pairs differ: only ours {show(set(ours) - set(theirs))}, "
                                    f"only theirs {show(set(theirs) - set(ours))}")
    columns = [c for c in MSA_STEP_COLUMNS if c in header]
    worst, where, compared = 0.0, "", 0
    for key, mine in ours.items():
        for column in columns:
            cell = (theirs[key][column] or "").strip()
            value = getattr(mine, MSA_STEP_COLUMNS[column])
            if not cell and value is None:
                continue
            if not cell or value is None:
                return Verdict(name, False, f"rank {key[0]} step {key[1]} {column}: msprof-analyze "
                                            f"{cell or 'empty'}, ours {'empty' if value is None else value}")
            try:
                diff = abs(float(cell) - value)
            except ValueError:
                diff = math.nan
            if not math.isfinite(diff):
                return Verdict(name, False, f"rank {key[0]} step {key[1]} {column}: msprof-analyze wrote {cell!r}, "
                                            f"ours {value}")
            compared += 1
            if diff >= worst:
                worst, where = diff, f"rank {key[0]} step {'(none)' if key[1] is None else key[1]} {column}"
    extra = f"; rows of other types not compared: {other_types}" if other_types else ""
    return Verdict(
        name,
        worst <= CROSS_CHECK_ABS_US,
        f"{len(ours)} rank-steps x {', '.join(columns)} ({compared} values): largest difference {worst:.4f} us "
        f"({where}); tolerance {CROSS_CHECK_ABS_US} us{extra}",
    )


def view_checks(view: ClusterView, install: bool = False) -> tuple[list[Verdict], list[str]]:
    """The checks every cluster view gets: the step tables add up, and msprof-analyze agrees
    (when it is installed; otherwise a note says it was skipped). Returns (verdicts, notes)."""
    verdicts = [check_step_sums(view)]
    crossed = cross_check(view, install)
    if isinstance(crossed, str):
        return verdicts, [crossed]
    return verdicts + [crossed], []


def _mean_kind(s: RankSummary) -> str:
    kind, parts, _ = step_bound.classify(s.computing_us, s.comm_not_overlapped_us, s.free_us)
    return f"mixed ({' + '.join(parts)})" if kind == "mixed" else kind


def cluster_step_lines(view: ClusterView) -> list[str]:
    """The step verdict over every rank's steps, with its hypothesis, what to try and the evidence."""
    from common.analyze import bounds

    summary = step_bound.summarize_steps([s for rows in view.steps.values() for s in rows])
    if summary is None:
        return []
    verdict = step_bound.step_verdict(summary)
    if verdict.kind in ("host-bound", "compute-bound"):
        hint = bounds.run_hint(summary, None, None) + step_bound.preparing_note(summary)
    else:
        hint = step_bound.advice(summary, verdict)
    return [verdict.text, *hint]


def render_cluster(view: ClusterView, verdicts: list[Verdict] | None = None, notes: list[str] | None = None) -> str:
    """The cluster view as text: per step and rank, per rank means, the slow-rank verdict, checks."""
    from common.render.text import Section, render_text, render_verdicts, run_info_line

    per_step = [
        [s.step, rank, s.computing_us, s.communication_not_overlapped_us, s.overlapped_us, s.free_us, s.total_us,
         step_bound.step_kind(s)]
        for step in sorted({s.step for rows in view.steps.values() for s in rows}, key=_step_order)
        for rank, rows in sorted(view.steps.items())
        for s in rows
        if s.step == step
    ]
    summaries = rank_summaries(view)
    slow = find_slow_rank(summaries, view.steps)
    arrivals = collective_arrivals(view)
    means = [
        [
            s.rank,
            s.computing_us,
            s.comm_not_overlapped_us,
            s.communication_us,
            s.free_us,
            s.step_us,
            100 * s.comm_not_overlapped_us / s.step_us if s.step_us else 0.0,
            _mean_kind(s),
        ]
        for s in summaries
    ]
    head = [
        run_info_line(view.run_info)
        if view.run_info
        else "backend: unknown (no run_info.json: collected outside the lab)",
        f"ranks: {len(view.ranks)} ({', '.join(p.folder.name for p in view.ranks[:2])}"
        f"{', ...' if len(view.ranks) > 2 else ''})",
    ]
    sections = [
        Section("Cluster", lines=head),
        Section(
            "Per step and rank (us)",
            header=["Step", "Rank", "Computing", "Comm(Not Overlapped)", "Overlapped", "Free", "Step", "Bound"],
            rows=per_step,
        ),
        Section("What bounds the step (every rank's steps)", lines=cluster_step_lines(view)),
        Section(
            "Per rank, mean of the steps (us)",
            lines=[slow.text] + ([arrivals.text()] if arrivals else []),
            header=["Rank", "Computing", "Comm(Not Overlapped)", "Communication", "Free", "Step", "Comm wait(%)",
                    "Bound"],
            rows=means,
        ),
    ]
    lines = list(notes or [])
    if verdicts:
        lines += render_verdicts(verdicts).splitlines()
    if lines:
        sections.append(Section("Checks", lines=lines))
    return render_text(f"msprof lab cluster view: {view.root}", sections)
