"""A user's capture is read, never changed, and one damaged file does not lose the report (real captures)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import FIXTURES
from helpers import ROOT as REPO  # the lab these tests run (a private copy)

from common.analyze import cluster
from common.errors import LabError
from common.formats import sqlite_file
from common.formats.cluster import load_cluster
from common.formats.datasets import find_datasets

CAPTURE = FIXTURES / "npu" / "msinsight_torch_npu"
OUT = "ASCEND_PROFILER_OUTPUT"

EXIT_DAMAGED = 3


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def _lab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "common", *args], capture_output=True, text=True, cwd=REPO, timeout=180
    )


def test_reading_a_wal_database_creates_nothing_beside_it(tmp_path: Path) -> None:
    """Rank 0's database is in WAL mode: read with mode=ro it got -wal/-shm files that stayed after the read."""
    root = tmp_path / "db_level1"
    shutil.copytree(CAPTURE / "db_level1", root)
    before = _files(root)
    for ds in find_datasets(root):
        assert ds.tasks and ds.steps and ds.memory is not None
    report = cluster.cluster_report(load_cluster(root))
    assert report.op_rows and report.comm_lines
    assert _files(root) == before


def test_a_database_that_changes_while_read_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "ascend_pytorch_profiler_0.db"
    shutil.copy(CAPTURE / "db_level1" / "rank0_ascend_pt" / OUT / path.name, path)
    stamps = iter([(1, 1), (2, 2)])
    monkeypatch.setattr(sqlite_file.SqliteFile, "_stamp", lambda self: next(stamps))
    with pytest.raises(LabError, match="changed while it was read"):
        sqlite_file.SqliteFile(path, "torch_npu").query("SELECT count(*) FROM TASK")


@pytest.mark.parametrize(
    ("name", "damage", "lost"),
    [
        ("trace_view.json", lambda p: p.write_bytes(p.read_bytes()[:200_000]), "the trace ends before its closing ']'"),
        (
            "kernel_details.csv",
            lambda p: p.write_text(
                "\n".join(
                    line if i != 10 else ",".join(line.split(",")[:5])
                    for i, line in enumerate(p.read_text().split("\n"))
                )
            ),
            "kernel_details.csv:11: 5 fields where the header has 46",
        ),
    ],
)
def test_one_damaged_file_is_named_and_the_rest_is_reported(tmp_path: Path, name: str, damage, lost: str) -> None:
    """Before: exit 2 and one Error line, although step_trace_time.csv and the rest were intact."""
    rank = tmp_path / "rank0_ascend_pt"
    shutil.copytree(CAPTURE / "text_level1" / "rank0_ascend_pt", rank)
    damage(rank / OUT / name)
    proc = _lab("report", str(rank), "--out", str(tmp_path / "out"))
    assert proc.returncode == EXIT_DAMAGED, proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"DAMAGED, left out: {rank / OUT / name}" in proc.stdout and lost in proc.stdout
    assert f"1 damaged file(s) left out ({name})" in proc.stderr
    assert "-- Steps: ASCEND_PROFILER_OUTPUT --" in proc.stdout  # step_trace_time.csv still read
    assert "Damaged files (left out; the rest is reported)" in (tmp_path / "out" / "report.html").read_text()


def test_report_out_writes_there_and_nothing_beside_the_capture(tmp_path: Path) -> None:
    rank = tmp_path / "rank0_ascend_pt"
    shutil.copytree(CAPTURE / "text_level1" / "rank0_ascend_pt", rank)
    before = _files(rank)
    proc = _lab("report", str(rank), "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    assert f"(written to {tmp_path / 'out' / 'report.html'})" in proc.stdout
    assert _files(rank) == before
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("a user's folder")
    proc = _lab("report", str(rank), "--out", str(mine))
    assert proc.returncode == 2 and proc.stderr.count("Error:") == 1 and "not made by msprof lab" in proc.stderr
