"""msprof-analyze (the Ascend toolkit's own analysis CLI) reads the lab's output and agrees with its numbers.

The end-to-end test (marker ``network``) installs msprof-analyze for real (into .nox/ecosystem,
once) and runs ``advisor all`` and ``compare`` through ``python -m common.cli.ecosystem``,
as ``nox -s ecosystem`` does; the others check the one-line errors around it. The lab's own
totals are checked in tests/unit/test_msprof_analyze.py.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from helpers import FIXTURES, ROOT, error_lines, remove_lab_output, run

from common.formats import overlap, readers

REAL = FIXTURES / "npu" / "torch_npu_trace_view"


@pytest.fixture(scope="module")
def portable_04():
    out = ROOT / "04_pyTorch" / "prof_out_ecosystem_test"
    proc = run(["bash", "04_pyTorch/run.sh", "0", "--output", str(out)])
    assert proc.returncode == 0, proc.stderr
    yield out
    remove_lab_output(out)


def test_portable_overlap_tracks_tile_the_steps(portable_04: Path) -> None:
    # msprof-analyze takes Free as (last - first Overlap Analysis event) - Computing: that equals the
    # step table's Free only if the tracks cover the active steps end to end, as they do on an NPU.
    (run_dir,) = portable_04.glob("*_ascend_pt")
    output = run_dir / "ASCEND_PROFILER_OUTPUT"
    steps = readers.read_step_trace_time(output / "step_trace_time.csv")
    events = readers.read_trace(output / "trace_view.json")
    row = overlap.overlap_step_time(events)
    assert row.computing_us == pytest.approx(sum(s.computing_us for s in steps), rel=1e-6)
    assert row.free_us == pytest.approx(sum(s.free_us for s in steps), rel=1e-5)
    assert row.stage_us == pytest.approx(sum(s.stage_us for s in steps), abs=1.0)
    assert row.device_id == "host"  # labelled CPU: never an NPU


@pytest.mark.network  # installs msprof-analyze from PyPI on first use
def test_msprof_analyze_reads_the_lab_output_and_agrees(portable_04: Path, tmp_path: Path) -> None:
    candidate = tmp_path / "candidate"  # a copy: the tool's output goes inside it, as without --output
    shutil.copytree(portable_04, candidate)
    proc = run(
        [
            sys.executable,
            "-m",
            "common.cli.ecosystem",
            "--candidate",
            str(candidate),
            "--output",
            str(candidate / "msa"),
            "--advise-on",
            "candidate",
        ],
        timeout=1500,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.startswith("msprof-analyze 26.2.0 ") for line in lines)
    passed = [line for line in lines if line.startswith("[PASS]")]
    assert len(passed) == 9 and not [line for line in lines if line.startswith("[FAIL]")]
    # the advisor's problems on the lab's own capture (Overall Summary, fast_gelu for TinyMLP's GELU), all in advise
    assert any("advise vs msprof-analyze advisor: candidate: 2 problem(s) reported" in line for line in passed)
    for where in ("candidate, advisor all", "candidate, compare", "baseline, advisor all", "baseline, compare"):
        assert any(f"Computing agrees ({where})" in line for line in passed)
        assert any(f"Free agrees ({where})" in line for line in passed)
    assert "lab report" in proc.stdout and "msprof-analyze compare -bp (base)" in proc.stdout
    # The tool really ran: its own reports are there.
    assert list((candidate / "msa" / "advisor_candidate").glob("mstt_advisor_*.html"))
    assert list((candidate / "msa" / "compare").glob("performance_comparison_result_*.xlsx"))


def test_missing_msprof_analyze_is_one_error_line(tmp_path: Path) -> None:
    proc = run(
        [sys.executable, "-m", "common.cli.ecosystem", "--candidate", str(REAL), "--output", str(tmp_path / "o")],
        MSPROF_ANALYZE=str(tmp_path / "nowhere" / "msprof-analyze"),
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (line,) = error_lines(proc.stderr)
    assert "MSPROF_ANALYZE" in line and "not an executable file" in line


def test_failing_msprof_analyze_is_one_error_line(tmp_path: Path) -> None:
    fake = tmp_path / "msprof-analyze"
    fake.write_text("#!/bin/sh\necho '[ERROR] cannot parse the profiling data' >&2\nexit 3\n")
    fake.chmod(0o755)
    proc = run(
        [sys.executable, "-m", "common.cli.ecosystem", "--candidate", str(REAL), "--output", str(tmp_path / "o")],
        MSPROF_ANALYZE=str(fake),
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (line,) = error_lines(proc.stderr)
    assert "msprof-analyze advisor all failed (exit 3): [ERROR] cannot parse the profiling data" in line
    assert (tmp_path / "o" / "advisor_candidate" / "advisor.log").read_text().startswith("[ERROR]")


def test_candidate_without_torch_npu_output_is_one_error_line(tmp_path: Path) -> None:
    proc = run(
        [
            sys.executable,
            "-m",
            "common.cli.ecosystem",
            "--candidate",
            str(FIXTURES / "npu" / "cann85_minimal"),
            "--output",
            str(tmp_path / "o"),
        ]
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (line,) = error_lines(proc.stderr)
    assert "0 torch_npu outputs found" in line
