"""``python -m common profile --out DIR -- program``: 01's black box for any program, driven as a user drives it:
a script of the user's own (never seen by the lab) profiled, then reported; its exit status passed on; mistakes
refused in one line before anything runs."""

from __future__ import annotations

import sys
from pathlib import Path

from helpers import SHELLISH, error_lines, run

SCRIPT = """import sys
import torch

block = torch.nn.Sequential(torch.nn.Conv1d(4, 4, 3, padding=1), torch.nn.LayerNorm(16), torch.nn.SiLU())
for _ in range(int(sys.argv[1])):
    block(torch.randn(2, 4, 16))
print("ran", sys.argv[1])
sys.exit(int(sys.argv[2]))
"""


def lab(*args: object):
    return run([sys.executable, "-m", "common", *map(str, args)])


def test_a_users_script_is_profiled_and_reported(tmp_path: Path) -> None:
    (tmp_path / "mine.py").write_text(SCRIPT)
    proc = lab("profile", "--out", tmp_path / "prof", "--", sys.executable, tmp_path / "mine.py", 3, 0)
    assert proc.returncode == 0, proc.stderr
    assert "ran 3" in proc.stdout and f"next: python -m common report {tmp_path / 'prof'}" in proc.stdout
    (summary,) = (tmp_path / "prof").glob("PROF_*/mindstudio_profiler_output/op_summary_*.csv")
    report = lab("report", tmp_path / "prof")
    assert report.returncode == 0, report.stderr
    table = report.stdout.split("-- Top ops", 1)[1].split("\n\n", 1)[0]
    counts = {row.split()[0]: row.split()[2] for row in table.splitlines() if row.startswith("aten::")}
    assert counts["aten::native_layer_norm"] == counts["aten::silu"] == "3"  # one per forward the script ran


def test_the_programs_exit_status_is_passed_on_and_its_profile_kept(tmp_path: Path) -> None:
    (tmp_path / "mine.py").write_text(SCRIPT)
    proc = lab("profile", "--out", tmp_path / "prof", "--", sys.executable, tmp_path / "mine.py", 1, 7)
    assert proc.returncode == 7
    assert error_lines(proc.stderr) == [
        f"Error: the profiled program exited with code 7; what was collected is kept in {tmp_path / 'prof'}"
    ]
    assert list((tmp_path / "prof").glob("PROF_*/mindstudio_profiler_output/op_summary_*.csv"))


def test_mistakes_are_one_line_and_nothing_is_created(tmp_path: Path) -> None:
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "keep.txt").write_text("not the lab's")
    for args, message in [
        (["--out", tmp_path / "a"], "no program to profile"),
        (["--out", tmp_path / "a", "--", "no-such-program-xyz"], "'no-such-program-xyz' is not on PATH"),
        (["--out", tmp_path / "theirs", "--", sys.executable, "-c", "pass"], "was not made by msprof lab"),
        (["--out", tmp_path / "a", "--timeout", "0", "--", sys.executable, "-c", "pass"], "--timeout 0"),
        (["--out", tmp_path / "a", "--", SHELLISH[1]], "is not on PATH"),
    ]:
        proc = lab("profile", *args)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert len(error_lines(proc.stderr)) == 1 and message in proc.stderr, (message, proc.stderr)
    assert not (tmp_path / "a").exists() and (tmp_path / "theirs" / "keep.txt").read_text() == "not the lab's"
