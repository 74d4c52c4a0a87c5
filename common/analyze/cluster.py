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
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from common.analyze import communication
from common.analyze.bounds import step as step_bound
from common.errors import LabError
from common.formats.communication import (CommTiming, MatrixLink, collectives_of, group_members,
                                          read_rank_communication, read_rank_matrix)
from common.formats.datasets import Dataset, dataset_of
from common.formats.cluster_analysis_db import CLUSTER_ANALYSIS_DB, read_cluster_step_trace_time
from common.formats.metadata import RankMetadata, read_rank_metadata
from common.formats.records import CommOp, StepTime
from common.formats.rundir import read_run_info, require_directory
from common.verdict import Verdict

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

    @functools.cached_property
    def metadata(self) -> RankMetadata | None:
        """Its parallel layout (profiler_metadata.json, or the database's META_DATA); None when not recorded."""
        return read_rank_metadata(self.folder, self.dataset.db if self.dataset.is_db else None)

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
    largest: tuple[str, int, float] | None = None  # (collective, the rank that started it last, by how much µs)

    def text(self) -> str:
        """Who kept the others waiting longest (by time, not by how often a rank was last by a few µs)."""
        waits = ", ".join(f"rank {r} {self.wait_us[r]:,.1f} us" for r in sorted(self.wait_us))
        counts = ", ".join(f"rank {r} {n}" for r, n in sorted(self.last.items()))
        head = (f"arrival at the collectives ({self.source}): the largest gap is {self.largest[0]}, which rank "
                f"{self.largest[1]} started {self.largest[2]:,.1f} us after the first rank; "
                if self.largest else f"arrival at the collectives ({self.source}): ")
        return (f"{head}mean wait for the last rank per collective: {waits}; started last (of {self.collectives}): "
                f"{counts}")


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
    largest = None
    for name, per_rank in matched.items():
        latest = max(per_rank.values())
        late = max(per_rank, key=per_rank.get)
        last[late] += 1
        gap = latest - min(per_rank.values())
        if largest is None or gap > largest[2]:
            largest = (name.partition("/")[2].partition("@")[0], late, gap)
        for rank, start in per_rank.items():
            waited[rank] += latest - start
    return Arrivals(len(matched), last, {r: w / len(matched) for r, w in waited.items()}, " and ".join(sorted(sources)),
                    largest)


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


def _mean_kind(s: RankSummary) -> str:
    kind, parts, _ = step_bound.classify(s.computing_us, s.comm_not_overlapped_us, s.free_us)
    return f"mixed ({' + '.join(parts)})" if kind == "mixed" else kind


def cluster_step_lines(view: ClusterView) -> list[str]:
    """The step verdict over every rank's steps, with its hypothesis, what to try and the evidence."""
    from common.analyze.bounds import op as bounds

    summary = step_bound.summarize_steps([s for rows in view.steps.values() for s in rows])
    if summary is None:
        return []
    verdict = step_bound.step_verdict(summary)
    if verdict.kind in ("host-bound", "compute-bound"):
        hint = bounds.run_hint(summary, None, None) + step_bound.preparing_note(summary)
    else:
        hint = step_bound.advice(summary, verdict)
    return [verdict.text, *hint]


@dataclass
class Communication:
    """Every rank's ops as its communication analysis splits them, and the groups its link matrix names."""

    per_rank: dict[int, list[CommTiming]]
    source: str
    links: dict[int, list[MatrixLink]]
    notes: list[str] = field(default_factory=list)  # a rank whose files could not be read, and what was lost

    @property
    def groups(self) -> dict[str, set[int]]:
        return group_members([link for rows in self.links.values() for link in rows])


def rank_communication(view: ClusterView) -> Communication | None:
    """communication.json / communication_matrix.json (text) or analysis.db (database) of every rank.

    A rank whose files are damaged is left out with a note; None when no rank has them.
    """
    per_rank: dict[int, list[CommTiming]] = {}
    links: dict[int, list[MatrixLink]] = {}
    sources, notes = set(), []
    for p in view.ranks:
        out = p.folder / OUTPUT_SUBDIR
        try:
            found = read_rank_communication(out)
            if found is None:
                continue
            per_rank[p.rank], source = found
            sources.add(source)
            links[p.rank] = read_rank_matrix(out)
        except LabError as err:
            notes.append(f"rank {p.rank}: communication analysis not read: {err.what}")
    if not per_rank and not notes:
        return None
    return Communication(per_rank, " and ".join(sorted(sources)) or "none", links, notes)


def _uncaptured_text(comm: Communication) -> str:
    """The ranks of a group that the link matrix names but the capture does not hold."""
    captured = set(comm.per_rank)
    parts = []
    for group, members in sorted(comm.groups.items()):
        missing = sorted(members - captured)
        if missing:
            parts.append(f"group {group[-6:]} has {len(members)} ranks ({min(members)}..{max(members)}, "
                         f"communication matrix), this capture holds {len(members & captured)} "
                         f"({', '.join(map(str, sorted(members & captured)))}): a rank that is not here cannot "
                         "be named, and one of them can be the late peer")
    return "; ".join(parts)


def _ratio_word(ratio: float) -> str:
    high = communication.WAIT_RATIO_HIGH
    return f"above {high:g}: it waits for a peer" if ratio > high else f"at most {high:g}: little waiting"


def communication_lines(comm: Communication) -> tuple[communication.CommVerdict, list[str]]:
    """The communication verdict and the lines around it: per rank split, links, uncaptured ranks, notes."""
    verdict = communication.step_verdict(comm.per_rank, comm.source)
    lines = [verdict.text]
    uncaptured = _uncaptured_text(comm)
    if uncaptured:
        lines.append(f"note: {uncaptured}")
    for r, timings in sorted(comm.per_rank.items()):
        split = communication.rank_split(r, timings)
        links = communication.main_links(communication.link_use(timings))
        lines.append(
            f"rank {r}: {split.ops} ops, elapse {split.elapse_ms:,.3f} ms = transit {split.transit_ms:,.3f} + wait "
            f"{split.wait_ms:,.3f} (sync {split.sync_ms:,.3f}) + idle {split.idle_ms:,.3f} ms; wait ratio "
            f"{split.wait_ratio:.2f}, sync ratio {split.sync_ratio:.2f} ({_ratio_word(split.wait_ratio)}); "
            + ("; ".join(communication.bandwidth_text(u) + f", {u.size_mb:,.1f} MB"
                                              for u in links) or "no link moved data"))
    return verdict, lines + [f"note: {n}" for n in comm.notes]


# --- The parallel layout: groups from parallel_group_info, pipeline stages, slow ranks within a group ---
#
# Megatron names its process groups; these are the ones that say how the ranks split the work.
# A rank's DP group is "dp" (torch_npu records "dp_cp" only, on some ranks, when context parallel
# size is 1: the same ranks). Groups of one rank are kept for the sizes but judge nothing.
LAYOUT_KINDS = {"TP": ("tp",), "PP": ("pp",), "DP": ("dp", "dp_cp"), "CP": ("cp",), "EP": ("exp", "ep")}
SIZE_ARGS = {"TP": "tensor_model_parallel_size", "PP": "pipeline_model_parallel_size", "DP": "data_parallel_size",
             "CP": "context_parallel_size", "EP": "expert_model_parallel_size"}
# msprof-analyze's reading of cluster_step_trace_time.csv: stage and rank values "should stay level:
# the largest minus the smallest within 5%", else a slow card or an unbalanced stage (docs/zh/
# recipe_output_format_introduct.md, "cluster_step_trace_time.csv"). Used for the stages' Computing
# and as the floor of the within-group slow-rank threshold.
LEVEL_SHARE = 0.05
# Within a group that does the same work (DP, TP, CP, EP), a rank is slow when its Computing + Free
# exceeds the median of the group's other ranks by more than this many times the typical such excess
# in the capture's other same-work groups (the spread of the data, measured where the rank is not:
# a slow rank cannot hide itself), and by more than LEVEL_SHARE of that median.
SLOW_IN_GROUP_MADS = 3.0


def group_hash(group_id: str) -> str:
    """The number communication.json writes after ``@`` for a group torch_npu names ``group_id``.

    torch_npu writes the group's name into parallel_group_info and a hash of it into the op names;
    msprof-analyze joins them with two 32-bit polynomial hashes of the name's characters (base 29
    and base 131), high and low word (``hccl_sum.py``, ``double_hash``). ``group_name_19`` ->
    ``3985310405473756128`` on the real 4-rank capture.
    """
    high = low = 0
    for ch in group_id:
        high = (high * 29 + ord(ch)) & 0xFFFFFFFF
        low = (low * 131 + ord(ch)) & 0xFFFFFFFF
    return str(high << 32 | low)


@dataclass(frozen=True)
class ParallelGroup:
    kind: str  # TP, PP, DP, CP, EP
    name: str  # Megatron's: tp, pp, dp, dp_cp, cp, exp
    ranks: tuple[int, ...]
    group_id: str
    comm_group: str  # as communication.json writes it after "@"


@dataclass(frozen=True)
class Layout:
    """The ranks' parallel groups, from every rank's metadata (one group listed once)."""

    sizes: dict[str, int]  # kind -> size, from distributed_args (or the groups)
    groups: list[ParallelGroup]
    source: str

    def of(self, kind: str) -> list[ParallelGroup]:
        return [g for g in self.groups if g.kind == kind]

    @property
    def stages(self) -> list[tuple[int, ...]]:
        """Pipeline stage s: the ranks at index s of their PP group (stage 0 first)."""
        pp = self.of("PP")
        if not pp or max(len(g.ranks) for g in pp) < 2:
            return []
        depth = max(len(g.ranks) for g in pp)
        return [tuple(sorted(g.ranks[s] for g in pp if s < len(g.ranks))) for s in range(depth)]


def parallel_layout(view: ClusterView) -> Layout | None:
    """The layout every rank recorded; None when no rank has distributed_args or parallel_group_info."""
    found = {p.rank: p.metadata for p in view.ranks if p.metadata is not None}
    if not found:
        return None
    groups: dict[tuple[str, tuple[int, ...]], ParallelGroup] = {}
    for meta in found.values():
        by_name = {g.name: g for g in meta.groups}
        for kind, names in LAYOUT_KINDS.items():
            mine = next((by_name[n] for n in names if n in by_name), None)
            if mine is not None:
                groups.setdefault((kind, mine.global_ranks), ParallelGroup(
                    kind, mine.name, mine.global_ranks, mine.group_id, group_hash(mine.group_id)))
    args = next((m.distributed_args for m in found.values() if m.distributed_args), None) or {}
    sizes = {}
    for kind, key in SIZE_ARGS.items():
        if isinstance(args.get(key), int):
            sizes[kind] = args[key]
        elif any(k == kind for k, _ in groups):
            sizes[kind] = max(len(r) for k, r in groups if k == kind)
    missing = sorted(set(p.rank for p in view.ranks) - set(found))
    source = next(iter(found.values())).source.rsplit("/", 1)[-1]
    if missing:
        source += f" (ranks {', '.join(map(str, missing))} recorded none)"
    return Layout(sizes, sorted(groups.values(), key=lambda g: (list(LAYOUT_KINDS).index(g.kind), g.ranks)), source)


def _step_number(step: str) -> int | None:
    digits = "".join(ch for ch in step if ch.isdigit())
    return int(digits) if digits else None


@dataclass(frozen=True)
class StageRow:
    """One pipeline stage in one step (µs): msprof-analyze's stage row (the maximum over the stage's ranks)
    plus the P2P ops of its ranks (mean over them, from communication.json / analysis.db)."""

    step: int | None
    stage: int
    ranks: tuple[int, ...]
    computing_us: float  # max over the ranks
    free_us: float  # max
    comm_not_overlapped_us: float  # max
    bubble_us: float  # max: step_trace_time's Bubble (receive ops only)
    p2p_ops: int  # per rank
    p2p_us: float  # P2P elapse, mean over the ranks
    p2p_wait_us: float
    p2p_idle_us: float
    p2p_transit_us: float

    def cells(self) -> list[object]:
        return [self.step, self.stage, ", ".join(map(str, self.ranks)), self.computing_us, self.free_us,
                self.comm_not_overlapped_us, self.bubble_us, self.p2p_ops, self.p2p_us, self.p2p_wait_us,
                self.p2p_idle_us]


STAGE_HEADER = ["Step", "Stage", "Ranks", "Computing(max)", "Free(max)", "Comm(Not Overlapped)(max)", "Bubble(max)",
                "P2P ops", "P2P(us)", "P2P wait(us)", "P2P idle(us)"]


def stage_rows(view: ClusterView, layout: Layout, comm: Communication | None) -> list[StageRow]:
    """Per step and pipeline stage: the stage's Computing, Free and Bubble, and its ranks' P2P time."""
    p2p: dict[tuple[int | None, int], list[CommTiming]] = {}
    for rank, timings in (comm.per_rank.items() if comm else []):
        for t in timings:
            if t.kind == "p2p":
                p2p.setdefault((_step_number(t.step), rank), []).append(t)
    out = []
    for step in sorted({s.step for rows in view.steps.values() for s in rows}, key=_step_order):
        for stage, ranks in enumerate(layout.stages):
            rows = [s for r in ranks for s in view.steps.get(r, []) if s.step == step]
            if not rows:
                continue
            ops = [p2p.get((step, r), []) for r in ranks]
            n = len(ranks)
            out.append(StageRow(step, stage, ranks, max(s.computing_us for s in rows), max(s.free_us for s in rows),
                                max(s.communication_not_overlapped_us for s in rows),
                                max(s.bubble_us for s in rows), max(len(o) for o in ops),
                                *(1000 * sum(getattr(t, f) for o in ops for t in o) / n
                                  for f in ("elapse_ms", "wait_ms", "idle_ms", "transit_ms"))))
    return out


@dataclass(frozen=True)
class GroupJudgement:
    """A same-work group's ranks against each other (mean Computing + Free, µs)."""

    group: ParallelGroup
    own_us: dict[int, float]
    spread_us: float  # the typical excess in the other same-work groups
    threshold_us: float
    slow: int | None

    @property
    def gap(self) -> tuple[int, int, float]:
        high = max(self.own_us, key=self.own_us.get)
        low = min(self.own_us, key=self.own_us.get)
        return high, low, self.own_us[high] - self.own_us[low]


def _excess(own: dict[int, float], ranks: tuple[int, ...], rank: int) -> float:
    """A rank's Computing + Free minus the median of its group's other ranks."""
    return own[rank] - statistics.median(own[r] for r in ranks if r != rank)


def judge_groups(layout: Layout, summaries: list[RankSummary]) -> list[GroupJudgement]:
    """Every DP / TP / CP / EP group of two or more ranks: each rank against the median of the others.

    The threshold is stated from the data: SLOW_IN_GROUP_MADS x the median |excess| of the ranks of
    the other same-work groups (none: 0), and at least LEVEL_SHARE of the others' median.
    """
    own = {s.rank: s.own_us for s in summaries}
    groups = [g for g in layout.groups if g.kind != "PP" and len(g.ranks) > 1 and all(r in own for r in g.ranks)]
    out = []
    for g in groups:
        elsewhere = [abs(_excess(own, o.ranks, r)) for o in groups if o is not g for r in o.ranks]
        spread = statistics.median(elsewhere) if elsewhere else 0.0
        excess = {r: _excess(own, g.ranks, r) for r in g.ranks}
        worst = max(excess, key=excess.get)
        median = statistics.median(own[r] for r in g.ranks if r != worst)
        threshold = max(SLOW_IN_GROUP_MADS * spread, LEVEL_SHARE * median)
        out.append(GroupJudgement(g, {r: own[r] for r in g.ranks}, spread, threshold,
                                  worst if excess[worst] > threshold else None))
    return out


def _ranks_text(ranks: tuple[int, ...]) -> str:
    return f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}"


def layout_lines(layout: Layout, stages: list[StageRow], judged: list[GroupJudgement], comm: Communication | None) -> tuple[list[str], SlowRank, bool]:
    """The layout's verdict and advice: the pipeline's balance, then each same-work group's slow rank.

    Returns the lines, the slow-rank finding that replaces the all-ranks one, and whether the
    pipeline is unbalanced (then communication time is P2P waiting, not DDP buckets).
    """
    sizes = " x ".join(f"{k} {v}" for k, v in layout.sizes.items())
    lines = [f"layout ({layout.source}): {sizes}; " + "; ".join(
        f"{kind} groups {', '.join('[' + ', '.join(map(str, g.ranks)) + ']' for g in layout.of(kind))}"
        for kind in LAYOUT_KINDS if layout.of(kind))]
    unbalanced = False
    for step in sorted({r.step for r in stages}, key=_step_order):
        rows = [r for r in stages if r.step == step]
        if len(rows) < 2:
            continue
        slow, fast = max(rows, key=lambda r: r.computing_us), min(rows, key=lambda r: r.computing_us)
        share = (slow.computing_us - fast.computing_us) / slow.computing_us if slow.computing_us else 0.0
        where = f"step {step}: " if step is not None else ""
        waits = ", ".join(f"stage {r.stage} {r.p2p_us:,.1f} us (wait {r.p2p_wait_us:,.1f}, idle {r.p2p_idle_us:,.1f})"
                          for r in rows)
        head = (f"{where}pipeline stage {slow.stage} ({_ranks_text(slow.ranks)}) computes {slow.computing_us:,.1f} us, "
                f"stage {fast.stage} ({_ranks_text(fast.ranks)}) {fast.computing_us:,.1f} us: a difference of "
                f"{100 * share:.1f}% of the larger (level within {100 * LEVEL_SHARE:.0f}%: msprof-analyze's "
                f"guidance for stage rows)")
        p2p = (f"; P2P per rank (send/recv/batchSendRecv, {comm.source}): {waits}" if comm and any(
            r.p2p_ops for r in rows) else "; no P2P ops in the communication analysis")
        bubble = max(r.bubble_us for r in rows)
        bubble_text = (f"; Bubble (step_trace_time: receive ops only) {bubble:,.1f} us" if bubble else
                       "; step_trace_time's Bubble is 0: it counts receive ops only, and this pipeline's P2P "
                       "is in the ops above")
        if share > LEVEL_SHARE:
            unbalanced = True
            lines.append(f"UNBALANCED PIPELINE — {head}{p2p}{bubble_text}. The ranks of the faster stage wait in "
                         f"P2P for the slower one")
            lines.append(f"try (pipeline): move layers from stage {slow.stage} to stage {fast.stage} until their "
                         f"Computing is level (an uneven split: Megatron-LM's --decoder-first-pipeline-num-layers / "
                         f"--decoder-last-pipeline-num-layers), or split the work finer with virtual pipeline stages "
                         f"(interleaved 1F1B); the link is not the limit when P2P time is wait and idle, not transit")
        else:
            lines.append(f"pipeline stages are level — {head}{p2p}{bubble_text}")
    slow_rank = SlowRank(None, None, "")
    texts = []
    for j in judged:
        high, low, gap = j.gap
        name = f"{j.group.kind} group [{', '.join(map(str, j.group.ranks))}]"
        if j.slow is not None:
            median = statistics.median(v for r, v in j.own_us.items() if r != j.slow)
            texts.append(f"{name}: rank {j.slow} is slow — Computing + Free {j.own_us[j.slow]:,.1f} us vs "
                         f"{median:,.1f} us (median of the others; +{j.own_us[j.slow] - median:,.1f} us, threshold "
                         f"{j.threshold_us:,.1f} us)")
            if slow_rank.rank is None:
                advice = ("its peers wait for it in the data-parallel gradient collectives: look at that rank's own "
                          "compute and host time (Free), not the link" if j.group.kind == "DP" else
                          "the group's collectives (all-reduce / all-gather of activations) wait for it: every "
                          "layer waits once, so look at that rank's device and its links")
                slow_rank = SlowRank(j.slow, "computing", f"slowest rank within its group: {texts[-1]}; {advice}")
        else:
            texts.append(f"{name}: level, largest gap {gap:,.1f} us (rank {high} vs {low}), threshold "
                         f"{j.threshold_us:,.1f} us (spread elsewhere {j.spread_us:,.1f} us)")
    threshold = (f"slow rank judged within each group of the same work (DP, TP, CP, EP): a rank is slow when its "
                 f"Computing + Free exceeds the median of its group's other ranks by more than "
                 f"{SLOW_IN_GROUP_MADS:g} x the median such excess in the other groups, and by more than "
                 f"{100 * LEVEL_SHARE:.0f}% of that median")
    if judged:
        lines.append(f"{threshold}: " + "; ".join(texts))
        if slow_rank.rank is None:
            slow_rank = SlowRank(None, None, "no slow rank within any group: " + "; ".join(texts)
                                 + ("; the ranks differ between pipeline stages (see Parallel layout)" if stages else ""))
    else:
        slow_rank = SlowRank(None, None, "no group of the same work with two or more ranks to compare")
    if layout.sizes.get("TP", 1) > 1:
        lines.append("tensor parallel: every layer's TP collectives sit on the critical path — a slow TP rank or link "
                     "shows in those collectives (see the ops above), and TP groups should stay within one node")
    return lines, slow_rank, unbalanced


@dataclass
class ClusterReport:
    """What the cluster view shows, computed once; :mod:`common.render.cluster` lays it out."""

    view: ClusterView
    per_step: list[list[object]]
    means: list[list[object]]
    slow: SlowRank
    arrivals: Arrivals | None
    step_lines: list[str]
    comm_lines: list[str]
    op_rows: list[list[object]]
    link_rows: list[list[object]]
    layout: Layout | None = None  # the parallel layout, when the ranks recorded one
    layout_lines: list[str] = field(default_factory=list)
    stage_rows: list[list[object]] = field(default_factory=list)
    group_rows: list[list[object]] = field(default_factory=list)


PIPELINE_TRY = ("try (Communication(Not Overlapped)): here it is pipeline ranks waiting in P2P for a slower stage, "
                "not gradient buckets: balance the stages (see Parallel layout)")


def _step_advice(step_lines: list[str], verdict: communication.CommVerdict | None,
                 unbalanced_pipeline: bool = False) -> list[str]:
    """The step verdict's lines; a communication verdict that is not "moving data" replaces the generic
    overlap advice (a faster link or bigger buckets do not help a rank that waits or idles), and an
    unbalanced pipeline the communication advice (its ranks wait in P2P: DDP buckets do not fit)."""
    fit = None
    if verdict is not None and verdict.kind not in ("moving data", "none"):
        fit = ("try: find why the late rank starts the collective late (its compute or host time before it) — "
               "the link is not the limit" if verdict.kind == "waiting" else
               "try: the op idles, not transfers: look at the host around it (Free, launches, synchronisation) "
               "and at the ranks of the group that this capture does not hold")
    out = []
    for line in step_lines:
        if fit and line.startswith("try:"):
            line = fit
        elif unbalanced_pipeline and line.startswith("try (Communication"):
            line = PIPELINE_TRY
        out.append(line)
    return out


def link_matrix_rows(comm: Communication) -> list[list[object]]:
    """Per captured rank and peer: the transport and bandwidth of the op group's total bucket (``*-total``)."""
    rows = []
    for rank, links in sorted(comm.links.items()):
        for link in sorted((x for x in links if x.bucket.endswith("-total") and x.src != x.dst),
                           key=lambda x: (x.step, x.bucket, x.dst)):
            rows.append([link.step, link.bucket, link.src, link.dst, link.transport, link.size_mb, link.time_ms,
                         link.bandwidth_gbs])
    return rows


def cluster_report(view: ClusterView) -> ClusterReport:
    """Everything the cluster view shows: steps per rank, the step verdict, the slow rank, the collectives."""
    per_step = [
        [s.step, rank, s.computing_us, s.communication_not_overlapped_us, s.overlapped_us, s.free_us, s.total_us,
         step_bound.step_kind(s)]
        for step in sorted({s.step for rows in view.steps.values() for s in rows}, key=_step_order)
        for rank, rows in sorted(view.steps.items())
        for s in rows
        if s.step == step
    ]
    summaries = rank_summaries(view)
    means = [
        [s.rank, s.computing_us, s.comm_not_overlapped_us, s.communication_us, s.free_us, s.step_us,
         100 * s.comm_not_overlapped_us / s.step_us if s.step_us else 0.0, _mean_kind(s)]
        for s in summaries
    ]
    comm = rank_communication(view)
    verdict, comm_lines, op_rows, link_rows = None, [], [], []
    if comm is not None:
        verdict, comm_lines = communication_lines(comm)
        op_rows = communication.op_rows(communication.across_ranks(comm.per_rank))
        link_rows = link_matrix_rows(comm)
    layout = parallel_layout(view)
    lines, stages, groups, unbalanced = [], [], [], False
    if layout is None:
        slow = find_slow_rank(summaries, view.steps)
    else:  # the slow rank is judged within each group instead of over all ranks
        stages = stage_rows(view, layout, comm)
        lines, slow, unbalanced = layout_lines(layout, stages, judge_groups(layout, summaries), comm)
        groups = [[g.kind, g.name, ", ".join(map(str, g.ranks)), g.group_id, g.comm_group] for g in layout.groups]
    step_lines = _step_advice(cluster_step_lines(view), verdict, unbalanced)
    return ClusterReport(view, per_step, means, slow, collective_arrivals(view), step_lines, comm_lines, op_rows,
                         link_rows, layout, lines, [r.cells() for r in stages], groups)
GROUP_HEADER = ["Kind", "Name", "Ranks", "Group id", "Group in communication.json"]
