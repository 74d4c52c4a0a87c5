"""A multi-rank capture folder, read: every rank's profile, step table, collectives and parallel layout.

Input is what torch_npu writes for a torch.distributed job (and the portable backend copies):
one ``*_ascend_pt/`` per rank, named by its ``profiler_info_{rank}.json``, each with
``ASCEND_PROFILER_OUTPUT/step_trace_time.csv``. The same files are what
``msprof-analyze cluster`` reads (:mod:`common.collect.msprof_analyze` compares the two).
:func:`load_cluster` refuses mixed, incomplete or missing ranks. A few ranks are read here, their
other files (communication analysis, metadata) when first asked for; many ranks (or any number, given an
executor such as a Dask cluster's) are read in chunks by worker processes, each chunk added up as the view
needs it (:class:`_Kept`: step columns, collective starts, communication sums, the layout's distinct groups)
and merged here in rank order, so the parent never holds a rank's files or rows; of each rank it keeps its number,
folder and profiler_info (:class:`RankTable`). The analysis of what is read lives in :mod:`common.analyze.cluster`, :mod:`~common.analyze.slow_rank` and
:mod:`~common.analyze.parallel_layout`.
"""

from __future__ import annotations

import functools
import io
import json
import os
import re
from array import array
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from common.errors import LabError
from common.formats.cluster_communication import CollectiveStarts, Communication
from common.formats.communication import (
    CommTiming,
    MatrixLink,
    collectives_of,
    read_rank_communication,
    read_rank_matrix,
)
from common.formats.datasets import Dataset, dataset_of
from common.formats.metadata import LayoutRecord, RankMetadata, read_rank_metadata
from common.formats.rank_index import MadeOnAccess
from common.formats.records import CommOp, StepTime
from common.formats.rundir import read_run_info, require_directory
from common.formats.step_store import StepStore

PROFILER_INFO = re.compile(r"^profiler_info_(\d+)\.json$")
OUTPUT_SUBDIR = "ASCEND_PROFILER_OUTPUT"
MSA_OUTPUT = "cluster_analysis_output"
PROFILER_INFO_KEPT = ("launch_id", "backend")
FULL_VIEW_RANKS = 8  # up to this many ranks the view shows every (step, rank) row and the link matrix; above, a summary


def read_profiler_info(folder: Path, rank: int) -> dict:
    """Of a rank's profiler_info_{rank}.json, what the view uses (a real one holds the profiler's whole
    configuration): the lab's launch id and backend, when written."""
    try:
        info = json.loads((folder / f"profiler_info_{rank}.json").read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise LabError(
            f"{folder}/profiler_info_{rank}.json: unreadable ({err})", "the rank's output is damaged"
        ) from None
    return {k: info[k] for k in PROFILER_INFO_KEPT if k in info} if isinstance(info, dict) else {}


@dataclass
class RankProfile:
    rank: int
    path: str | Path  # the rank's *_ascend_pt (kept as a string: a Path holds its parts, 16,384 of them 11 MB)
    info: dict | None  # what the view uses of its profiler_info_{rank}.json (read_profiler_info)

    @property
    def folder(self) -> Path:
        return Path(self.path)

    @functools.cached_property
    def dataset(self) -> Dataset:
        """The rank's export: the text files, or the database (torch_npu export_type=db) when there are none."""
        return dataset_of(self.folder / OUTPUT_SUBDIR) or Dataset("torch_npu", self.folder / OUTPUT_SUBDIR)

    @functools.cached_property
    def steps(self) -> list[StepTime]:
        return self.dataset.steps

    @functools.cached_property
    def communication_files(self) -> tuple[list[CommTiming], str, list[MatrixLink]] | str | None:
        """Its communication analysis (ops, where from, link matrix); None when it has none; the reason, when
        its files could not be read."""
        out = self.folder / OUTPUT_SUBDIR
        try:
            found = read_rank_communication(out)
            return None if found is None else (*found, read_rank_matrix(out))
        except LabError as err:
            return err.what

    @functools.cached_property
    def metadata(self) -> RankMetadata | None:
        """Its parallel layout (profiler_metadata.json, or the database's META_DATA); None when not recorded."""
        return read_rank_metadata(self.folder, self.dataset.db if self.dataset.is_db else None)

    def communication(self) -> list[CommOp]:
        """The rank's collectives from its database's COMMUNICATION_OP (empty for a text export: see communication.json)."""
        return self.dataset.profiler_db.communication() if self.dataset.is_db else []

    @functools.cached_property
    def collectives_source(self) -> str:
        """Where :attr:`collective_starts` comes from: the database's table or the text export's file."""
        return "COMMUNICATION_OP" if self.dataset.is_db else "communication.json"

    @functools.cached_property
    def collective_starts(self) -> dict[str, float] | None:
        """``<step>/<op name>@<group>`` -> the start (µs) of each collective the rank ran: its database's
        COMMUNICATION_OP (one row per collective), or communication.json's ``Start Timestamp(us)``;
        None when that file is missing or unreadable."""
        if self.dataset.is_db:
            return {
                f"{'' if op.step_id is None else op.step_id}/{op.op_name}@{op.group or ''}": op.start_us
                for op in self.communication()
            }
        path = self.folder / OUTPUT_SUBDIR / "communication.json"
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            return None
        starts: dict[str, float] = {}
        for step, kinds in data.items():
            for name, op in collectives_of(kinds).items():
                start = (op.get("Communication Time Info") or {}).get("Start Timestamp(us)")
                if start is not None:
                    starts[f"{step}/{name}"] = float(start)
        return starts


_RANK_ID = "<rank_id>"  # in a kept profiler_info: the rank's own number goes here


class RankTable(MadeOnAccess):
    """The ranks of a capture read by workers, as :class:`RankProfile` items made when asked for (each
    reads its files again on first use): what the parent keeps of a rank is its number, its folder and its
    profiler_info (one object per distinct value), not a profile with its cached files."""

    def __init__(self, folders: RankFolders) -> None:
        self._folders = folders  # its ranks ascending and each once (load_cluster refuses a rank found twice)
        self._infos: list[tuple[dict, type]] = []  # (profiler_info with _RANK_ID, the type of its rank_id)
        self._info_ix = array("l", [-1]) * len(folders)
        self._info_of: dict[str, int] = {}

    def set_info(self, rank: int, info: dict) -> None:
        """Keep ``rank``'s profiler_info: once per distinct value, its ``rank_id`` (the one field that differs from
        rank to rank) put back when an item is made."""
        own = info.get("rank_id")
        shared = {k: (_RANK_ID if k == "rank_id" and own in (rank, str(rank)) else v) for k, v in info.items()}
        key = json.dumps([shared, type(own).__name__], sort_keys=True, default=str)
        ix = self._info_of.get(key)
        if ix is None:
            ix = self._info_of[key] = len(self._infos)
            self._infos.append((shared, type(own)))
        self._info_ix[int(np.searchsorted(self._folders.ranks, rank))] = ix

    def jobs(self, first: int, end: int) -> list[tuple[int, str]]:
        """(rank, folder) of the ranks in slots [first, end), in rank order: what a worker reads."""
        found = self._folders
        return [(int(found.ranks[i]), found.folder(i)) for i in range(first, min(end, len(found)))]

    def _item(self, slot: int) -> RankProfile:
        ix = self._info_ix[slot]
        rank, info = int(self._folders.ranks[slot]), None
        if ix >= 0:
            shared, kind = self._infos[ix]
            info = {k: (kind(rank) if v is _RANK_ID else v) for k, v in shared.items()}
        return RankProfile(rank, self._folders.folder(slot), info)

    def __len__(self) -> int:
        return len(self._folders)


@dataclass
class ClusterView:
    root: Path
    ranks: Sequence[RankProfile]  # a list, or a RankTable for a capture read by workers
    run_info: dict | None
    steps: StepStore  # rank -> its step rows, kept in columns
    label: str | None = None  # how the capture is named on the page, when not by root (a converted copy's input)

    def __post_init__(self) -> None:
        self.steps = StepStore.of(self.steps)  # rank -> rows given as a mapping: kept in columns too

    @functools.cached_property
    def communication(self) -> Communication | None:
        """Every rank's communication analysis, added up (:class:`Communication`); None when no rank has one.
        Filled as the ranks are read by :func:`load_cluster` when it reads many; read here when it reads a few."""
        comm = Communication(keep_links=len(self.ranks) <= FULL_VIEW_RANKS)
        for p in self.ranks:
            comm.add_rank(p.rank, p.communication_files)
        return comm if comm.read else None

    @functools.cached_property
    def layout(self) -> LayoutRecord:
        """What the ranks recorded of their parallel layout (:class:`LayoutRecord`); filled as :attr:`communication`."""
        record = LayoutRecord()
        for p in self.ranks:
            record.add(p.rank, p.metadata)
        return record

    @functools.cached_property
    def starts(self) -> CollectiveStarts:
        """When each rank started each collective (:class:`CollectiveStarts`); filled as :attr:`communication`."""
        starts = CollectiveStarts()
        for p in self.ranks:
            starts.add(p.rank, p.collective_starts, p.collectives_source)
        return starts


class RankFolders:
    """The folders under ``root`` that hold a ``profiler_info_{rank}.json``, in rank order (a rank found twice:
    its folders side by side, see :meth:`doubled`). A rank's folder is not searched further (its
    ASCEND_PROFILER_OUTPUT/ and PROF_*/ trees hold its own files, thousands on a real capture), nor is
    msprof-analyze's output. The ranks are kept in an array and the folders, relative to the root, in one
    bytes object: 16,384 paths as str objects held 2 MB."""

    def __init__(self, root: Path) -> None:
        self.root = os.fspath(root)
        ranks, text, ends = array("q"), io.BytesIO(), array("q")  # bytes: a StringIO holds 4 bytes a character
        for folder, dirs, files in os.walk(self.root):
            found = [int(m[1]) for name in files if (m := PROFILER_INFO.match(name))]
            relative = folder[len(self.root) :].lstrip(os.sep)  # os.walk joins its folders onto the root
            for rank in found:
                ranks.append(rank)
                ends.append((ends[-1] if ends else 0) + text.write(os.fsencode(relative)))
            dirs[:] = [] if found else sorted(d for d in dirs if d != MSA_OUTPUT)
        self.ranks, self._text, self._ends = np.array(ranks, dtype=np.int64), text.getvalue(), np.array(ends)
        if len(self.ranks) and (np.diff(self.ranks) < 0).any():  # into rank order (a rank's folders as walked)
            order = np.argsort(self.ranks, kind="stable")
            text, ends = io.BytesIO(), array("q")
            for i in order.tolist():
                ends.append((ends[-1] if ends else 0) + text.write(self._text[self._span(i)]))
            self.ranks, self._text, self._ends = self.ranks[order], text.getvalue(), np.array(ends)

    def __len__(self) -> int:
        return len(self.ranks)

    def _span(self, i: int) -> slice:
        return slice(int(self._ends[i - 1]) if i else 0, int(self._ends[i]))

    def folder(self, i: int) -> str:
        """The ``i``-th folder (in rank order), as os.walk names it."""
        relative = os.fsdecode(self._text[self._span(i)])
        return os.path.join(self.root, relative) if relative else self.root

    def doubled(self) -> tuple[int, list[str]] | None:
        """The first rank with more than one folder, and its folders (sorted)."""
        same = np.flatnonzero(self.ranks[1:] == self.ranks[:-1])
        if not len(same):
            return None
        rank = int(self.ranks[same[0]])
        return rank, sorted(self.folder(i) for i in np.flatnonzero(self.ranks == rank).tolist())


def _runs(ranks: list[int]) -> str:
    """Ascending ranks as runs: "0..4094, 4096..16383" (thousands of ranks in a line one can read)."""
    parts, first = [], 0
    for i in range(1, len(ranks) + 1):
        if i == len(ranks) or ranks[i] != ranks[i - 1] + 1:
            parts.append(str(ranks[first]) if i - first == 1 else f"{ranks[first]}..{ranks[i - 1]}")
            first = i
    return ", ".join(parts)


def step_order(step: int | None) -> tuple[bool, int]:
    """Sort key of a Step: an empty Step (a capture without a schedule: one whole-trace row) first."""
    return (step is not None, step or 0)


def _steps_of(rows: list[StepTime]) -> list[int | None]:
    return sorted((s.step for s in rows), key=step_order)


def _ranges(steps: list[int | None]) -> str:
    if any(s is None for s in steps):
        return f"{steps} (an empty Step: no schedule)"
    return f"{steps[0]}..{steps[-1]}" if steps and steps == list(range(steps[0], steps[-1] + 1)) else str(steps)


def load_cluster(root: Path | str, executor=None) -> ClusterView:
    """Every rank's profile under ``root``; refuses mixed, incomplete or missing ranks with one line.

    ``executor``: a :class:`concurrent.futures.Executor` that reads the ranks (a Dask cluster's, see
    :mod:`common.cli.scheduler`); without it, many ranks are read by a local process pool, a few here."""
    root = Path(root)
    require_directory(root, "give the prof_out_ddp/ of run_ddp.sh or a folder of rank outputs")
    run_info = read_run_info(root)
    if run_info is not None and not run_info.get("completed"):
        reason = (run_info.get("failure") or {}).get("reason", "it did not finish")
        raise LabError(f"{root}: the run is INCOMPLETE ({reason})", "fix the failing rank and run it again")
    found = RankFolders(root)
    if not len(found):
        raise LabError(
            f"{root}: no per-rank profiles (*_ascend_pt/profiler_info_<rank>.json)",
            "give the output of a multi-rank run, e.g. 04_pyTorch/prof_out_ddp",
        )
    doubled = found.doubled()
    if doubled:
        r, dirs = doubled
        raise LabError(
            f"{root}: rank {r} has {len(dirs)} profiles ({', '.join(os.path.relpath(d, root) for d in dirs)}): "
            "outputs of different runs are mixed",
            "keep exactly one folder per rank, all from one run",
        )
    world = int(run_info["world_size"]) if run_info and run_info.get("world_size") else int(found.ranks[-1]) + 1
    missing = np.setdiff1d(np.arange(world), found.ranks).tolist()
    extra = found.ranks[found.ranks >= world].tolist()
    if missing or extra:
        what = f"rank(s) {_runs(missing)} missing" if missing else f"rank(s) {_runs(extra)} beyond the world size"
        raise LabError(
            f"{root}: {what} (found {_runs(found.ranks.tolist())}; world size {world})",
            "every rank of one run must be present; re-run, or copy the missing rank's *_ascend_pt here",
        )
    ranks: Sequence[RankProfile]
    if executor is not None or len(found) >= PARALLEL_FROM_RANKS:
        ranks = RankTable(found)
        kept = prefetch_ranks(ranks, executor)
    else:
        ranks = [RankProfile(r, found.folder(i), None) for i, r in enumerate(found.ranks.tolist())]
        kept = _Kept(len(ranks))
        for p in ranks:  # a few ranks: their profiler_info and step rows now, the rest when first asked for
            p.info = read_profiler_info(p.folder, p.rank)
            kept.steps.add(p.rank, p.steps)
            p.__dict__.pop("steps")
    first = ranks[0]
    launch = str(first.info.get("launch_id"))  # written by the lab's portable ranks
    odd = next((p for p in ranks if str(p.info.get("launch_id")) != launch), None)
    if odd is not None:
        raise LabError(
            f"{root}: ranks come from different runs (rank {first.rank}: launch {launch[:8]}, "
            f"rank {odd.rank}: launch {str(odd.info.get('launch_id'))[:8]})",
            "compare the ranks of one run only",
        )
    steps = kept.steps
    reference = _steps_of(steps[first.rank])
    for rank in _ranks_to_compare(steps):
        mine = _steps_of(steps[rank])
        if mine != reference:
            raise LabError(
                f"{root}: rank {rank} recorded steps {_ranges(mine)} "
                f"but rank {first.rank} recorded {_ranges(reference)}",
                "the ranks are not from one run with one schedule",
            )
    if not reference:
        raise LabError(
            f"{ranks[0].folder}: no steps ({ranks[0].dataset.steps_source})",
            "profile with a schedule so steps are recorded",
        )
    view = ClusterView(root, ranks, run_info, steps)
    if kept.complete:
        view.__dict__.update(
            communication=kept.communication if kept.communication.read else None,
            starts=kept.starts,
            layout=kept.layout,
        )
    else:  # a few ranks: read now, so the analysis is handed what it reads (it never opens a file)
        for part in ("communication", "starts", "layout"):
            getattr(view, part)  # read once, kept by the view
    return view


def _ranks_to_compare(steps: StepStore) -> list[int]:
    """The ranks whose steps may differ from the first rank's: when every rank has as many rows, only those whose
    sorted Step column differs (compared a block of ranks at a time); else every rank after the first."""
    if steps.rows_per_rank() is None:
        return list(steps)[1:]
    differ, first = [], None
    for ranks, block in steps.rank_blocks(("step",)):
        table = np.sort(block["step"], axis=1)  # a missing Step (NaN) last, in every row alike
        first = table[0].copy() if first is None else first
        same = (table == first) | (np.isnan(table) & np.isnan(first))
        differ += [ranks[i] for i in np.flatnonzero(~same.all(axis=1))]
    return differ


# --- many ranks: each rank's files read by a process pool ---------------------------------------------
PARALLEL_FROM_RANKS = 128  # fewer ranks: read here (starting a pool, about half a second of imports per process on the
# 2-core VM, costs more than it saves below that: ~7 ms of reading per rank, half of it saved)
# what a rank's worker reads (the rank's cached properties)
PREFETCHED = ("steps", "collective_starts", "collectives_source", "communication_files", "metadata")


CHUNK_RANKS = 64  # ranks a task, added up in the worker: a Dask task costs about a millisecond of scheduling
IN_FLIGHT = 3  # chunks a local worker has queued or done and not yet merged, at most
DASK_IN_FLIGHT = 64  # chunks submitted to a Dask cluster and not yet merged, at most (its workers are not counted)


def _read_ranks(jobs: list[tuple[int, str]], ranks: int) -> _Kept:
    """In a worker: ``jobs``' ranks read and added up, as :class:`_Kept` keeps them (one chunk of a capture of
    ``ranks`` ranks)."""
    kept = _Kept(ranks)
    for rank, folder in jobs:
        profile = RankProfile(rank, folder, read_profiler_info(Path(folder), rank))
        kept.keep(profile, {name: getattr(profile, name) for name in PREFETCHED})
    return kept


@dataclass
class _Kept:
    """What the view keeps of ranks as they are read, in rank order: their step rows in columns, their
    collectives' starts, communication analysis and parallel layout added up, their profiler_info.
    A worker keeps one chunk of ranks; the parent merges the chunks in order (:meth:`merge`) and never holds a
    rank's files or its rows as objects."""

    ranks: int  # how many ranks the view has (a view of a few keeps the link matrix's rows)
    steps: StepStore = field(default_factory=StepStore)
    starts: CollectiveStarts = field(default_factory=CollectiveStarts)
    communication: Communication | None = None
    layout: LayoutRecord = field(default_factory=LayoutRecord)
    infos: dict[int, dict] = field(default_factory=dict)  # in a worker: rank -> its profiler_info, handed to the
    # parent's rank table
    complete: bool = False  # every rank was read (not only its steps)

    def __post_init__(self) -> None:
        if self.communication is None:
            self.communication = Communication(keep_links=self.ranks <= FULL_VIEW_RANKS)

    def keep(self, profile: RankProfile, found: dict) -> None:
        self.steps.add(profile.rank, found["steps"])
        self.starts.add(profile.rank, found["collective_starts"], found["collectives_source"])
        self.communication.add_rank(profile.rank, found["communication_files"])
        self.layout.add(profile.rank, found["metadata"])
        self.infos[profile.rank] = profile.info

    def merge(self, other: _Kept, table: RankTable) -> None:
        """Add a later chunk's ranks; each rank's profiler_info goes to ``table``."""
        self.steps.merge(other.steps)
        self.starts.merge(other.starts)
        self.communication.merge(other.communication)
        self.layout.merge(other.layout)
        for rank, info in other.infos.items():
            table.set_info(rank, info)


def prefetch_ranks(ranks: RankTable, executor=None) -> _Kept:
    """Read every rank in ``executor`` (a Dask cluster's) or in a local process pool (one process per core,
    spawned: the parent's polars threads are not forked), :data:`CHUNK_RANKS` ranks a task, each chunk added up
    in its worker and merged here in rank order: the parent holds what the view keeps, never a rank's files or
    rows, and at most :data:`IN_FLIGHT` chunks a worker queued or waiting to be merged. A damaged rank raises its
    LabError here, as it would read in this process. Where no local pool can start (a program read from stdin,
    which a spawned worker cannot import again), the chunks are read here."""

    def chunks() -> Iterator[list[tuple[int, str]]]:
        return (ranks.jobs(first, first + CHUNK_RANKS) for first in range(0, len(ranks), CHUNK_RANKS))

    if executor is not None:
        return _merge_all(ranks, _in_order(executor, chunks(), len(ranks), DASK_IN_FLIGHT))
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    workers = min(os.cpu_count() or 1, -(-len(ranks) // CHUNK_RANKS))
    try:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            return _merge_all(ranks, _in_order(pool, chunks(), len(ranks), IN_FLIGHT * workers))
    except (BrokenProcessPool, OSError):  # no pool: the same chunks, read here
        return _merge_all(ranks, (_read_ranks(jobs, len(ranks)) for jobs in chunks()))


def _in_order(executor, chunks: Iterator[list[tuple[int, str]]], size: int, window: int) -> Iterator[_Kept]:
    """Each chunk's result in order, with at most ``window`` chunks submitted and not yet handed on (Executor.map
    would submit every chunk at once and keep every result until it is taken)."""
    pending: deque = deque()
    for jobs in chunks:
        pending.append(executor.submit(_read_ranks, jobs, size))
        if len(pending) >= window:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


def _merge_all(ranks: RankTable, chunks) -> _Kept:
    kept = _Kept(len(ranks))
    for chunk in chunks:
        kept.merge(chunk, ranks)
    kept.complete = True
    return kept
