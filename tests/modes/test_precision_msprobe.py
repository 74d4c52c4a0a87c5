"""``python -m common precision 0 --cross-check`` (``nox -s precision -- 0 --cross-check``) on TinyMLP: msprobe
(mindstudio-probe, installed into .nox/probe on first use) dumps and compares the torch fp32 and fp16 paths, and its
cosine and max abs error per module agree with the lab's table. The CSV reading and matching:
tests/unit/test_msprobe_check.py."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from helpers import run

TINY_MLP_MODULES = [f"net.{i}" for i in range(7)]


@pytest.mark.network  # installs mindstudio-probe from PyPI on first use
@pytest.mark.probe  # its 1.4 GB environment: outside `nox -s tests`, run with `-m probe`
def test_cross_check_prints_the_labs_and_msprobes_cosine_per_module_and_they_agree(tmp_path: Path) -> None:
    out = tmp_path / "precision"
    proc = run(
        [sys.executable, "-m", "common", "precision", "0", "--torch-only", "--cross-check", "--out", str(out)],
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    side_by_side = re.findall(
        r"^(net\.\d)\s+Module\.(net\.\d)\.\w+\.forward\.0\.output\.0\s+(\S+)\s+(\S+)\s+\S+\s+\S+"
        r"\s+yes$",
        proc.stdout,
        re.MULTILINE,
    )
    assert [m[0] for m in side_by_side] == TINY_MLP_MODULES
    assert all(path == probe_path and lab == probe for path, probe_path, lab, probe in side_by_side)  # 6 decimals
    assert "the lab and msprobe agree on 7 modules" in proc.stdout
    assert "Module.net.Sequential.forward.0.output.0 (not a leaf module" in proc.stdout
    assert list((out / "msprobe" / "compare").glob("compare_result_*.csv"))
    assert "Cross-check: torch fp16 against msprobe" in (out / "report.html").read_text()
