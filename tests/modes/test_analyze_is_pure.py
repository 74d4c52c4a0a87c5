"""common/analyze/ computes on records and common/render/ lays them out: no function of either opens, lists or stats
a file, connects to a database, starts a program or runs a model. Tested by behaviour: tests/apps/analyze_guard.py
fences every function of both and runs a command of the lab as a user does; a touch anywhere below a fenced
function, through whatever it was handed, ends the command with ``TOUCHED: <function>: <call>`` (exit 99). The
harness reads what the analysis and the report need, and computes the model's reference, before it calls them.

Here: report, advise and cluster on the real NPU captures, and modes 01, 04 and DDP run in process (their lessons
are programs of their own). tests/modes/test_agree.py runs agree and compare so, on its run of the four modes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, copy_lab, lab_env

GUARD = ROOT / "tests" / "apps" / "analyze_guard.py"


def guarded(*args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    """``python -m common ARGS`` (or ``--module MOD ARGS``) with common/analyze/ fenced off."""
    return subprocess.run(
        [sys.executable, str(GUARD), *args],
        cwd=cwd,
        env=lab_env(**({"PYTHONPATH": str(cwd)} if cwd else {}), **env),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def assert_untouched(proc: subprocess.CompletedProcess) -> None:
    touched = [line for line in proc.stdout.splitlines() if line.startswith("TOUCHED:")]
    assert not touched, touched
    assert "functions of common/analyze/ and common/render/ fenced" in proc.stderr  # the fence was up
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-2000:])


def test_the_fence_catches_a_read_and_a_model_run_inside_an_analyze_function(tmp_path: Path) -> None:
    """The controls: an analyze function handed a generator that reads a file, or runs a model, while it is iterated
    is stopped, and the function is named."""
    data = tmp_path / "stats.txt"
    data.write_text("1\n2\n")
    (tmp_path / "reads_inside.py").write_text(
        "from common.analyze import robust\n"
        "def lines():\n"
        f"    with open({str(data)!r}) as f:  # opened when first iterated: inside the analyze function\n"
        "        yield from f\n"
        "def main(argv):\n"
        "    print(robust.estimate(float(line) for line in lines()))\n"
        "    return 0\n"
    )
    proc = guarded("--module", "reads_inside", PYTHONPATH=f"{tmp_path}:{ROOT}")
    assert proc.returncode == 99, (proc.stdout, proc.stderr)
    assert "TOUCHED: common.analyze.robust.estimate: open(" in proc.stdout
    (tmp_path / "runs_inside.py").write_text(  # a model run while an analyze function iterates: stopped too
        "import torch\n"
        "from common.analyze import robust\n"
        "def main(argv):\n"
        "    model = torch.nn.Linear(2, 2)\n"
        "    print(robust.estimate(float(model(torch.ones(2)).sum()) for _ in range(3)))\n"
        "    return 0\n"
    )
    proc = guarded("--module", "runs_inside", PYTHONPATH=f"{tmp_path}:{ROOT}")
    assert proc.returncode == 99 and "TOUCHED: common.analyze.robust.estimate: torch.nn.Module.__call__" in proc.stdout


CAPTURES = [
    ("report", "cann85_minimal"),
    ("report", "msinsight_torch_npu"),
    ("report", "torch_npu_aicpu_kernel_details"),
    ("report", "torch_npu_trace_view"),
    ("advise", "msinsight_torch_npu"),
    ("advise", "megatron_pp2_dp2"),
    ("cluster", "megatron_pp2_dp2"),
]


@pytest.mark.parametrize(("command", "capture"), CAPTURES, ids=[f"{c}-{d}" for c, d in CAPTURES])
def test_reading_a_capture_hands_the_analysis_records(npu_fixtures: Path, command: str, capture: str) -> None:
    assert_untouched(guarded(command, str(npu_fixtures / capture)))


def test_the_modes_hand_their_checks_records_and_a_computed_reference(tmp_path: Path) -> None:
    """Modes 01 and 04 and a two-rank DDP run: each reads its capture and computes the model's reference output
    before its checks run."""
    lab = copy_lab(tmp_path / "lab")
    for module, *args in (
        ("common.modes.cmdline", "0"),
        ("common.modes.pytorch.model", "0"),
        ("common.modes.pytorch.ddp", "2"),
    ):
        assert_untouched(guarded("--module", module, *args, cwd=lab))
