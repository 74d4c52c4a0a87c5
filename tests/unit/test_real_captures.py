"""Every real capture under tests/fixtures/npu/, read by the lab, against numbers taken from its files here.

The expected numbers come from the files by an independent path (the csv and json modules, raw
sqlite3 queries), never from the lab's readers; the expected verdicts are the ones the README's
description of each capture implies. A capture added to tests/fixtures/npu/ without an entry in
EXPECT fails, so no capture goes untested.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import FIXTURES

from common.analyze import advisories, checks, families
from common.analyze.bounds import step as step_bound
from common.analyze.parallel_layout import parallel_layout
from common.analyze.slow_rank import collective_arrivals
from common.formats.cluster import load_cluster
from common.formats.export_facts import integrity_facts
from common.formats.communication import rank_collectives
from common.render.directory import memory_summary
from common.formats.datasets import find_datasets

NPU = FIXTURES / "npu"
OUT = "ASCEND_PROFILER_OUTPUT"
EXPORT_DIR = re.compile(r"^(PROF_.+|.+_ascend_pt|ASCEND_PROFILER_OUTPUT|mindstudio_profiler_output)$")
COMM_CORES = ("HCCL", "COMMUNICATION")


def captures(folder: Path = NPU) -> list[str]:
    """The capture folders: a folder holding an export (PROF_*, *_ascend_pt ...), else each of its sub-folders."""
    subs = sorted(p for p in folder.iterdir() if p.is_dir())
    if folder != NPU and (not subs or any(EXPORT_DIR.match(p.name) for p in subs)):
        return [folder.relative_to(NPU).as_posix()]
    return [c for p in subs for c in captures(p)]


# --- independent readers -------------------------------------------------------------------------------
def csv_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8-sig") as f:
        return list(csv.DictReader(f))


def per_type(
    records: list[dict[str, str]], op: str, core: str, duration: str
) -> dict[tuple[str, str], tuple[int, float]]:
    out: dict[tuple[str, str], tuple[int, float]] = {}
    for r in records:
        key = (r[op].strip(), r[core].strip())
        count, total = out.get(key, (0, 0.0))
        out[key] = (count + 1, total + float(r[duration].strip()))
    return out


def lab_per_type(ds) -> dict[tuple[str, str], tuple[int, float]]:
    out: dict[tuple[str, str], tuple[int, float]] = {}
    for op, core, count, total in ds.task_totals.select("op_type", "task_type", "count", "total_us").iter_rows():
        c, t = out.get((op, core), (0, 0.0))
        out[(op, core)] = (c + int(count), t + total)
    return out


def assert_same_totals(lab: dict, expected: dict) -> None:
    assert set(lab) == set(expected)
    for key, (count, total) in expected.items():
        assert lab[key][0] == count, key
        assert lab[key][1] == pytest.approx(total, abs=1e-6), key


def step_csv(path: Path) -> list[tuple[int, float, float, float]]:
    return [
        (int(r["Step"]), float(r["Computing"]), float(r["Communication(Not Overlapped)"]), float(r["Free"]))
        for r in csv_rows(path)
    ]


def query(db: Path, sql: str) -> list[tuple]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def assert_steps(ds, expected: list[tuple[int, float, float, float]]) -> None:
    got = [(s.step, s.computing_us, s.communication_not_overlapped_us, s.free_us) for s in ds.steps]
    assert [g[0] for g in got] == [e[0] for e in expected]
    for g, e in zip(got, expected):
        assert g[1:] == pytest.approx(e[1:], abs=1e-6)


def assert_bound(ds, kind: str, computing: float, comm: float, free: float) -> None:
    """The lab's verdict over the step, and the numbers it names."""
    verdict = step_bound.step_verdict(step_bound.summarize_steps(ds.steps))
    assert verdict.kind == kind, verdict.text
    step = computing + comm + free
    if kind == "host-bound":  # one device, no communication: Computing against Free
        assert verdict.text.startswith(
            f"host-bound: Computing {computing:.1f} us vs Free {free:.1f} us per step "
            f"(Computing = {100 * computing / step:.1f}% of the step"
        ), verdict.text
    else:
        assert verdict.text.startswith(
            f"{kind}: Computing {computing:.1f} us ({100 * computing / step:.1f}%), Communication(Not Overlapped) "
            f"{comm:.1f} us ({100 * comm / step:.1f}%), Free {free:.1f} us ({100 * free / step:.1f}%) of the "
            f"{step:.1f} us step"
        ), verdict.text


def integrity(root: Path, ds_list) -> list[checks.Verdict]:
    return checks.integrity_verdicts(integrity_facts(ds_list, root))


# --- one expectation per capture -------------------------------------------------------------------------
def expect_cann85(root: Path) -> None:
    (ds,) = find_datasets(root)
    out = next(root.glob("PROF_*/mindstudio_profiler_output"))
    summary = per_type(csv_rows(next(out.glob("op_summary_*.csv"))), "OP Type", "Task Type", "Task Duration(us)")
    assert summary == {("sanitized_kernel", "MIX_AIC"): (2, pytest.approx(84457.6, abs=1e-6))}
    assert ds.kind == "msprof" and ds.task_count == 2
    assert_same_totals(lab_per_type(ds), summary)
    stat = {
        (r["OP Type"], r["Core Type"]): (int(r["Count"]), float(r["Total Time(us)"]))
        for r in csv_rows(next(out.glob("op_statistic_*.csv")))
    }
    assert {(s.op_type, s.core_type): (s.count, s.total_us) for s in ds.op_statistic} == stat
    assert ds.steps == []  # msprof in single-op mode writes no step table
    (verdict,) = integrity(root, [ds])
    assert verdict.ok and verdict.name.startswith("op_statistic agrees with op_summary"), verdict


def expect_kernel_details(root: Path) -> None:
    (ds,) = find_datasets(root)
    records = csv_rows(root / OUT / "kernel_details.csv")
    expected = per_type(records, "Type", "Accelerator Core", "Duration(us)")
    assert ds.task_count == len(records)
    assert_same_totals(lab_per_type(ds), expected)
    top = max(expected, key=lambda k: expected[k][1])
    assert (ds.op_statistic[0].op_type, ds.op_statistic[0].core_type) == top == ("MatMulV3", "AI_CORE")
    assert ds.steps == [] and integrity(root, [ds]) == []  # one file: nothing to cross-check


def expect_aicpu_kernel_details(root: Path) -> None:
    (ds,) = find_datasets(root)
    records = csv_rows(root / OUT / "kernel_details.csv")
    expected = per_type(records, "Type", "Accelerator Core", "Duration(us)")
    assert ds.task_count == len(records) == 66
    assert_same_totals(lab_per_type(ds), expected)
    assert expected[("Cast", "AI_CPU")] == (4, pytest.approx(517.06))  # trans_Cast_5 / _18: INT32 -> UINT64
    (advice,) = advisories.advisories(ds.tasks)
    assert advice.name == "ops on the AI CPU" and advice.rows[0][:3] == ["Cast", "AI_CPU", 4]


def overlap_sums(trace: Path) -> dict[str, tuple[int, float]]:
    events = json.loads(trace.read_text())
    pids = {
        e["pid"]
        for e in events
        if e.get("ph") == "M"
        and e.get("name") == "process_name"
        and (e.get("args") or {}).get("name") == "Overlap Analysis"
    }
    out: dict[str, tuple[int, float]] = {}
    for e in events:
        if e.get("ph") == "X" and e.get("pid") in pids:
            count, total = out.get(e["name"], (0, 0.0))
            out[e["name"]] = (count + 1, total + float(e["dur"]))
    return out


def expect_trace_view(root: Path) -> None:
    (ds,) = find_datasets(root)
    sums = overlap_sums(next(root.glob(f"*_ascend_pt/{OUT}/trace_view.json")))
    assert sums["Computing"][0] == 10 and sums["Free"][0] == 10  # as the README describes the cut
    comm = sums.get("Communication(Not Overlapped)", (0, 0.0))[1]
    (row,) = ds.steps  # no step_trace_time.csv, no ProfilerStep: one whole-trace row
    assert row.step is None
    assert (row.computing_us, row.communication_not_overlapped_us, row.free_us) == pytest.approx(
        (sums["Computing"][1], comm, sums["Free"][1]), abs=1e-6
    )
    assert sums["Computing"][1] / (sums["Computing"][1] + comm + sums["Free"][1]) < 0.5
    assert_bound(ds, "host-bound", sums["Computing"][1], comm, sums["Free"][1])
    assert integrity(root, [ds]) == []  # a timeline alone: nothing to cross-check


def expect_text_level0(root: Path) -> None:
    datasets = find_datasets(root)
    assert len(datasets) == 2
    level1 = {ds.folder.parent.name: ds for ds in find_datasets(NPU / "msinsight_torch_npu" / "text_level1")}
    for ds in datasets:
        rank = ds.folder.parent.name
        records = csv_rows(ds.folder / "kernel_details.csv")
        assert len(records) == ds.task_count == 191
        assert {r["Type"] for r in records} == {"N/A"}  # Level0: kernels known by name only
        steps = step_csv(ds.folder / "step_trace_time.csv")
        assert_steps(ds, steps)
        ((_, computing, comm, free),) = steps
        assert comm / (computing + comm + free) > 0.5
        assert_bound(ds, "communication-bound", computing, comm, free)
        # the Level0 and Level1 exports of one capture: the same families, kernel for kernel
        assert families.family_counts(ds.tasks) == families.family_counts(level1[rank].tasks), rank
    assert integrity(root, datasets) == []  # no op_statistic, no timeline at Level0


def expect_text_level1(root: Path) -> None:
    datasets = find_datasets(root)
    assert len(datasets) == 2
    for ds in datasets:
        kernels = csv_rows(ds.folder / "kernel_details.csv")
        expected = per_type(kernels, "Type", "Accelerator Core", "Duration(us)")
        assert_same_totals(lab_per_type(ds), expected)
        assert sum(c for (_, core), (c, _) in expected.items() if core == "HCCL") == 4
        stat = {
            (r["OP Type"], r["Core Type"]): (int(r["Count"]), float(r["Total Time(us)"]))
            for r in csv_rows(ds.folder / "op_statistic.csv")
        }
        assert {(s.op_type, s.core_type): (s.count, s.total_us) for s in ds.op_statistic} == stat
        # op_statistic is kernel_details without its HCCL rows, count for count
        assert {k: v[0] for k, v in expected.items() if k[1] not in COMM_CORES} == {k: v[0] for k, v in stat.items()}
        steps = step_csv(ds.folder / "step_trace_time.csv")
        assert_steps(ds, steps)
        ((step, computing, comm, free),) = steps
        assert step == 50 and 0.70 <= comm / (computing + comm + free) <= 0.75  # the README's 70-75%
        assert_bound(ds, "communication-bound", computing, comm, free)
        mem = memory_summary(ds)
        peak = max(
            float(r["Total Allocated(MB)"])
            for r in csv_rows(ds.folder / "memory_record.csv")
            if r["Component"] == mem.headline.component
        )
        assert mem.headline.peak_allocated_mb == pytest.approx(peak)
    found = integrity(root, datasets)
    assert len(found) == 4 and all(v.ok for v in found), found  # op_statistic and step table, per rank
    view = load_cluster(root)
    assert checks.check_collectives(rank_collectives(view.ranks)).ok


def expect_db_level1(root: Path) -> None:
    datasets = find_datasets(root)
    assert [ds.kind for ds in datasets] == ["torch_npu_db", "torch_npu_db"]
    for ds in datasets:
        db = ds.db
        (compute,) = query(
            db, "SELECT count(*) FROM TASK AS t JOIN COMPUTE_TASK_INFO AS c ON c.globalTaskId = t.globalTaskId"
        )[0]
        (comm,) = query(db, "SELECT count(*) FROM COMMUNICATION_OP")[0]
        assert (compute, comm) == (187, 4) and ds.task_count == compute + comm
        (row,) = query(
            db.parent / "analysis.db", "SELECT step, computing, communication_not_overlapped, free FROM StepTraceTime"
        )
        steps = [(int(row[0]), *map(float, row[1:]))]
        assert_steps(ds, steps)
        _, computing, not_overlapped, free = steps[0]
        assert 0.70 <= not_overlapped / (computing + not_overlapped + free) <= 0.75
        assert_bound(ds, "communication-bound", computing, not_overlapped, free)
        peaks = dict(
            query(
                db,
                "SELECT s.value, max(m.totalAllocated) FROM MEMORY_RECORD AS m "
                "JOIN STRING_IDS AS s ON s.id = m.component GROUP BY s.value",
            )
        )
        mem = memory_summary(ds)
        assert mem.headline.component == "PTA+GE"
        assert mem.headline.peak_allocated_mb == pytest.approx(peaks["PTA+GE"] / 2**20)
        (ops,) = query(db, "SELECT count(*) FROM OP_MEMORY")[0]
        assert mem.operator_rows == ops and mem.operator_source == "OP_MEMORY"
    # only rank 0's database carries OVERLAP_ANALYSIS (added by MindStudio Insight): its step table is checked
    (verdict,) = integrity(root, datasets)
    assert verdict.ok and "db_level1" not in verdict.name and "rank0" in verdict.name, verdict
    view = load_cluster(root)
    assert checks.check_collectives(rank_collectives(view.ranks)).ok
    starts = {
        r: dict(
            query(
                next((root / f"rank{r}_ascend_pt" / OUT).glob("ascend_pytorch_profiler_*.db")),
                "SELECT s.value, o.startNs FROM COMMUNICATION_OP AS o JOIN STRING_IDS AS s ON s.id = o.opName",
            )
        )
        for r in (0, 1)
    }
    waits = {
        r: sum(max(starts[0][n], starts[1][n]) - starts[r][n] for n in starts[0]) / len(starts[0]) / 1000
        for r in (0, 1)
    }
    arrivals = collective_arrivals(view)
    assert arrivals.collectives == 4 and arrivals.source == "COMMUNICATION_OP"
    assert arrivals.wait_us == pytest.approx(waits, abs=0.5)  # µs floats of ~1.7e15 keep ~0.25 us


def expect_megatron_level2(root: Path) -> None:
    datasets = find_datasets(root)
    assert [ds.folder.parent.name for ds in datasets] == [f"rank_{r}_ascend_pt" for r in range(4)]
    for rank, ds in enumerate(datasets):
        steps = step_csv(ds.folder / "step_trace_time.csv")
        assert_steps(ds, steps)
        ((step, computing, comm, free),) = steps
        assert step == 13
        if comm / (computing + comm + free) >= 0.5:  # stage 0 (ranks 0, 1) waits in P2P: over half the step
            assert rank in (0, 1)
            assert_bound(ds, "communication-bound", computing, comm, free)
        else:  # stage 1 (ranks 2, 3): Computing ~49.5%, Communication ~33%: no part reaches half
            assert rank in (2, 3) and computing / (computing + comm + free) < 0.5
            assert step_bound.step_verdict(step_bound.summarize_steps(ds.steps)).kind == "mixed"
    assert integrity(root, datasets) == []  # step tables and communication.json only: nothing to cross-check
    metadata = json.loads((root / "rank_0_ascend_pt" / "profiler_metadata.json").read_text())
    pp = sorted(
        tuple(g["global_ranks"])
        for r in range(4)
        for g in json.loads((root / f"rank_{r}_ascend_pt" / "profiler_metadata.json").read_text())[
            "parallel_group_info"
        ].values()
        if g["group_name"] == "pp"
    )
    assert metadata["distributed_args"]["pipeline_model_parallel_size"] == 2 and set(pp) == {(0, 2), (1, 3)}
    layout = parallel_layout(load_cluster(root))
    assert layout.stages == [(0, 1), (2, 3)]  # stage s: index s of every PP group


EXPECT: dict[str, Callable[[Path], None]] = {
    "cann85_minimal": expect_cann85,
    "torch_npu_kernel_details": expect_kernel_details,
    "torch_npu_aicpu_kernel_details": expect_aicpu_kernel_details,
    "torch_npu_trace_view": expect_trace_view,
    "msinsight_torch_npu/text_level0": expect_text_level0,
    "msinsight_torch_npu/text_level1": expect_text_level1,
    "msinsight_torch_npu/db_level1": expect_db_level1,
    "megatron_pp2_dp2/level2": expect_megatron_level2,
}


def test_the_corpus_is_what_the_readme_lists() -> None:
    found = captures()
    assert len(found) >= 6 and set(EXPECT) <= set(found), found


@pytest.mark.parametrize("capture", captures())
def test_real_capture(capture: str, tmp_path: Path) -> None:
    assert capture in EXPECT, (
        f"{capture}: a capture without expectations: add expectations for it to EXPECT "
        "in tests/unit/test_real_captures.py"
    )
    root = tmp_path / Path(capture).name
    shutil.copytree(NPU / capture, root)  # databases get -wal/-shm files beside them while read
    EXPECT[capture](root)
