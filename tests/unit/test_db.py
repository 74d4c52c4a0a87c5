"""The SQLite exports (torch_npu export_type=db, msprof --type=db) read into the text readers' rows.

Every expected number comes from the database itself by a separate raw sqlite3 query, never from
the lab's reader. The db capture is a different run of the same workload as the text captures
(test_db_and_text_are_different_runs), so db and text are compared in structure, not in numbers.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from helpers import FIXTURES

from common.analyze.compare import compare
from common.formats.run_ops import load_run
from common.errors import LabError
from common.formats import cluster_analysis_db, sqlite_file
from common.formats.cluster import load_cluster
from common.formats.datasets import find_datasets
from common.formats.export_facts import export_sides
from common.formats.db import ProfilerDb
from common.formats.engine import pl

CAPTURE = FIXTURES / "npu" / "msinsight_torch_npu"
OUT = "ASCEND_PROFILER_OUTPUT"
RANKS = (0, 1)


@pytest.fixture
def db_capture(tmp_path: Path) -> Path:
    """A copy of the db export: reading a WAL database creates -wal/-shm files beside it."""
    target = tmp_path / "db_level1"
    shutil.copytree(CAPTURE / "db_level1", target)
    return target


def db_path(root: Path, rank: int) -> Path:
    return root / f"rank{rank}_ascend_pt" / OUT / f"ascend_pytorch_profiler_{rank}.db"


def raw(path: Path, sql: str, params: tuple = ()) -> list[tuple]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


# --- the readers against raw SQL -----------------------------------------------------------------
@pytest.mark.parametrize("rank", RANKS)
def test_per_op_type_totals_equal_raw_sql(db_capture: Path, rank: int) -> None:
    path = db_path(db_capture, rank)
    expected = {
        op: (count, ns)
        for op, count, ns in raw(
            path,
            """
        SELECT s.value, count(*), sum(t.endNs - t.startNs) FROM TASK t
        JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId JOIN STRING_IDS s ON s.id = c.opType
        GROUP BY s.value""",
        )
    }
    expected.update(
        {
            op: (count, ns)
            for op, count, ns in raw(
                path,
                """
        SELECT s.value, count(*), sum(endNs - startNs) FROM COMMUNICATION_OP o
        JOIN STRING_IDS s ON s.id = o.opType GROUP BY s.value""",
            )
        }
    )
    db = ProfilerDb(path)
    got_totals = {}
    for task in db.tasks():
        count, ns = got_totals.get(task.op_type, (0, 0))
        got_totals[task.op_type] = (count + 1, ns + round(task.duration_us * 1000))
    assert got_totals == expected
    per = db.task_totals().group_by("op_type").agg(pl.col("count").sum(), pl.col("total_us").sum())
    assert {op: (c, round(t * 1000)) for op, c, t in per.iter_rows()} == expected
    assert expected["hcom_allReduce_"][0] == 4 and len(expected) > 30


@pytest.mark.parametrize("rank", RANKS)
def test_task_fields_equal_raw_rows(db_capture: Path, rank: int) -> None:
    path = db_path(db_capture, rank)
    rows = raw(
        path,
        """
        SELECT t.startNs, t.endNs, n.value, ty.value, core.value, c.blockDim, sh.value FROM TASK t
        JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId JOIN STRING_IDS n ON n.id = c.name
        JOIN STRING_IDS ty ON ty.id = c.opType JOIN STRING_IDS core ON core.id = c.taskType
        LEFT JOIN STRING_IDS sh ON sh.id = c.inputShapes ORDER BY t.startNs, t.globalTaskId""",
    )
    tasks = [t for t in ProfilerDb(path).tasks() if t.task_type != "HCCL"]
    assert len(tasks) == len(rows) == 187
    for task, (start, end, name, op_type, core, block, shapes) in zip(tasks, rows):
        assert (task.op_name, task.op_type, task.task_type, task.block_dim) == (name, op_type, core, block)
        assert round(task.duration_us * 1000) == end - start
        assert abs(task.start_us - start / 1000) <= 0.5  # an absolute µs float keeps ~0.25 µs
        # the database keeps msprof's quotes around shapes; the text readers strip them
        assert task.input_shapes == (shapes.strip('"') if shapes not in (None, "N/A") else None)
    assert {t.task_type for t in tasks} == {
        core
        for (core,) in raw(
            path,
            """
        SELECT DISTINCT s.value FROM COMPUTE_TASK_INFO c JOIN STRING_IDS s ON s.id = c.taskType""",
        )
    }


@pytest.mark.parametrize("rank", RANKS)
def test_pmu_times_in_us_like_op_summary(db_capture: Path, rank: int) -> None:
    path = db_path(db_capture, rank)
    aiv = dict(
        raw(
            path,
            """SELECT p.globalTaskId, p.value FROM TASK_PMU_INFO p JOIN STRING_IDS s ON s.id = p.name
                            WHERE s.value = 'aiv_total_time'""",
        )
    )
    names = dict(
        raw(path, "SELECT c.globalTaskId, s.value FROM COMPUTE_TASK_INFO c JOIN STRING_IDS s ON s.id = c.name")
    )
    by_name = {}
    for gid, value in aiv.items():
        by_name.setdefault(names[gid], []).append(value / 1000)
    tasks = [t for t in ProfilerDb(path).tasks() if t.pmu]
    assert len(tasks) == len(aiv) > 150
    for task in tasks:
        assert task.pmu["aiv_time(us)"] in by_name[task.op_name]
        # the cores' busy time (cycles / frequency) is about the task's duration, never 1000x it (ns)
        assert task.pmu["aiv_time(us)"] <= 1.1 * task.duration_us
        assert task.pmu["aicore_time(us)"] <= 1.1 * task.duration_us


@pytest.mark.parametrize("rank", RANKS)
def test_step_ids_from_step_time(db_capture: Path, rank: int) -> None:
    path = db_path(db_capture, rank)
    ((step, inside),) = raw(
        path,
        """SELECT s.id, count(*) FROM TASK t JOIN COMPUTE_TASK_INFO c USING (globalTaskId),
                                     STEP_TIME s WHERE t.startNs BETWEEN s.startNs AND s.endNs GROUP BY s.id""",
    )
    tasks = ProfilerDb(path).compute_tasks()
    assert sum(t.step_id == step for t in tasks) == inside
    assert step == 50


@pytest.mark.parametrize("rank", RANKS)
def test_steps_equal_analysis_db(db_capture: Path, rank: int) -> None:
    analysis = db_path(db_capture, rank).parent / "analysis.db"
    ((step, *values),) = raw(
        analysis,
        """SELECT step, computing, communication_not_overlapped, overlapped,
        communication, free, stage, bubble, preparing FROM StepTraceTime""",
    )
    db = ProfilerDb(db_path(db_capture, rank))
    (row,) = db.steps()
    assert row.step == int(step)
    assert [
        row.computing_us,
        row.communication_not_overlapped_us,
        row.overlapped_us,
        row.communication_us,
        row.free_us,
        row.stage_us,
        row.bubble_us,
        row.preparing_us,
    ] == values
    assert db.steps_and_source[1] == "analysis.db StepTraceTime"
    # the fixture's fact: communication not overlapped is about 70% of the step
    assert 0.6 < row.communication_not_overlapped_us / row.total_us < 0.8


def test_steps_rebuilt_from_overlap_analysis_agree_with_step_trace_time(db_capture: Path) -> None:
    """Without analysis.db, rank 0's OVERLAP_ANALYSIS events rebuild StepTraceTime to the ns."""
    analysis = db_path(db_capture, 0).parent / "analysis.db"
    ((computing, not_overlapped, free, stage, preparing),) = raw(
        analysis, "SELECT computing, communication_not_overlapped, free, stage, preparing FROM StepTraceTime"
    )
    analysis.unlink()
    db = ProfilerDb(db_path(db_capture, 0))
    (row,) = db.steps()
    assert "OVERLAP_ANALYSIS events, per STEP_TIME step" in db.steps_and_source[1]
    got = (row.computing_us, row.communication_not_overlapped_us, row.free_us, row.stage_us, row.preparing_us)
    assert got == pytest.approx((computing, not_overlapped, free, stage, preparing), abs=1e-6)
    # rank 1's database has no OVERLAP_ANALYSIS (only rank 0's was opened by MindStudio Insight)
    (db_path(db_capture, 1).parent / "analysis.db").unlink()
    assert ProfilerDb(db_path(db_capture, 1)).steps() == []


@pytest.mark.parametrize("rank", RANKS)
def test_communication_equals_communication_op(db_capture: Path, rank: int) -> None:
    path = db_path(db_capture, rank)
    rows = raw(
        path,
        """SELECT s.value, o.startNs, o.endNs FROM COMMUNICATION_OP o
                        JOIN STRING_IDS s ON s.id = o.opName ORDER BY o.startNs""",
    )
    ops = ProfilerDb(path).communication()
    assert [(c.op_name, round(c.duration_us * 1000)) for c in ops] == [(name, end - start) for name, start, end in rows]
    # waitNs is a column only rank 0's database has (added by MindStudio Insight): N/A on rank 1
    has_wait = "waitNs" in [c[1] for c in raw(path, "PRAGMA table_info(COMMUNICATION_OP)")]
    waits = [w for (w,) in raw(path, "SELECT waitNs FROM COMMUNICATION_OP ORDER BY startNs")] if has_wait else []
    assert [None if c.wait_us is None else round(c.wait_us * 1000) for c in ops] == (waits or [None] * len(ops))
    assert has_wait == (rank == 0)
    assert {c.step_id for c in ops} == {50} and {c.device_id for c in ops} == {str(rank)}


@pytest.mark.parametrize("rank", RANKS)
def test_memory_readers_equal_raw_sql(db_capture: Path, rank: int) -> None:
    path = db_path(db_capture, rank)
    ((records, reserved_max, allocated_last),) = raw(
        path,
        """SELECT count(*), max(totalReserved),
        (SELECT totalAllocated FROM MEMORY_RECORD ORDER BY timestamp DESC, rowid DESC LIMIT 1) FROM MEMORY_RECORD""",
    )
    ((ops, size_sum),) = raw(path, "SELECT count(*), sum(size) FROM OP_MEMORY")
    db = ProfilerDb(path)
    memory = db.memory_records()
    assert len(memory) == records
    assert max(m.total_reserved_mb for m in memory) == reserved_max / 1048576
    assert {m.device for m in memory} == {f"NPU:{rank}"}
    op_memory = db.op_memory()
    assert len(op_memory) == ops
    assert sum(o.size_kb for o in op_memory) == pytest.approx(size_sum / 1024)
    assert allocated_last is not None


# --- db against the text export of the same workload ---------------------------------------------
def collection_end(folder: Path) -> int:
    (info,) = folder.glob("profiler_info_*.json")
    return json.loads(info.read_text())["end_info"]["collectionTimeEnd"]


@pytest.mark.parametrize("rank", RANKS)
def test_db_and_text_are_different_runs(rank: int) -> None:
    db_end = collection_end(CAPTURE / "db_level1" / f"rank{rank}_ascend_pt")
    text_end = collection_end(CAPTURE / "text_level1" / f"rank{rank}_ascend_pt")
    assert abs(db_end - text_end) > 60e9  # minutes apart: numbers differ, structure must not


@pytest.mark.parametrize("rank", RANKS)
def test_db_has_the_text_exports_structure(db_capture: Path, rank: int, tmp_path: Path) -> None:
    text_dir = CAPTURE / "text_level1" / f"rank{rank}_ascend_pt" / OUT
    (text,) = find_datasets(text_dir)
    (db,) = find_datasets(db_path(db_capture, rank).parent)
    assert (text.kind, db.kind) == ("torch_npu", "torch_npu_db")
    assert db.type_counts == text.type_counts  # same ops, same number of tasks each, allReduce included
    assert len(db.tasks) == len(text.tasks) == 191
    assert {(t.op_type, t.task_type) for t in db.tasks} == {(t.op_type, t.task_type) for t in text.tasks}
    assert {(t.op_type, t.input_shapes) for t in db.tasks} == {(t.op_type, t.input_shapes) for t in text.tasks}
    assert {t.step_id for t in db.tasks} == {t.step_id for t in text.tasks} == {50}
    assert set(db.tasks[0].pmu) == set(text.tasks[0].pmu)
    # msprof computes cube_utilization from the chip's AI Core count, which the database does not record
    assert db.tasks[0].pmu["cube_utilization(%)"] is None and text.tasks[0].pmu["cube_utilization(%)"] is not None
    # op_statistic: the text file's rows (compute only) vs the db's, built from its compute tasks
    assert sorted((s.op_type, s.core_type, s.count) for s in db.op_statistic) == sorted(
        (s.op_type, s.core_type, s.count) for s in text.op_statistic
    )
    assert [s.step for s in db.steps] == [s.step for s in text.steps] == [50]


# --- datasets: discovery, one read per capture, cross-check sides --------------------------------
def test_find_datasets_finds_db_exports(db_capture: Path) -> None:
    found = find_datasets(db_capture)
    assert [(d.kind, d.db.name) for d in found] == [
        ("torch_npu_db", "ascend_pytorch_profiler_0.db"),
        ("torch_npu_db", "ascend_pytorch_profiler_1.db"),
    ]
    assert found[0].source == "read: database export ascend_pytorch_profiler_0.db"


def both_exports(tmp_path: Path) -> Path:
    """Rank 0's text export with rank 0's db export beside it (as export_type=[text, db] writes them)."""
    folder = tmp_path / "both" / "rank0_ascend_pt"
    shutil.copytree(CAPTURE / "text_level1" / "rank0_ascend_pt", folder)
    for name in ("ascend_pytorch_profiler_0.db", "analysis.db"):
        shutil.copy(CAPTURE / "db_level1" / "rank0_ascend_pt" / OUT / name, folder / OUT / name)
    return folder.parent


def test_text_and_db_in_one_folder_read_once_text_first(tmp_path: Path) -> None:
    root = both_exports(tmp_path)
    (ds,) = find_datasets(root)
    assert ds.kind == "torch_npu" and not ds.is_db
    assert "not read: ascend_pytorch_profiler_0.db" in ds.source
    text, db = export_sides(ds)
    assert (text.source, db.source) == ("kernel_details", "ascend_pytorch_profiler_0.db")
    raw_counts = dict(
        raw(
            root / "rank0_ascend_pt" / OUT / "ascend_pytorch_profiler_0.db",
            """
        SELECT s.value, count(*) FROM TASK t JOIN COMPUTE_TASK_INFO c USING (globalTaskId)
        JOIN STRING_IDS s ON s.id = c.opType GROUP BY s.value""",
        )
    )
    assert {op: c for op, (c, _) in db.per_type.items() if op != "hcom_allReduce_"} == raw_counts
    assert {op: c for op, (c, _) in text.per_type.items()} == {op: c for op, (c, _) in db.per_type.items()}
    assert (text.steps_source, db.steps_source) == ("step_trace_time.csv", "analysis.db StepTraceTime")
    assert [s.step for s in text.steps] == [s.step for s in db.steps] == [50]


def test_incomplete_text_gives_way_to_the_db(tmp_path: Path) -> None:
    root = both_exports(tmp_path)
    (root / "rank0_ascend_pt" / OUT / "kernel_details.csv").unlink()
    (ds,) = find_datasets(root)
    assert ds.kind == "torch_npu_db"
    assert "incomplete text export of the same capture: no kernel_details file" in ds.source
    assert export_sides(ds) is None  # one complete side only: nothing to cross-check
    assert len(ds.tasks) == 191


def test_msprof_db_beside_its_text_export_and_alone(tmp_path: Path) -> None:
    """msprof_<ts>.db sits in PROF_*/ beside mindstudio_profiler_output/ (a torch_npu db stands in for one)."""
    source = db_path(CAPTURE / "db_level1", 0)
    with_text = tmp_path / "a" / "PROF_000001_20260101000000000_ABCDEFGHIJKLMNOP"
    shutil.copytree(FIXTURES / "npu" / "cann85_minimal", tmp_path / "cann")
    (text_dir,) = (tmp_path / "cann").rglob("mindstudio_profiler_output")
    shutil.copytree(text_dir, with_text / "mindstudio_profiler_output")
    shutil.copy(source, with_text / "msprof_20260101000000.db")
    (ds,) = find_datasets(tmp_path / "a")
    assert ds.kind == "msprof" and "msprof_20260101000000.db" in ds.source
    alone = tmp_path / "b" / "PROF_000001_20260101000000000_ABCDEFGHIJKLMNOP"
    alone.mkdir(parents=True)
    shutil.copy(source, alone / "msprof_20260101000000.db")
    (ds,) = find_datasets(tmp_path / "b")
    assert ds.kind == "msprof_db"
    assert {t.task_type for t in ds.tasks if t.op_type == "hcom_allReduce_"} == {"COMMUNICATION"}  # op_summary's name


# --- cluster and compare on db exports -----------------------------------------------------------
def test_load_cluster_reads_step_trace_time_from_db(db_capture: Path) -> None:
    view = load_cluster(db_capture)
    for rank in RANKS:
        ((computing, free),) = raw(
            db_path(db_capture, rank).parent / "analysis.db", "SELECT computing, free FROM StepTraceTime"
        )
        (row,) = view.steps[rank]
        assert (row.step, row.computing_us, row.free_us) == (50, computing, free)
    assert [len(p.communication()) for p in view.ranks] == [4, 4]


def test_compare_matches_db_ops_with_text_ops(db_capture: Path) -> None:
    """Different runs of one workload: every op of the text run is found in the db run, by type and shape."""
    text = load_run(CAPTURE / "text_level1")
    db = load_run(db_capture)
    assert set(text.ops) == set(db.ops)
    result = compare([text], [db], threshold_pct=1000)
    assert not result.regressions


# --- damaged and foreign databases: one line each ------------------------------------------------
def one_line_error(path: Path) -> str:
    with pytest.raises(LabError) as err:
        ProfilerDb(path).tasks()
    text = str(err.value)
    assert "\n" not in text and " — " in text
    return text


def test_truncated_copy(db_capture: Path) -> None:
    path = db_path(db_capture, 0)
    path.write_bytes(path.read_bytes()[:400_000])
    assert "truncated: 400,000 bytes of the 856,064 its header declares" in one_line_error(path)


def test_shorter_than_a_header(db_capture: Path) -> None:
    path = db_path(db_capture, 0)
    path.write_bytes(path.read_bytes()[:50])
    assert "truncated: 50 bytes" in one_line_error(path)


def test_damaged_page(db_capture: Path) -> None:
    path = db_path(db_capture, 0)
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[page:] = b"\xff" * (len(data) - page)  # every page but the first (the schema) overwritten
    path.write_bytes(bytes(data))
    assert "the database is damaged (sqlite: " in one_line_error(path)


@pytest.mark.parametrize("content", [b"Step,Computing\n50,1.0\n", b""])
def test_not_a_database(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "ascend_pytorch_profiler_0.db"
    path.write_bytes(content)
    expected = "not an SQLite database (file is not a database)" if content else "file is empty (0 bytes)"
    assert expected in one_line_error(path)


def test_foreign_db_names_missing_table(db_capture: Path, tmp_path: Path) -> None:
    path = db_path(db_capture, 0)
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE TASK")
    conn.commit()
    conn.close()
    assert "table(s) TASK missing" in one_line_error(path)
    other = tmp_path / "msprof_20260101000000.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE notes (x TEXT)")
    conn.commit()
    conn.close()
    text = one_line_error(other)
    assert "not a msprof (--type=db) database: table(s) TASK, COMPUTE_TASK_INFO, STRING_IDS missing" in text
    assert "(it has 1 table(s): notes)" in text


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_locked_database(db_capture: Path, monkeypatch: pytest.MonkeyPatch, journal: str) -> None:
    """A writer holding the database: refused as locked after a short wait, not read half-written."""
    monkeypatch.setattr(sqlite_file, "LOCK_WAIT_S", 0.1)
    path = db_path(db_capture, 0)
    writer = sqlite3.connect(path, isolation_level=None)
    try:
        writer.execute(f"PRAGMA journal_mode={journal}")
        if journal == "wal":  # WAL readers never wait for writers, unless the writer takes the file exclusively
            writer.execute("PRAGMA locking_mode=EXCLUSIVE")
        writer.execute("BEGIN EXCLUSIVE")
        writer.execute("DELETE FROM TASK")
        assert "the database is locked by another program (sqlite: database is locked)" in one_line_error(path)
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert len(ProfilerDb(path).tasks()) == 191  # released: the whole file, nothing of the rolled-back write


def test_reading_never_writes_the_database(db_capture: Path) -> None:
    path = db_path(db_capture, 0)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    ds = find_datasets(path.parent)[0]
    assert ds.tasks and ds.steps and ds.op_statistic
    ProfilerDb(path).memory_records()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_msprof_analyze_cluster_db_read_as_its_csv(tmp_path: Path) -> None:
    """Given database exports, msprof-analyze writes ClusterStepTraceTime into cluster_analysis.db, not a CSV."""
    path = tmp_path / "cluster_analysis.db"
    conn = sqlite3.connect(path)
    conn.execute(
        'CREATE TABLE ClusterStepTraceTime (step TEXT, type TEXT, "index" INTEGER, computing NUMERIC, '
        "communication_not_overlapped NUMERIC, free NUMERIC, dp_index INTEGER)"
    )
    conn.execute("INSERT INTO ClusterStepTraceTime VALUES ('50', 'rank', 1, 8915.634, 94556.05, 25840.499, 0)")
    conn.commit()
    conn.close()
    assert cluster_analysis_db.read_cluster_step_trace_time(path) == [
        {
            "Step": "50",
            "Type": "rank",
            "Index": "1",
            "Computing": "8915.634",
            "Communication(Not Overlapped)": "94556.05",
            "Free": "25840.499",
        }
    ]
