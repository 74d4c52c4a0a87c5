"""Faults during collection: the program fails, is killed, hangs; the lab is stopped; two runs collide.

Each injected fault is one test case (marker ``fault``). After every one: the program's status
is reported, what could be flushed is on disk, ``run_info.json`` says incomplete, no process of
the program is left running, and the next run starts clean.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import copy_lab, error_lines, lab_env, plant

from common.collect import launcher
from common.errors import LabError
from common.formats import readers, rundir

fault = pytest.mark.fault
pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="process checks read /proc (Linux)")

# A program that starts a grandchild, writes "<its pid> <grandchild pid>" to argv[1], then does
# what argv[2] says. With torch it first runs a few ops, so there is a profile to flush.
PROGRAM = """
import os, signal, subprocess, sys, time
if "torch" in sys.argv[3:]:
    import torch
    x = torch.ones(16, 16)
    for _ in range(3):
        x = torch.mm(x, x) / 16
kid = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
what = sys.argv[2]
if what == "catch-term":
    signal.signal(signal.SIGTERM, lambda *a: (open(sys.argv[1] + ".term", "w").write("SIGTERM"), sys.exit(0)))
if what == "ignore-term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(f"{os.getpid()} {kid.pid}")
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
if what == "exit":
    sys.exit(int(sys.argv[3]))
if what == "signal":
    sig = getattr(signal, sys.argv[3])
    if sig == signal.SIGSEGV:
        import ctypes
        ctypes.string_at(0)
    os.kill(os.getpid(), sig)
if what == "term-self":
    os.kill(os.getpid(), signal.SIGTERM)
if what == "leave-child":
    sys.exit(0)
time.sleep(120)
"""


def alive(pid: int) -> bool:
    """Running, as opposed to gone or a zombie waiting to be reaped."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return text[text.rindex(")") + 2] != "Z"


def pids(path: Path) -> list[int]:
    return [int(p) for p in path.read_text().split()]


@pytest.fixture
def program(tmp_path: Path) -> tuple[Path, Path]:
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    return script, tmp_path / "pids"


def assert_no_orphans(pid_file: Path) -> None:
    for pid in pids(pid_file):
        assert not alive(pid), f"process {pid} of the program is still running"


# ----- the launcher: every way a program can end -----------------------------------------------------
@fault
@pytest.mark.parametrize("code", [1, 3, 255])
def test_nonzero_exit_is_passed_on(program, code: int) -> None:
    script, pid_file = program
    run = launcher.run_command([sys.executable, str(script), str(pid_file), "exit", str(code)], grace_s=2)
    assert (run.exit_code, run.lab_exit_code, run.ok) == (code, code, False)
    assert run.describe == f"exited with code {code}"
    assert run.leftovers == 1  # the grandchild it left behind was stopped
    assert_no_orphans(pid_file)


@fault
@pytest.mark.parametrize("name", ["SIGKILL", "SIGSEGV", "SIGABRT", "SIGTERM"])
def test_program_killed_by_a_signal(program, name: str) -> None:
    script, pid_file = program
    run = launcher.run_command([sys.executable, str(script), str(pid_file), "signal", name], grace_s=2)
    number = signal.Signals[name].value
    assert run.exit_code == -number and run.lab_exit_code == 128 + number
    assert run.describe == f"killed by signal {name}"
    assert_no_orphans(pid_file)


@fault
def test_timeout_asks_the_whole_group_to_stop_first(program) -> None:
    script, pid_file = program
    run = launcher.run_command([sys.executable, str(script), str(pid_file), "catch-term"], timeout_s=2, grace_s=10)
    assert run.timed_out and run.exit_code == 0 and run.lab_exit_code == launcher.EXIT_TIMEOUT
    assert Path(str(pid_file) + ".term").read_text() == "SIGTERM"  # SIGTERM first: its exit handlers could run
    assert "did not finish within the 2 s timeout" in run.describe
    assert_no_orphans(pid_file)


@fault
def test_timeout_kills_a_program_that_ignores_sigterm(program) -> None:
    script, pid_file = program
    run = launcher.run_command([sys.executable, str(script), str(pid_file), "ignore-term"], timeout_s=2, grace_s=1)
    assert run.timed_out and run.exit_code == -signal.SIGKILL
    assert_no_orphans(pid_file)


@fault
def test_grandchild_left_running_after_a_clean_exit_is_stopped(program) -> None:
    script, pid_file = program
    run = launcher.run_command([sys.executable, str(script), str(pid_file), "leave-child"], grace_s=2)
    assert run.ok and run.leftovers == 1
    assert_no_orphans(pid_file)


@fault
def test_sigterm_to_the_program_still_flushes_its_profile(program, tmp_path: Path) -> None:
    script, pid_file = program
    raw = tmp_path / "raw"
    run = launcher.run_app(
        [sys.executable, str(script), str(pid_file), "term-self", "torch"], raw, lab_env(), grace_s=10
    )
    assert run.exit_code == 128 + signal.SIGTERM  # the start-up hook's SystemExit: the shell's code for SIGTERM
    assert "ended by SIGTERM" in run.describe
    (profile,) = launcher.load_raw(raw)
    assert sum(t.op_type == "aten::mm" for t in profile.tasks) == 3
    assert_no_orphans(pid_file)


@fault
def test_ascendc_host_program_timeout_is_reported(program, capsys) -> None:
    from common.modes.ascendc import add_profile as driver

    script, pid_file = program
    code, output = driver.run_binary([sys.executable, str(script), str(pid_file), "hang"], timeout_s=2)
    assert code == launcher.EXIT_TIMEOUT and output == ""
    stopped = f"{Path(sys.executable).name} did not finish within the 2 s timeout and was stopped"
    assert stopped in capsys.readouterr().err
    assert driver.verification_verdict(code, output).ok is False
    assert_no_orphans(pid_file)


# ----- the mode lock --------------------------------------------------------------------------------
HOLD = (
    "import sys, time; from common.formats.rundir import lock_mode; lock_mode(sys.argv[1]); "
    "print('held', flush=True); time.sleep(120)"
)


def hold_lock(mode_dir: Path) -> subprocess.Popen:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(mode_dir)], env=lab_env(), stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout.readline().strip() == "held"
    return holder


@fault
def test_lock_refuses_a_second_run_and_a_killed_holder_frees_it(tmp_path: Path) -> None:
    mode = tmp_path / "01_cmdline"
    mode.mkdir()
    holder = hold_lock(mode)
    try:
        with pytest.raises(LabError, match=rf"another msprof lab run is using 01_cmdline \(pid {holder.pid}, "):
            rundir.lock_mode(mode)
    finally:
        holder.kill()  # SIGKILL: no clean-up code runs, the kernel drops the lock
        holder.wait()
    with rundir.lock_mode(mode) as lock:
        assert rundir.lock_mode(mode) is lock  # taken again in the same process: the same lock
    with rundir.lock_mode(mode):
        pass  # released, so it can be taken again


@fault
@pytest.mark.parametrize(
    "script",
    [
        "01_cmdline/run.sh",
        "02_api_AscendC/run.sh",
        "02_api_AscendC/build.sh",
        "03_api_pyAcl/run.sh",
        "04_pyTorch/run.sh",
    ],
)
def test_every_mode_refuses_to_run_while_another_run_holds_it(tmp_path: Path, script: str) -> None:
    lab = copy_lab(tmp_path / "lab")
    mode = lab / script.split("/")[0]
    previous = plant(mode / "prof_out")
    holder = hold_lock(mode)
    try:
        result = subprocess.run(
            ["bash", str(lab / script), "0"] if "run.sh" in script else ["bash", str(lab / script)],
            cwd=lab,
            env=lab_env(),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    finally:
        holder.kill()
        holder.wait()
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stdout + result.stderr
    errors = error_lines(result.stderr)
    assert len(errors) == 1, result.stderr
    assert errors[0].startswith(f"Error: another msprof lab run is using {mode.name} (pid {holder.pid}, ")
    assert (previous / "precious.txt").is_file()  # the running one's output was not touched


# ----- mode 01 end to end: the lab itself is stopped, or the program hangs ---------------------------------
def wait_for(path: Path, proc: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not path.is_file():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.1)


# A background job (CI runners, this test's own parent) may inherit SIGINT ignored; in a terminal
# Ctrl-C is live. This restores that for the lab, so the SIGINT below means what a user's Ctrl-C means.
AS_IN_A_TERMINAL = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp('bash', sys.argv[1:])"
)


def lab_run(lab: Path, out: str, *app: str, options: tuple[str, ...] = ()) -> subprocess.Popen:
    argv = ["bash", str(lab / "01_cmdline/run.sh"), "0", "--output", out, *options, "--", *app]
    return subprocess.Popen(
        [sys.executable, "-c", AS_IN_A_TERMINAL, *argv],
        cwd=lab,
        env=lab_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def assert_partial_profile_kept(out: Path, stderr: str, describe: str) -> dict:
    (error,) = error_lines(stderr)
    assert describe in error and "marked incomplete in run_info.json" in error  # (the program's traceback may show)
    info = json.loads((out / "run_info.json").read_text())
    assert info["completed"] is False and info["end"]
    (summary,) = out.glob("PROF_*/mindstudio_profiler_output/op_summary_*.csv")
    assert sum(t.op_type == "aten::mm" for t in readers.read_op_summary(summary)) == 3  # flushed at the stop
    return info["app_status"]


@fault
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_stopping_the_lab_stops_the_program_keeps_its_profile_and_frees_the_mode(tmp_path: Path, sig: str) -> None:
    lab, (script, pid_file) = copy_lab(tmp_path / "lab"), (tmp_path / "program.py", tmp_path / "pids")
    script.write_text(PROGRAM)
    out = lab / "01_cmdline" / "prof_out"
    first = lab_run(lab, str(out), "python3", str(script), str(pid_file), "hang", "torch")
    wait_for(pid_file, first)
    if sig == "SIGTERM":  # while it runs, a second run of the mode is refused (checked once)
        second = lab_run(lab, str(lab / "01_cmdline" / "prof_out_2"), "python3", "-c", "pass")
        _, err = second.communicate(timeout=300)
        assert second.returncode == 2 and "another msprof lab run is using 01_cmdline" in err
        assert not (lab / "01_cmdline" / "prof_out_2").exists()
    first.send_signal(signal.Signals[sig])
    _, stderr = first.communicate(timeout=120)
    assert first.returncode == 128 + signal.Signals[sig].value
    status = assert_partial_profile_kept(out, stderr, f"was stopped because the lab received {sig}")
    assert status["stopped_by"] == sig
    assert_no_orphans(pid_file)
    if sig == "SIGINT":
        return
    # The next run starts clean: same output, the old data replaced (checked once).
    old = {p.name for p in out.glob("PROF_*")}
    tiny = tmp_path / "tiny.py"
    tiny.write_text("import torch\ntorch.ones(4).sum()\n")
    again = lab_run(lab, str(out), "python3", str(tiny))
    stdout, stderr = again.communicate(timeout=300)
    assert again.returncode == 0, stdout + stderr
    assert json.loads((out / "run_info.json").read_text())["completed"] is True
    assert old.isdisjoint(p.name for p in out.glob("PROF_*"))


@fault
def test_timeout_option_stops_a_hanging_program(tmp_path: Path) -> None:
    """--timeout end to end. The profile flush at a stop is the SIGTERM path, proven above (lab and hook)."""
    lab, (script, pid_file) = copy_lab(tmp_path / "lab"), (tmp_path / "program.py", tmp_path / "pids")
    script.write_text(PROGRAM)
    out = lab / "01_cmdline" / "prof_out"
    proc = lab_run(lab, str(out), "python3", str(script), str(pid_file), "hang", options=("--timeout", "3"))
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == launcher.EXIT_TIMEOUT, stderr
    (error,) = error_lines(stderr)
    assert "did not finish within the 3 s timeout and was stopped (killed by signal SIGTERM)" in error
    info = json.loads((out / "run_info.json").read_text())
    assert info["completed"] is False and info["app_status"]["timed_out"] is True
    assert_no_orphans(pid_file)
