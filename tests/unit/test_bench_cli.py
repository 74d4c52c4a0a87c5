"""The benchmark's CLI on tiny inputs: it generates every kind of profile and each measurement reports totals.

The figures themselves are never checked here: they depend on the machine and its load.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from common.bench import __main__ as bench
from common.bench import children, measure
from common.errors import LabError


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bench")
    assert (
        bench.main(["make", "--rows", "400", "--events", "4000", "--tasks", "600", "--ranks", "3", "--out", str(out)])
        == 0
    )
    return out


def _child(kind: str, target: Path, capsys) -> dict:
    capsys.readouterr()
    assert bench.main(["_child", kind, str(target)]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_make_writes_every_kind(made: Path) -> None:
    assert len(list(made.glob("op_summary_400/PROF_*/mindstudio_profiler_output/op_summary_*.csv"))) == 1
    (trace,) = made.glob("trace_view_4000/*_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json")
    assert (trace.parent / "expected_steps.csv").is_file() and (trace.parent.parent / "profiler_info.json").is_file()
    assert len(list(made.glob("db_600/*/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db"))) == 1
    assert sorted(p.name for p in made.glob("cluster_3/rank*/*_ascend_pt/profiler_info_*.json")) == [
        f"profiler_info_{r}.json" for r in range(3)
    ]


def test_each_measurement_reports_its_totals(made: Path, capsys) -> None:
    csv = _child("lab-csv", made / "op_summary_400", capsys)
    assert csv["rows"] == 400 and csv["total_us"] > 0 and csv["hwm_kib"] > 0
    (trace,) = made.glob("trace_view_4000/*/ASCEND_PROFILER_OUTPUT/trace_view.json")
    steps = _child("lab-trace", trace, capsys)
    assert steps["computing_ms"] == pytest.approx(steps["expected_computing_ms"], rel=1e-9)
    (db,) = made.glob("db_600/*/ASCEND_PROFILER_OUTPUT")
    totals = _child("lab-db", db, capsys)
    assert totals["rows"] == totals["expected_rows"] == 600
    assert totals["total_us"] == pytest.approx(totals["expected_total_us"], rel=1e-9)
    ranks = _child("lab-cluster", made / "cluster_3", capsys)
    assert ranks["ranks"] == 3 and len(ranks["values"]) == 3 * 20


def test_agreement_is_printed_as_a_relative_difference() -> None:
    assert measure.agree(100.0, 100.05) == "0.0500% (agree)"
    assert measure.agree(100.0, 101.0).endswith("(DIFFER)")
    assert measure.agree(None, 1.0) == "N/A"


@pytest.mark.parametrize("argv", [["make", "--what", "nonsense"], ["make", "--rows", "0"], ["run", "--repeat", "0"]])
def test_bad_arguments_are_one_error(argv: list[str]) -> None:
    with pytest.raises(LabError):
        bench.main(argv)


@pytest.mark.parametrize("script", ["POLARS_ALONE", "POLARS_TYPES", "PANDAS"])
def test_each_csv_baseline_reports_the_labs_totals(made: Path, capsys, monkeypatch, script: str) -> None:
    if script == "PANDAS":
        pytest.importorskip("pandas")
    folder = made / "op_summary_400"
    lab = _child("lab-csv", folder, capsys)
    monkeypatch.setattr("sys.argv", ["-c", str(folder)])
    exec(compile(getattr(children, script), script, "exec"), {})  # as `python -c <script> <folder>` runs it
    got = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert got["rows"] == lab["rows"] == 400
    assert got["total_us"] == pytest.approx(lab["total_us"], rel=1e-9)


def test_the_cluster_scale_table_runs_each_size_warm_and_cold(made: Path, capsys, monkeypatch, tmp_path) -> None:
    """``python -m common.bench cluster`` on the 3-rank capture (msprof-analyze left out: its rows say N/A)."""
    monkeypatch.setenv(measure.MSA_EXE_VAR, str(tmp_path / "no-such-tool"))
    assert (
        bench.main(
            ["cluster", "--ranks", "3", "--rank-tasks", "200", "--repeat", "1", "--no-install", "--out", str(made)]
        )
        == 0
    )
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.strip().startswith("3 ")]
    assert [r[1] for r in rows] == ["warm", "cold"]
    assert all(float(r[2]) > 0 and r[4] == "N/A" for r in rows)  # the lab's median wall time; no tool
    assert "totals: N/A (msprof-analyze not installed); the lab's terminal summary:" in out


def test_a_process_trees_peaks_are_sampled(tmp_path) -> None:
    """spawn's own and child peaks: a parent that starts a child holding 60 MB shows it as the child's."""
    script = (
        "import subprocess, sys; subprocess.run([sys.executable, '-c', "
        "'import time; b = bytearray(60 * 2**20); b[::4096] = bytes(len(b[::4096])); time.sleep(0.5)'])"
    )
    run = measure.spawn(measure.python_argv("-c", script))
    assert run.child_peak_mib is not None and run.child_peak_mib > 60
    assert run.own_peak_mib is not None and run.own_peak_mib < run.child_peak_mib
