"""``python -m common report`` and ``cluster`` on torch_npu's database export (export_type=db), as a user runs them.

Expected numbers are read from the databases by raw sqlite3 queries here, not by the lab.
"""

from __future__ import annotations

import shutil
import sqlite3
import sys
from pathlib import Path

import pytest
from helpers import FIXTURES, ROOT, error_lines, run

CAPTURE = FIXTURES / "npu" / "msinsight_torch_npu" / "db_level1"
OUT = "ASCEND_PROFILER_OUTPUT"


@pytest.fixture
def db_capture(tmp_path: Path) -> Path:
    target = tmp_path / "db_level1"
    shutil.copytree(CAPTURE, target)
    return target


def step_trace_time(root: Path, rank: int) -> tuple[float, float, float]:
    conn = sqlite3.connect(f"file:{root / f'rank{rank}_ascend_pt' / OUT / 'analysis.db'}?mode=ro", uri=True)
    try:
        (row,) = conn.execute("SELECT computing, communication_not_overlapped, free FROM StepTraceTime").fetchall()
    finally:
        conn.close()
    return row


def lab(*args: str, **env: str):
    # msprof-analyze, when installed, is pointed nowhere: this test is about the lab's reading of the db
    return run([sys.executable, "-m", "common", *args], MSPROF_ANALYZE=str(FIXTURES / "no-such-tool"), **env)


def test_report_on_db_export(db_capture: Path) -> None:
    proc = lab("report", str(db_capture))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "datasets: 2" in out
    assert "Top ops: rank0_ascend_pt/ASCEND_PROFILER_OUTPUT (torch_npu_db)" in out
    assert "read: database export ascend_pytorch_profiler_1.db" in out
    assert out.count("steps from analysis.db StepTraceTime") == 2
    for rank in (0, 1):
        computing, not_overlapped, free = step_trace_time(db_capture, rank)
        step = computing + not_overlapped + free
        assert f"Communication(Not Overlapped) {not_overlapped:.1f} us ({100 * not_overlapped / step:.1f}%)" in out
    assert out.count("communication-bound: ") == 2  # about 70% of every step is communication not overlapped
    assert (db_capture / "report.md").is_file()


def test_cluster_on_db_export(db_capture: Path) -> None:
    proc = lab("cluster", str(db_capture))
    assert proc.returncode == 0, proc.stderr
    rows = {}
    for line in proc.stdout.splitlines():
        cells = line.split()
        if len(cells) >= 6 and cells[0] == "50" and cells[1] in ("0", "1"):
            rows[int(cells[1])] = cells
    assert sorted(rows) == [0, 1]
    for rank, cells in rows.items():
        computing, not_overlapped, free = step_trace_time(db_capture, rank)
        assert cells[2:4] == [f"{computing:,.1f}", f"{not_overlapped:,.1f}"]
        assert f"{free:,.1f}" in cells
    assert "[PASS] step table adds up (every rank)" in proc.stdout


def test_damaged_db_gives_one_error_line(db_capture: Path) -> None:
    path = db_capture / "rank1_ascend_pt" / OUT / "ascend_pytorch_profiler_1.db"
    path.write_bytes(path.read_bytes()[:300_000])
    proc = lab("report", str(db_capture))
    assert proc.returncode == 2
    (line,) = error_lines(proc.stderr)
    assert line.startswith(f"Error: {path}: truncated: 300,000 bytes")
    assert "Traceback" not in proc.stderr


def test_report_on_db_export_shows_memory_from_its_tables(db_capture: Path) -> None:
    conn = sqlite3.connect(
        f"file:{db_capture / 'rank1_ascend_pt' / OUT / 'ascend_pytorch_profiler_1.db'}?mode=ro", uri=True
    )
    try:
        (peak,) = conn.execute(
            "SELECT max(m.totalAllocated) FROM MEMORY_RECORD AS m JOIN STRING_IDS AS s "
            "ON s.id = m.component WHERE s.value = 'PTA+GE'"
        ).fetchone()
        (ops,) = conn.execute("SELECT count(*) FROM OP_MEMORY").fetchone()
    finally:
        conn.close()
    proc = lab("report", str(db_capture))
    assert proc.returncode == 0, proc.stderr
    assert f"peak allocated {peak / 2**20:,.1f} MB" in proc.stdout
    assert f"({ops} allocations in OP_MEMORY)" in proc.stdout
    assert "-- Memory: rank1_ascend_pt/ASCEND_PROFILER_OUTPUT --" in proc.stdout


MSPROF_ANALYZE = ROOT / ".nox" / "ecosystem" / "bin" / "msprof-analyze"


@pytest.mark.network
def test_cluster_cross_check_on_db_export_reads_cluster_analysis_db(db_capture: Path) -> None:
    """msprof-analyze writes cluster_analysis.db (not cluster_step_trace_time.csv) for database input."""
    if not MSPROF_ANALYZE.is_file():
        from common.collect import msprof_analyze

        msprof_analyze.ensure_tool()
    proc = run(
        [sys.executable, "-m", "common", "cluster", str(db_capture), "--cross-check"],
        MSPROF_ANALYZE=str(MSPROF_ANALYZE),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (line,) = [li for li in proc.stdout.splitlines() if "msprof-analyze cluster" in li]
    assert line.startswith(
        "[PASS] agrees with msprof-analyze cluster (cluster_analysis.db ClusterStepTraceTime): "
        "2 rank-steps x Computing, Communication(Not Overlapped)"
    ), line
    assert (
        "arrival at the collectives (COMMUNICATION_OP): the largest gap is hcom_allReduce__210_0_1, which rank 1 "
        "started 3,532.8 us after the first rank"
    ) in proc.stdout
    assert "started last (of 4): rank 0 0, rank 1 4" in proc.stdout
