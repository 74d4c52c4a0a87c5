"""A slice of the corpus (tests/corpus) through modes 01, 03, 04 and agree, as ``nox -s corpus`` runs them all.

Models the lab was not written around: an LSTM (a family torch's FLOP counter cannot count), a
dataclass output (the Hugging Face style), and a model that is wrong from its 3rd call on, which
must fail. The full corpus is ``nox -s corpus`` (about 15 minutes here).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from helpers import ROOT, copy_lab, lab_env

SLICE = ("lstm_classifier", "dict_output_modeloutput", "wrong_noise_after_2")


def test_a_corpus_slice_passes_and_the_wrong_model_fails(tmp_path: Path) -> None:
    repo = copy_lab(tmp_path / "lab")
    shutil.copytree(ROOT / "tests" / "corpus", repo / "tests" / "corpus",
                    ignore=shutil.ignore_patterns("__pycache__", "last_run.log"))
    proc = subprocess.run([sys.executable, "-m", "tests.corpus", *SLICE], cwd=repo, capture_output=True, text=True,
                          env=lab_env(PYTHONPATH=str(repo), PYTHON=sys.executable), timeout=900, check=False)
    log = (repo / "tests" / "corpus" / "last_run.log").read_text() if (repo / "tests/corpus/last_run.log").exists() else ""
    assert proc.returncode == 0, proc.stdout + proc.stderr + log[-4000:]
    rows = {line.split()[0]: line for line in proc.stdout.splitlines() if line.split() and line.split()[0] in SLICE}
    assert set(rows) == set(SLICE), proc.stdout
    for name in SLICE[:2]:
        assert "01=0 03=0 04=0 agree=0" in rows[name] and rows[name].endswith("as expected"), rows[name]
    assert rows["wrong_noise_after_2"].endswith("fails, as it must") and "01=1" in rows["wrong_noise_after_2"]
    assert "3 models in" in proc.stdout and "3 as expected" in proc.stdout
    # the wrong model failed on what it does wrong: from its 3rd call on its output is noisy (and 01's records
    # say that its first two, warm-up, forwards lack the ops the noise adds)
    assert "[FAIL] output matches fp32 reference (01)" in log and "[FAIL] output matches fp32 reference (04)" in log
    assert "warm-up forwards differ (not failed: a first call may do one-off work): forward 1: missing" in log
