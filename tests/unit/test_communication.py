"""Which collective, and is its time waiting or moving data: on the real 2-rank msinsight capture.

Expected numbers are read from the files here by the json and sqlite3 modules (or typed from them,
with the file named), never from the lab's readers.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import FIXTURES, cluster_page, cluster_text
from helpers import ROOT as REPO  # the lab these tests run (a private copy)

from common.analyze import cluster, communication
from common.formats.cluster import load_cluster
from common.formats.communication import group_members, read_comm_analyzer, read_communication_json, read_rank_matrix

CAPTURE = FIXTURES / "npu" / "msinsight_torch_npu"
OUT = "ASCEND_PROFILER_OUTPUT"


def _json(rank: int) -> dict:
    return json.loads((CAPTURE / "text_level1" / f"rank{rank}_ascend_pt" / OUT / "communication.json").read_text())


@pytest.fixture
def text_copy(tmp_path: Path) -> Path:
    shutil.copytree(CAPTURE / "text_level1", tmp_path / "text_level1")
    return tmp_path / "text_level1"


@pytest.fixture
def db_copy(tmp_path: Path) -> Path:
    shutil.copytree(CAPTURE / "db_level1", tmp_path / "db_level1")  # WAL databases: read a copy
    return tmp_path / "db_level1"


def test_communication_json_is_read_op_by_op() -> None:
    raw = _json(0)["step50"]["collective"]["hcom_allReduce__586_0_1@17522688603477080586"]
    ops = read_communication_json(CAPTURE / "text_level1" / "rank0_ascend_pt" / OUT / "communication.json")
    assert [o.op_name for o in ops] == [f"hcom_allReduce__586_{k}_1" for k in range(4)]  # "Total Op Info" left out
    first = ops[0]
    times = raw["Communication Time Info"]
    assert (first.step, first.kind, first.group) == ("step50", "collective", "17522688603477080586")
    assert (first.elapse_ms, first.transit_ms, first.wait_ms, first.sync_ms, first.idle_ms) == (
        times["Elapse Time(ms)"],
        times["Transit Time(ms)"],
        times["Wait Time(ms)"],
        times["Synchronization Time(ms)"],
        times["Idle Time(ms)"],
    )
    assert first.start_us == 1736408883732241.5
    hccs = raw["Communication Bandwidth Info"]["HCCS"]
    assert [(x.link, x.size_mb, x.bandwidth_gbs) for x in first.links] == [
        ("HCCS", hccs["Transit Size(MB)"], 15.7676),
        ("SDMA", hccs["Transit Size(MB)"], 15.7676),
    ]


def test_analysis_db_gives_the_same_fields(db_copy: Path) -> None:
    path = db_copy / "rank0_ascend_pt" / OUT / "analysis.db"
    with sqlite3.connect(path) as conn:
        expected = conn.execute(
            "SELECT hccl_op_name, elapse_time, transit_time, wait_time, synchronization_time, "
            "idle_time FROM CommAnalyzerTime ORDER BY start_timestamp"
        ).fetchall()
    ops = read_comm_analyzer(path)
    assert [(o.op_name, o.elapse_ms, o.transit_ms, o.wait_ms, o.sync_ms, o.idle_ms) for o in ops] == expected
    assert [(x.link, round(x.size_mb, 6), x.bandwidth_gbs) for x in ops[0].links] == [
        ("HCCS", 28.647232, 15.7239),
        ("SDMA", 28.647232, 15.7239),
    ]


def test_the_ops_add_up_to_the_step_tables_communication(text_copy: Path) -> None:
    """Elapse summed over the ops is step_trace_time.csv's Communication column (rank 0: 105,991.878 us)."""
    view = load_cluster(text_copy)
    for rank, step in view.steps.items():
        split = view.communication.splits[rank]
        assert 1000 * split.elapse_ms == pytest.approx(step[0].communication_us, abs=0.01)


def test_the_verdict_says_idle_not_the_link_and_names_the_late_peer(text_copy: Path) -> None:
    verdict = communication.step_verdict(load_cluster(text_copy).communication)
    late = _json(1)["step50"]["collective"]["hcom_allReduce__586_0_1@17522688603477080586"]
    early = _json(0)["step50"]["collective"]["hcom_allReduce__586_0_1@17522688603477080586"]
    gap = (
        late["Communication Time Info"]["Start Timestamp(us)"] - early["Communication Time Info"]["Start Timestamp(us)"]
    )
    assert verdict.kind == "idle"
    assert verdict.late_rank == 1 and verdict.late_by_us == pytest.approx(gap) and round(gap, 1) == 5607.8
    assert "transit 3.77 ms (3.7%), wait 3.07 ms (3.0%), idle 96.35 ms (93.4%)" in verdict.text
    assert "rank 1 started hcom_allReduce__586_0_1 5,607.8 us after rank 0, which spent 5,615.7 us" in verdict.text
    assert "HCCS 15.58 GB/s (87% of 18 GB/s)" in verdict.text


def test_the_group_is_larger_than_the_capture(text_copy: Path) -> None:
    links = read_rank_matrix(text_copy / "rank0_ascend_pt" / OUT)
    assert group_members(links) == {"17522688603477080586": set(range(8))}
    text = cluster_text(cluster.cluster_report(load_cluster(text_copy)))
    assert "group 080586 has 8 ranks (0..7, communication matrix), this capture holds 2 (0, 1)" in text


def test_the_cluster_view_shows_the_collectives_and_fits_its_advice(text_copy: Path) -> None:
    text = cluster_text(cluster.cluster_report(load_cluster(text_copy)))
    assert "-- Collectives and point-to-point ops" in text
    assert (
        "hcom_allReduce__586_0_1  collective  76.282    0.242  2.839  2.808  73.201  0.921   28.647  HCCS 15.73" in text
    )
    assert "rank 0: 4 ops, elapse 105.992 ms = transit 3.683 + wait 5.941 (sync 5.616) + idle 96.368 ms" in text
    assert "bucket_cap_mb" not in text  # no DDP bucket advice for an op that idles
    # the arrival line names the rank by how long it kept the others waiting, not by how often it was last
    assert "the largest gap is hcom_allReduce__586_0_1, which rank 1 started 5,607.8 us after the first rank" in text


def test_the_database_export_gets_the_same_view(db_copy: Path) -> None:
    report = cluster.cluster_report(load_cluster(db_copy))
    text = cluster_text(report)
    assert "(analysis.db CommAnalyzerTime)" in text
    assert "hcom_allReduce__210_0_1" in text and "group 523210 has 8 ranks" in text
    with sqlite3.connect(db_copy / "rank0_ascend_pt" / OUT / "analysis.db") as conn:
        (first,) = conn.execute(
            "SELECT start_timestamp FROM CommAnalyzerTime WHERE hccl_op_name = 'hcom_allReduce__210_0_1'"
        ).fetchone()
    with sqlite3.connect(db_copy / "rank1_ascend_pt" / OUT / "analysis.db") as conn:
        (later,) = conn.execute(
            "SELECT start_timestamp FROM CommAnalyzerTime WHERE hccl_op_name = 'hcom_allReduce__210_0_1'"
        ).fetchone()
    assert f"rank 1 started hcom_allReduce__210_0_1 {later - first:,.1f} us after rank 0" in text


def test_a_damaged_communication_json_is_named_and_the_rest_is_reported(text_copy: Path) -> None:
    path = text_copy / "rank1_ascend_pt" / OUT / "communication.json"
    path.write_text(path.read_text()[:500])  # cut short
    text = cluster_text(cluster.cluster_report(load_cluster(text_copy)))
    assert "note: rank 1: communication analysis not read:" in text and "communication.json: unreadable" in text
    assert "rank 0: 4 ops, elapse 105.992 ms" in text and "-- Per step and rank (us) --" in text


def test_cluster_out_writes_the_text_and_a_page(text_copy: Path, tmp_path: Path) -> None:
    out = tmp_path / "cluster_out"
    run = subprocess.run(
        [sys.executable, "-m", "common", "cluster", str(text_copy), "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert f"(written to {out / 'report.html'})" in run.stdout
    page = (out / "report.html").read_text()
    assert "<h2>Collectives and point-to-point ops" in page and "hcom_allReduce__586_0_1" in page
    assert page.index("<h2>Checks</h2>") > page.index("<h2>Per step and rank")  # checks last: none failed
    assert sorted(p.name for p in text_copy.rglob("*report*")) == []  # nothing written beside the capture


def test_cluster_html_puts_a_failed_check_first(text_copy: Path) -> None:
    from common.verdict import Verdict

    report = cluster.cluster_report(load_cluster(text_copy))
    page = cluster_page(report, [Verdict("a check", False, "it failed")])
    assert page.index("<h2>Checks</h2>") < page.index("<h2>Per step and rank")


def test_every_link_but_sio_is_judged_against_its_cited_nominal_figure() -> None:
    LinkUse, bandwidth_text, low = communication.LinkUse, communication.bandwidth_text, communication.BANDWIDTH_LOW
    # MB / ms = GB/s: RDMA 5.0 (40% of 12.5), PCIE 19.0 (95% of 20), HCCS 15.0 (83% of 18)
    uses = {
        u.link: u
        for u in (
            LinkUse("RDMA", 50.0, 10.0),
            LinkUse("PCIE", 190.0, 10.0),
            LinkUse("HCCS", 150.0, 10.0),
            LinkUse("SIO", 10.0, 10.0),
        )
    }
    assert [bandwidth_text(uses[k]) for k in ("RDMA", "PCIE", "HCCS")] == [
        "RDMA 5.00 GB/s (40% of 12.5 GB/s)",
        "PCIE 19.00 GB/s (95% of 20 GB/s)",
        "HCCS 15.00 GB/s (83% of 18 GB/s)",
    ]
    assert [k for k, u in uses.items() if u.nominal_gbs and u.bandwidth_gbs < low * u.nominal_gbs] == ["RDMA"]
    assert bandwidth_text(uses["SIO"]) == "SIO 1.00 GB/s (no nominal figure cited for SIO)"


def test_files_without_the_analysis_fields_are_named_not_shown_as_an_empty_table(text_copy: Path) -> None:
    """communication.json with only the start and elapsed time of each op (what the portable backend measures): no
    rank's analysis can be read; the view says so once, names each rank's file, and prints no empty op table."""
    for rank in (0, 1):
        path = text_copy / f"rank{rank}_ascend_pt" / OUT / "communication.json"
        data = json.loads(path.read_text())
        for step in data.values():
            for kind in step.values():
                for op in kind.values():
                    times = op["Communication Time Info"]
                    op["Communication Time Info"] = {
                        k: v for k, v in times.items() if k in ("Start Timestamp(us)", "Elapse Time(ms)")
                    }
        path.write_text(json.dumps(data))
    report = cluster.cluster_report(load_cluster(text_copy))
    text = cluster_text(report)
    section = text.split("-- Collectives and point-to-point ops")[1].split("\n-- ")[0]
    assert "no rank's communication analysis could be read (the notes say why)" in section
    assert [line.split(": communication")[0] for line in section.splitlines() if line.startswith("note: rank")] == [
        "note: rank 0",
        "note: rank 1",
    ]
    assert "no Transit Time(ms)" in section and "Elapse(ms)" not in section  # no header of a table without rows
    page = cluster_page(report)
    assert "no rank&#x27;s communication analysis could be read" in page and "Elapse(ms)" not in page
