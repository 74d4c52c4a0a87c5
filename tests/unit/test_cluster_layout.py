"""The cluster view's parallel layout on a real 4-rank pipeline 2 x data 2 capture
(tests/fixtures/npu/megatron_pp2_dp2): the groups from profiler_metadata.json, the pipeline stages
against msprof-analyze's own stage rows, the P2P waits, the verdict, and the CLI."""

from __future__ import annotations

import csv
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import FIXTURES, cluster_text
from helpers import ROOT as REPO  # the lab these tests run (a private copy)

from common.analyze import cluster
from common.analyze.parallel_layout import group_hash, parallel_layout
from common.formats.cluster import load_cluster
from common.formats.communication import read_communication_json
from common.formats.metadata import read_rank_metadata

CAPTURE = FIXTURES / "npu" / "megatron_pp2_dp2" / "level2"
MSA_STAGES = FIXTURES / "msprof_analyze_cluster" / "megatron_pp2_dp2.csv"
NO_LAYOUT = FIXTURES / "npu" / "msinsight_torch_npu" / "text_level1"
OUT = "ASCEND_PROFILER_OUTPUT"


@pytest.fixture(scope="module")
def report() -> cluster.ClusterReport:
    return cluster.cluster_report(load_cluster(CAPTURE))


def test_the_groups_come_from_parallel_group_info(report: cluster.ClusterReport) -> None:
    layout = report.layout
    assert layout is not None and layout.source == "profiler_metadata.json"
    assert layout.sizes == {"TP": 1, "PP": 2, "DP": 2, "CP": 1, "EP": 1}
    assert [g.ranks for g in layout.of("PP")] == [(0, 2), (1, 3)]
    assert [(g.name, g.ranks) for g in layout.of("DP")] == [("dp_cp", (0, 1)), ("dp", (2, 3))]
    assert [g.ranks for g in layout.of("TP")] == [(0,), (1,), (2,), (3,)]
    assert layout.stages == [(0, 1), (2, 3)]


def test_a_group_name_maps_to_the_group_communication_json_writes() -> None:
    assert group_hash("group_name_19") == "3985310405473756128"  # rank 0's pp group [0, 2]
    p2p_groups = {
        t.group
        for t in read_communication_json(CAPTURE / "rank_0_ascend_pt" / OUT / "communication.json")
        if t.kind == "p2p"
    }
    pp = next(g for g in read_rank_metadata(CAPTURE / "rank_0_ascend_pt").groups if g.name == "pp")
    assert p2p_groups == {group_hash(pp.group_id)}


def test_p2p_total_op_info_is_not_an_op() -> None:
    ops = read_communication_json(CAPTURE / "rank_0_ascend_pt" / OUT / "communication.json")
    p2p = [t for t in ops if t.kind == "p2p"]
    assert [t.op_name for t in p2p] == [f"hcom_batchSendRecv__128_{k}_1" for k in (3, 4, 5)]
    assert sum(t.elapse_ms for t in p2p) == pytest.approx(313.8778)  # the file's own p2p Total Op Info
    assert len([t for t in ops if t.kind == "collective"]) == 12


def test_the_stages_are_msprof_analyzes_stage_rows(report: cluster.ClusterReport) -> None:
    with MSA_STAGES.open(newline="") as f:
        theirs = {row["Index"]: row for row in csv.DictReader(f) if row["Type"] == "stage"}
    assert sorted(theirs) == ["(0, 1)", "(2, 3)"]
    for row in report.stage_rows:
        step, stage, ranks, computing, free, comm, bubble = row[:7]
        their = theirs[f"({ranks})"]
        assert (step, stage) == (int(their["Step"]), ["(0, 1)", "(2, 3)"].index(f"({ranks})"))
        assert computing == pytest.approx(float(their["Computing"]), abs=0.002)
        assert free == pytest.approx(float(their["Free"]), abs=0.002)
        assert comm == pytest.approx(float(their["Communication(Not Overlapped)"]), abs=0.002)
        assert bubble == float(their["Bubble"]) == 0.0


def test_p2p_waits_per_stage(report: cluster.ClusterReport) -> None:
    (s0, s1) = report.stage_rows
    # stage 0: ranks 0 and 1, p2p Total Op Info 313.8778 and 322.98056 ms (wait 158.50548, 164.05138)
    assert s0[:3] == [13, 0, "0, 1"] and s0[7] == 3
    assert s0[8] == pytest.approx(1000 * (313.8778 + 322.98056) / 2)
    assert s0[9] == pytest.approx(1000 * (158.50548 + 164.05138) / 2)
    assert s0[10] == pytest.approx(1000 * (155.37232 + 158.92918) / 2)
    # stage 1: ranks 2 and 3 (72.66366 and 74.98674 ms, nearly all idle: waiting for stage 0's first activations)
    assert s1[:3] == [13, 1, "2, 3"] and s1[8] == pytest.approx(1000 * (72.66366 + 74.98674) / 2)
    assert s1[9] == pytest.approx(1000 * (0.8074 + 0.8072600000000001) / 2)


def test_the_verdict_names_the_unbalanced_pipeline_and_advises_for_it(report: cluster.ClusterReport) -> None:
    text = "\n".join(report.layout_lines)
    assert (
        "UNBALANCED PIPELINE — step 13: pipeline stage 1 (ranks 2, 3) computes 401,131.7 us, stage 0 "
        "(ranks 0, 1) 231,290.1 us: a difference of 42.3% of the larger (level within 5%"
    ) in text
    assert "stage 0 318,429.2 us (wait 161,278.4, idle 157,150.8)" in text
    assert "step_trace_time's Bubble is 0: it counts receive ops only" in text
    assert "try (pipeline): move layers from stage 1 to stage 0" in text
    assert not any("bucket_cap_mb" in line for line in report.step_lines)  # no DDP bucket advice
    assert cluster.PIPELINE_TRY in report.step_lines


def test_slow_rank_is_judged_within_each_group_with_its_threshold(report: cluster.ClusterReport) -> None:
    assert report.slow.rank is None
    # DP [0, 1] differ by 22.1 ms, DP [2, 3] by 16.5 ms: each group's threshold is 3 x the other's gap
    assert report.slow.text.startswith(
        "no slow rank within any group: DP group [0, 1]: level, largest gap 22,124.8 us (rank 0 vs 1), threshold "
        "49,495.1 us (spread elsewhere 16,498.4 us); DP group [2, 3]: level, largest gap 16,498.4 us (rank 3 vs 2), "
        "threshold 66,374.5 us (spread elsewhere 22,124.8 us)"
    )
    assert any(
        "exceeds the median of its group's other ranks by more than 3 x the median such excess in the other "
        "groups, and by more than 5% of that median" in line
        for line in report.layout_lines
    )


def _slow_down(root: Path, rank: int, by_us: float) -> None:
    """In a copy of the capture: ``rank``'s one step row gets ``by_us`` more Computing (the third column)."""
    path = root / f"rank_{rank}_ascend_pt" / OUT / "step_trace_time.csv"
    path.chmod(0o644)
    head, row = path.read_text().splitlines()
    cells = row.split(",")
    cells[2] = str(float(cells[2]) + by_us)
    path.write_text(f"{head}\n{','.join(cells)}\n")


def test_a_rank_slower_than_its_dp_peer_is_named(tmp_path: Path) -> None:
    """The real capture with one number changed: rank 1's Computing 100 ms longer than its DP peer's."""
    root = tmp_path / "level2"
    shutil.copytree(CAPTURE, root)
    _slow_down(root, rank=1, by_us=100_000)
    report = cluster.cluster_report(load_cluster(root))
    assert report.slow.rank == 1
    assert report.slow.text.startswith(
        "slowest rank within its group: DP group [0, 1]: rank 1 is slow — Computing + Free 467,723.3 us vs "
        "389,848.1 us (median of the others; +77,875.2 us, threshold 49,495.1 us)"
    )
    assert "peers wait for it in the data-parallel gradient collectives" in report.slow.text


def test_the_layout_is_read_from_a_databases_meta_data(tmp_path: Path) -> None:
    """torch_npu's database export keeps the same keys as rows of META_DATA (name, value as JSON text)."""
    rank0 = CAPTURE / "rank_0_ascend_pt"
    values = json.loads((rank0 / "profiler_metadata.json").read_text())
    db = tmp_path / "ascend_pytorch_profiler_0.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE META_DATA (name TEXT, value TEXT)")
        conn.executemany("INSERT INTO META_DATA VALUES (?, ?)", [(k, json.dumps(v)) for k, v in values.items()])
    conn.close()
    from_db = read_rank_metadata(tmp_path, db)
    from_text = read_rank_metadata(rank0)
    assert from_db is not None and from_db.source.endswith("META_DATA")
    assert (from_db.distributed_args, from_db.groups) == (from_text.distributed_args, from_text.groups)


def test_without_metadata_the_view_is_as_before() -> None:
    report = cluster.cluster_report(load_cluster(NO_LAYOUT))  # profiler_metadata.json: ENV_VARIABLES only
    assert report.layout is None and report.stage_rows == [] and report.layout_lines == []
    assert report.slow.text.startswith("no slow rank: median Computing + Free differ by at most")
    assert "-- Parallel layout" not in cluster_text(report)


def test_cli_prints_the_layout_and_the_stages() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "common", "cluster", str(CAPTURE)], capture_output=True, text=True, cwd=REPO, timeout=300
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert "-- Parallel layout (profiler_metadata.json: distributed_args, parallel_group_info) --" in lines
    assert any(line.startswith("layout (profiler_metadata.json): TP 1 x PP 2 x DP 2 x CP 1 x EP 1; ") for line in lines)
    assert any(line.startswith("UNBALANCED PIPELINE — step 13: pipeline stage 1 (ranks 2, 3)") for line in lines)
    assert any(line.split()[:3] == ["PP", "pp", "0,"] and "3985310405473756128" in line for line in lines)
    stage_rows = [
        line.split()
        for line in lines
        if line.split()[:2] in (["13", "0"], ["13", "1"]) and "," in line and len(line.split()) == 12
    ]
    assert [row[:4] for row in stage_rows] == [["13", "0", "0,", "1"], ["13", "1", "2,", "3"]]
    assert stage_rows[0][4] == "231,290.1" and stage_rows[1][4] == "401,131.7"


def test_a_tensor_parallel_layout_gets_tensor_parallel_advice(tmp_path: Path) -> None:
    """No public capture with tensor parallelism above 1 was found, so this is the real capture with its layout
    relabelled, said so: the data-parallel groups [0, 1] and [2, 3] renamed "tp" (sizes TP 2 x PP 2 x DP 1), and
    rank 1's Computing 100 ms longer, as in the DP test above. The verdict must advise on the TP collectives."""
    root = tmp_path / "level2"
    shutil.copytree(CAPTURE, root)
    for rank in range(4):
        path = root / f"rank_{rank}_ascend_pt" / "profiler_metadata.json"
        path.chmod(0o644)
        meta = json.loads(path.read_text())
        meta["distributed_args"].update(tensor_model_parallel_size=2, data_parallel_size=1)
        groups = meta["parallel_group_info"]
        for key, group in list(groups.items()):
            if group["group_name"] == "tp":
                del groups[key]  # the one-rank TP groups give way to the two-rank ones
        for group in groups.values():
            if group["group_name"] in ("dp", "dp_cp"):
                group["group_name"] = "tp"
        path.write_text(json.dumps(meta))
    _slow_down(root, rank=1, by_us=100_000)
    view = load_cluster(root)
    layout = parallel_layout(view)
    assert [g.ranks for g in layout.of("TP")] == [(0, 1), (2, 3)] and layout.of("DP") == []
    assert layout.sizes["TP"] == 2
    report = cluster.cluster_report(view)
    assert report.slow.rank == 1 and report.slow.text.startswith("slowest rank within its group: TP group [0, 1]: ")
    assert "the group's collectives (all-reduce / all-gather of activations) wait for it" in report.slow.text
    assert any(
        line.startswith("tensor parallel: every layer's TP collectives sit on the critical path")
        for line in cluster_text(report).splitlines()
    )
