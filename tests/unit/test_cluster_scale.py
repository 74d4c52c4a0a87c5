"""The cluster view beyond a handful of ranks: the terminal shows each step's distribution over the ranks,
the outlying ranks and the verdicts; --out holds every row (CSV), the full text and a page with heat maps.
Many ranks are read by a process pool, with the same result as one process."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import ROOT, cluster_text

from common.analyze.cluster import cluster_report
from common.analyze.cluster_scale import SUMMARY_ABOVE_RANKS, spread
from common.bench.cluster_capture import write_cluster
from common.cli.commands import main
from common.formats import cluster as cluster_format
from common.formats import spill, step_store
from common.formats.cluster import load_cluster

RANKS = SUMMARY_ABOVE_RANKS + 4
STEPS = 6


@pytest.fixture(scope="module")
def capture(tmp_path_factory) -> Path:
    """A generated capture of more ranks than the summary threshold (its last rank computes longer)."""
    return write_cluster(tmp_path_factory.mktemp("many") / "cluster", RANKS, steps=STEPS, tasks_per_step=8)


def test_spread_of_values() -> None:
    s = spread([float(v) for v in range(1, 21)])
    assert (s.low, s.median, s.p95, s.high) == (1.0, 10.5, 19.0, 20.0)


def test_many_ranks_print_the_summary_and_out_holds_every_row(
    capture: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    out = tmp_path / "out"
    assert main(["cluster", str(capture), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert f"-- Per step, over the {RANKS} ranks" in text and "Per step and rank (us)" not in text
    step_rows = [x for x in lines if x.strip().split(" ")[0].isdigit() and " / " in x]
    assert len(step_rows) == STEPS
    slowest = text[text.index("-- Slowest ranks") : text.index("-- Fastest ranks")]
    assert f"slowest rank: {RANKS - 1}" in slowest
    assert [x.split()[0] for x in slowest.splitlines() if x.strip()[:1].isdigit()][0] == str(RANKS - 1)
    assert len(lines) < 100
    # the generator's communication.json is a real capture's: every rank's analysis is read, and waits for the last
    assert "communication analysis not read" not in text and "communication is waiting for a peer" in text
    assert f"The late peer: rank {RANKS - 1} started" in text
    assert f"(written to {out / 'cluster_steps.csv'})" in text
    with (out / "cluster_steps.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == RANKS * STEPS and {int(r["Rank"]) for r in rows} == set(range(RANKS))
    assert [int(r["Step"]) for r in rows[: RANKS + 1]] == [1] * RANKS + [2]  # by step, then rank
    assert all(float(r["Step(us)"]) > float(r["Computing(us)"]) for r in rows)
    page = (out / "report.html").read_text()
    assert 'data-chart="rank-own"' in page and 'data-chart="rank-wait"' in page
    assert page.count("<tr>") < 40  # no table of every (step, rank)
    kept = (out / "cluster_report.txt").read_text()
    assert "Per step and rank (us)" not in kept  # every (step, rank) row is the CSV's


def test_the_full_text_has_every_ranks_lines(capture: Path) -> None:
    report = cluster_report(load_cluster(capture))
    assert report.summarized and report.per_step == []  # the rows stay in the columns: the CSV is written from them
    full = cluster_text(report)
    means = full[full.index("-- Per rank, median of the steps") :]
    assert [int(x.split()[0]) for x in means.splitlines() if x.strip()[:1].isdigit()][:RANKS] == list(range(RANKS))
    per_rank = full[full.index("-- Collectives per rank") :]
    assert all(f"rank {r}: " in per_rank for r in range(RANKS))


def test_a_process_pool_reads_the_same_as_one_process(capture: Path, monkeypatch) -> None:
    alone = load_cluster(capture)
    monkeypatch.setattr(cluster_format, "PARALLEL_FROM_RANKS", 2)
    monkeypatch.setattr(cluster_format, "CHUNK_RANKS", 5)  # chunks merged in order, one of them short
    monkeypatch.setattr(step_store, "SPILL_ROWS", 7)  # the step columns on disk after the first chunk
    monkeypatch.setattr(spill, "SPILL_BYTES", 64)  # the collectives' starts too
    pooled = load_cluster(capture)
    assert pooled.steps.spilled and not alone.steps.spilled
    assert pooled.starts.spilled
    assert pooled.steps == alone.steps
    assert pooled.starts.names == alone.starts.names and pooled.starts.ranks == alone.starts.ranks
    assert np.array_equal(
        np.concatenate(list(pooled.starts.row_blocks())),
        np.concatenate(list(alone.starts.row_blocks())),
        equal_nan=True,
    )
    assert (pooled.starts.on_every_rank() == alone.starts.on_every_rank()).all()
    assert pooled.communication.splits == alone.communication.splits
    assert "steps" not in pooled.ranks[0].__dict__ and "communication_files" not in pooled.ranks[0].__dict__
    assert cluster_text(cluster_report(pooled)) == cluster_text(cluster_report(alone))


def test_msprof_analyze_runs_only_when_asked(capture: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    """An installed msprof-analyze is not run by a plain ``cluster``: it takes several times the view's time."""
    ran = tmp_path / "ran"
    tool = tmp_path / "msprof-analyze"
    tool.write_text(f"#!{sys.executable}\nimport pathlib\npathlib.Path({str(ran)!r}).touch()\n")
    tool.chmod(0o755)
    monkeypatch.setenv("MSPROF_ANALYZE", str(tool))
    assert main(["cluster", str(capture)]) == 0
    assert not ran.exists()
    assert "cross-check with msprof-analyze: not run (add --cross-check" in capsys.readouterr().out
    assert main(["cluster", str(capture), "--cross-check"]) == 1  # the stand-in writes no table: a FAIL
    assert ran.exists()
    assert "msprof-analyze wrote neither" in capsys.readouterr().out


@pytest.mark.parametrize(
    "capture_dir",
    [
        "megatron_pp2_dp2",
        "msinsight_torch_npu/db_level1",
        "msinsight_torch_npu/text_level0",
        "msinsight_torch_npu/text_level1",
    ],
)
def test_real_captures_read_in_chunks_give_the_same_view(capture_dir: str, monkeypatch) -> None:
    """The pool's path (each chunk added up in a worker, merged in rank order, step columns spilled) on real NPU
    captures — a pipeline layout with P2P, a database export, Level0 and Level1 text — against one process."""
    root = ROOT / "tests" / "fixtures" / "npu" / capture_dir
    alone = cluster_text(cluster_report(load_cluster(root)))
    monkeypatch.setattr(cluster_format, "PARALLEL_FROM_RANKS", 1)
    monkeypatch.setattr(cluster_format, "CHUNK_RANKS", 1)
    monkeypatch.setattr(step_store, "SPILL_ROWS", 1)
    pooled = load_cluster(root)
    assert pooled.steps.spilled
    assert cluster_text(cluster_report(pooled)) == alone


def test_rank_index_finds_ranks_added_in_or_out_of_order() -> None:
    from common.formats.rank_index import RankIndex

    index = RankIndex()
    for rank in (0, 2, 5):
        index.add(rank)
    assert [index.slot(r) for r in (0, 2, 5)] == [0, 1, 2] and 3 not in index and list(index) == [0, 2, 5]
    with pytest.raises(KeyError):
        index.slot(3)
    index.add(1)  # out of order: looked up by a dict from now on, slots unchanged
    assert [index.slot(r) for r in (0, 2, 5, 1)] == [0, 1, 2, 3] and 4 not in index
    assert index.array().tolist() == [0, 2, 5, 1]


def test_rank_blocks_are_the_rank_by_step_table_cut_into_blocks_of_ranks() -> None:
    from common.formats.records import StepTime
    from common.formats.step_store import StepStore

    store = StepStore()
    for rank in range(7):
        store.add(
            rank, [StepTime(step, 10.0 * rank + step, 1.0, 0.0, 2.0, 3.0 + rank, 0.0, 0.0, None) for step in range(4)]
        )
    blocks = list(store.rank_blocks(("computing_us", "free_us"), ranks=3))
    assert [ranks for ranks, _ in blocks] == [[0, 1, 2], [3, 4, 5], [6]]
    for name in ("computing_us", "free_us"):
        assert np.array_equal(np.concatenate([tables[name] for _, tables in blocks]), store.column(name).reshape(7, 4))
    store.add(7, [StepTime(0, 1.0, 1.0, 0.0, 2.0, 3.0, 0.0, 0.0, None)])  # one row only: no (ranks, steps) table
    assert store.rows_per_rank() is None
    with pytest.raises(ValueError):
        next(store.rank_blocks(("free_us",)))


def test_spilled_tables_travel_with_their_rows(monkeypatch) -> None:
    """A chunk read in a worker is pickled back to the parent: a table that spilled there carries its rows (its
    files stay on the worker's disk, which a Dask worker does not share)."""
    import pickle

    from common.formats.cluster_communication import CollectiveStarts
    from common.formats.records import StepTime
    from common.formats.step_store import StepStore

    monkeypatch.setattr(step_store, "SPILL_ROWS", 3)
    monkeypatch.setattr(spill, "SPILL_BYTES", 32)
    steps, starts = StepStore(), CollectiveStarts()
    for rank in range(4):
        steps.add(rank, [StepTime(s, 1.0 + rank, 2.0, 0.0, 2.0, 3.0, 0.0, 0.0, None) for s in range(2)])
        starts.add(rank, {"0/allreduce@g": 10.0 + rank, "1/allreduce@g": 20.0 + rank}, "communication.json")
    assert steps.spilled and starts.spilled
    steps_back, starts_back = pickle.loads(pickle.dumps(steps)), pickle.loads(pickle.dumps(starts))
    del steps, starts  # their folders go with them
    assert not steps_back.spilled and [s.computing_us for s in steps_back[3]] == [4.0, 4.0]
    assert np.array_equal(np.concatenate(list(starts_back.row_blocks())), [[10.0 + r, 20.0 + r] for r in range(4)])


def test_rank_folders_are_found_in_rank_order_whatever_their_names(tmp_path: Path) -> None:
    from common.formats.cluster import RankFolders

    for rank, name in ((0, "zz/b"), (2, "a"), (1, "m")):
        (tmp_path / name).mkdir(parents=True)
        (tmp_path / name / f"profiler_info_{rank}.json").write_text("{}")
    found = RankFolders(tmp_path)
    assert found.ranks.tolist() == [0, 1, 2] and found.doubled() is None
    assert [found.folder(i) for i in range(3)] == [str(tmp_path / "zz" / "b"), str(tmp_path / "m"), str(tmp_path / "a")]
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "profiler_info_1.json").write_text("{}")
    assert RankFolders(f"{tmp_path}/").doubled() == (1, [f"{tmp_path}/c", f"{tmp_path}/m"])


def test_a_rank_table_keeps_one_profiler_info_for_ranks_that_differ_only_in_rank_id(tmp_path: Path) -> None:
    from common.formats.cluster import RankFolders, RankTable

    for rank in range(3):
        (tmp_path / f"r{rank}").mkdir()
        (tmp_path / f"r{rank}" / f"profiler_info_{rank}.json").write_text("{}")
    table = RankTable(RankFolders(tmp_path))
    for rank in range(3):
        table.set_info(rank, {"rank_id": str(rank) if rank < 2 else rank, "config": {"launch": "x"}})
    assert len(table._infos) == 2  # rank_id a string (ranks 0, 1) or a number (rank 2)
    assert [p.info for p in table] == [
        {"rank_id": "0", "config": {"launch": "x"}},
        {"rank_id": "1", "config": {"launch": "x"}},
        {"rank_id": 2, "config": {"launch": "x"}},
    ]


def test_missing_ranks_are_named_as_runs(capture: Path, tmp_path: Path) -> None:
    """Thousands of ranks in a refusal stay readable: consecutive ranks as one run."""
    import shutil

    from common.errors import LabError

    copy = tmp_path / "cluster"
    shutil.copytree(capture, copy)
    for rank in (3, 4, 5, 9):
        shutil.rmtree(copy / f"rank{rank:02d}")
    with pytest.raises(LabError) as refused:
        load_cluster(copy)
    assert f"rank(s) 3..5, 9 missing (found 0..2, 6..8, 10..{RANKS - 1}; world size {RANKS})" in str(refused.value)
