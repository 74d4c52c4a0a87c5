"""The corpus's wrong models fail, as a user runs them; the driver of ``nox -s corpus`` refuses a bad name.

The correct models of tests/corpus run through every mode in ``nox -s corpus`` (about 25 minutes
here); the suite runs one of them with the shipped workloads (test_workloads.py) and, here, the
wrong ones through the mode that catches them, each in a private copy of the lab.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, copy_lab, error_lines, lab_env

CORPUS = ROOT / "tests" / "corpus"


@pytest.mark.parametrize(
    ("model", "mode", "fails"),
    [
        # noise from the 3rd call on: 01's saved output (the 23rd call) is noisy, and its first two, warm-up,
        # forwards lack the ops the noise adds
        ("wrong_noise_after_2", "01_cmdline", "output matches fp32 reference (01)"),
        # noise only while a profiler runs: 04's profiled steps compute something else than the reference
        ("wrong_noise_when_profiled", "04_pyTorch", "output matches fp32 reference (04)"),
    ],
)
def test_a_wrong_model_fails_the_mode_that_sees_it(tmp_path: Path, model: str, mode: str, fails: str) -> None:
    repo = copy_lab(tmp_path / "lab")
    proc = subprocess.run(
        ["bash", f"{mode}/run.sh", "0", "--workload", str(CORPUS / f"{model}.py")],
        cwd=repo,
        env=lab_env(PYTHONPATH=str(repo)),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert f"[FAIL] {fails}" in proc.stdout, proc.stdout[-3000:]
    if model == "wrong_noise_after_2":
        assert (
            "warm-up forwards differ (not failed: a first call may do one-off work): forward 1: missing" in proc.stdout
        )


def test_the_corpus_driver_refuses_a_model_it_does_not_have() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tests.corpus", "no_such_model"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=lab_env(PYTHONPATH=str(ROOT)),
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    (line,) = error_lines(proc.stderr)
    assert line.startswith("Error: not in tests/corpus: no_such_model.py — choose among ") and "resnet" in line
