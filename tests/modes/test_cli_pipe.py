"""Output into a closed pipe (``python -m common report DIR | head -1``) ends quietly, never in a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers import ROOT, lab_env


def test_report_into_a_closed_pipe_stops_quietly(npu_fixtures: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "common", "report", str(npu_fixtures / "cann85_minimal")],
                            cwd=ROOT, env=lab_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    proc.stdout.close()  # what `| head -1` does after its line
    stderr = proc.stderr.read().decode()
    code = proc.wait(timeout=120)
    assert first.startswith(b"msprof lab report:")
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr
    assert code == 141, (code, stderr)
