"""Two exports of one capture agree within their real rounding: the lab reads a rank's text export
(step_trace_time.csv), msprof-analyze the analysis.db beside it, and the tolerance of the comparison
comes from the text's own resolution (common.analyze.export_rounding)."""

from __future__ import annotations

import csv
import sqlite3
import sys
from pathlib import Path

import pytest
from helpers import FIXTURES

from common.analyze.export_rounding import grid_of, text_rounding
from common.cli.commands import main
from common.collect.msprof_analyze import compare_with_cluster_db
from common.formats.cluster import load_cluster

MEGATRON = FIXTURES / "npu" / "megatron_pp2_dp2" / "level2"
MSA_ROWS = FIXTURES / "msprof_analyze_cluster" / "megatron_pp2_dp2.csv"
# What msprof-analyze's ClusterStepTraceTime held for this capture read with each rank's analysis.db:
# the text's values, but rank 1's Preparing 0.16 us off (the database computes it from ns rows).
DB_PREPARING_RANK1 = 205.16
COLUMNS = {
    "Computing": "computing",
    "Communication(Not Overlapped)": "communication_not_overlapped",
    "Overlapped": "overlapped",
    "Communication": "communication",
    "Free": "free",
    "Stage": "stage",
    "Bubble": "bubble",
    "Preparing": "preparing",
}


def _cluster_db(path: Path, edit=None) -> Path:
    """A cluster_analysis.db as msprof-analyze writes it for database input, from its CSV rows of the capture."""
    with MSA_ROWS.open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["Type"] == "rank"]
    for row in rows:
        if row["Index"] == "1":
            row["Preparing"] = str(DB_PREPARING_RANK1)
        if edit:
            edit(row)
    conn = sqlite3.connect(path)
    names = ", ".join(f'"{c}" NUMERIC' for c in COLUMNS.values())
    conn.execute(f'CREATE TABLE ClusterStepTraceTime (step TEXT, type TEXT, "index" INTEGER, {names})')
    conn.executemany(
        f"INSERT INTO ClusterStepTraceTime VALUES ({', '.join('?' * (3 + len(COLUMNS)))})",
        [[r["Step"], r["Type"], int(r["Index"]), *(float(r[c]) for c in COLUMNS)] for r in rows],
    )
    conn.commit()
    conn.close()
    return path


def test_the_grid_a_column_sits_on() -> None:
    assert grid_of([810022.25, 809431.75, 809803.25, 810150.25]) == 0.25
    assert grid_of([231290.09999999995, 230903.7200000004, 400448.2599999992]) == 0.01
    assert grid_of([205.0, 206.25]) == 0.25
    assert grid_of([18920.0]) == 1.0
    assert grid_of([8813.172999999999]) == 0.001
    assert grid_of([0.0, 0]) is None


def test_the_real_capture_resolution_is_its_stage_grid() -> None:
    rounding = text_rounding(load_cluster(MEGATRON).steps)
    assert (rounding.resolution_us, rounding.column) == (0.25, "Stage")
    assert rounding.tolerance_us("Preparing") == 0.25 and rounding.tolerance_us("Communication") == 0.5


def test_text_beside_analysis_db_passes_within_the_text_resolution(tmp_path: Path) -> None:
    steps = load_cluster(MEGATRON).steps
    verdict = compare_with_cluster_db(
        steps, _cluster_db(tmp_path / "cluster_analysis.db"), rounding=text_rounding(steps)
    )
    assert verdict.ok, verdict.detail
    assert "largest difference 0.1600 us (rank 1 step 13 Preparing)" in verdict.detail
    assert (
        "its Stage values sit on a 0.25 us grid, so a span between two of its timestamps may differ by 0.25 us"
    ) in verdict.detail
    # the same export read twice still allows only its printed digits
    strict = compare_with_cluster_db(steps, tmp_path / "cluster_analysis.db")
    assert not strict.ok and "tolerance 0.002 us" in strict.detail


@pytest.mark.parametrize(
    ("column", "shift", "named"),
    [
        ("Computing", 1.0, "rank 2 step 13 Computing by 1.0000 us"),
        ("Preparing", 0.3, "rank 2 step 13 Preparing by 0.3000 us"),
        ("Communication", 0.6, "rank 2 step 13 Communication by"),
    ],
)
def test_a_difference_beyond_the_resolution_still_fails(tmp_path: Path, column: str, shift: float, named: str) -> None:
    def edit(row: dict) -> None:
        if row["Index"] == "2":
            row[column] = str(float(row[column]) + shift)

    steps = load_cluster(MEGATRON).steps
    verdict = compare_with_cluster_db(steps, _cluster_db(tmp_path / "c.db", edit), rounding=text_rounding(steps))
    assert not verdict.ok and named in verdict.detail, verdict.detail


def test_the_cluster_command_on_text_beside_analysis_db_exits_0(tmp_path: Path, monkeypatch, capsys) -> None:
    """The whole command, msprof-analyze replaced by a stand-in that writes the database table it writes."""
    made = _cluster_db(tmp_path / "made.db")
    tool = tmp_path / "msprof-analyze"
    tool.write_text(
        f"#!{sys.executable}\nimport shutil, sys, pathlib\n"
        "out = pathlib.Path(sys.argv[sys.argv.index('-o') + 1]) / 'cluster_analysis_output'\n"
        "out.mkdir(parents=True, exist_ok=True)\n"
        f"shutil.copy({str(made)!r}, out / 'cluster_analysis.db')\n"
    )
    tool.chmod(0o755)
    monkeypatch.setenv("MSPROF_ANALYZE", str(tool))
    code = main(["cluster", str(MEGATRON), "--cross-check"])
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "agrees with msprof-analyze cluster" in x)
    assert code == 0 and line.strip().startswith("[PASS]"), line
    assert "tolerance from the text export's resolution" in line
