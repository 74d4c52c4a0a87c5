"""Output into a closed pipe (``python -m common report DIR | head -1``) ends quietly, never in a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from helpers import ROOT, lab_env


def test_report_into_a_closed_pipe_stops_quietly(npu_fixtures: Path) -> None:
    """The reader is gone before the first write: exit 141 (128 + SIGPIPE), as a shell reports it."""
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "common", "report", str(npu_fixtures / "cann85_minimal")],
            cwd=ROOT,
            env=lab_env(),
            stdout=write,
            stderr=subprocess.PIPE,
            timeout=120,
        )
    finally:
        os.close(write)
    stderr = proc.stderr.decode()
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr
    assert proc.returncode == 141, (proc.returncode, stderr)


def test_report_into_head_stops_quietly(npu_fixtures: Path) -> None:
    """``| head -1``: the reader leaves after one line, while the report writes or after it has written
    everything into the pipe (a race: exit 141 or 0); either way nothing but the report is printed."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "common", "report", str(npu_fixtures / "cann85_minimal")],
        cwd=ROOT,
        env=lab_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    first = proc.stdout.readline()
    proc.stdout.close()  # what `| head -1` does after its line
    stderr = proc.stderr.read().decode()
    code = proc.wait(timeout=120)
    assert first.startswith(b"msprof lab report:")
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr
    assert code in (0, 141), (code, stderr)
