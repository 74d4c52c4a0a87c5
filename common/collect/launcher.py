"""The portable backend of mode 01: run an unchanged program and profile it for its whole life.

The program is started as an argv list (never through a shell) with the ``autoprofile``
start-up hook on its PYTHONPATH. Every Python process of the program tree that imports
torch writes its own op tree; this module turns each into a ``PROF_*`` folder the way
msprof writes one folder per profiled process.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from common.collect.msprof_layout import ProfDir, new_prof_dir
from common.collect.torch_ops import api_calls, api_statistic, nodes_from_json, tasks_from_nodes
from common.errors import LabError
from common.formats import writers
from common.formats.records import Task, TaskTimeRow

AUTOPROFILE_DIR = Path(__file__).resolve().parent / "autoprofile"
OUT_DIR_VAR = "MSPROF_LAB_AUTOPROFILE_DIR"
TERMINATE_GRACE_S = 10.0  # after SIGTERM, how long the program gets to run its exit handlers


@dataclass
class AppRun:
    """How the program ended."""

    exit_code: int
    timed_out: bool = False

    @property
    def describe(self) -> str:
        if self.timed_out:
            return "was stopped after the timeout"
        if self.exit_code < 0:
            return f"was killed by signal {signal.Signals(-self.exit_code).name}"
        return f"exited with code {self.exit_code}"


@dataclass
class ProcessProfile:
    pid: int
    ppid: int
    argv: list[str]
    tasks: list[Task]
    api: dict[str, list[float]]


def resolve_app(app_argv: list[str]) -> list[str]:
    """Check the program exists before profiling it; ``python`` means this interpreter."""
    if not app_argv:
        raise LabError("no program given", "pass it after --, e.g. -- python3 my_model.py")
    exe = app_argv[0]
    if exe in ("python", "python3"):
        app_argv = [sys.executable, *app_argv[1:]]
        script = next((a for a in app_argv[1:] if not a.startswith("-")), None)
        if script and script.endswith(".py") and not Path(script).is_file():
            raise LabError(f"program {script} does not exist", "check the path of the script to profile")
        return app_argv
    if os.sep in exe:
        if not Path(exe).is_file():
            raise LabError(f"program {exe} does not exist", "check the path of the program to profile")
    elif shutil.which(exe) is None:
        raise LabError(f"program {exe!r} is not on PATH", "give its path or install it")
    return app_argv


def run_app(app_argv: list[str], raw_dir: Path, env: dict[str, str], timeout_s: float | None = None) -> AppRun:
    """Run the program with the start-up hook; its stdout/stderr go straight to the terminal."""
    env = dict(env)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(AUTOPROFILE_DIR), env.get("PYTHONPATH")]))
    env[OUT_DIR_VAR] = str(raw_dir)
    raw_dir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(app_argv, env=env)
    try:
        return AppRun(proc.wait(timeout=timeout_s))
    except subprocess.TimeoutExpired:
        _stop(proc)
        return AppRun(proc.returncode if proc.returncode is not None else -signal.SIGKILL, timed_out=True)
    except KeyboardInterrupt:
        _stop(proc, signal.SIGINT)
        return AppRun(proc.returncode if proc.returncode is not None else -signal.SIGINT)


def _stop(proc: subprocess.Popen, first: int = signal.SIGTERM) -> None:
    """Ask the program to stop (its exit handlers flush the profile), then insist."""
    if proc.poll() is None:
        proc.send_signal(first)
        try:
            proc.wait(timeout=TERMINATE_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def load_raw(raw_dir: Path) -> list[ProcessProfile]:
    """Every process profile the hook wrote, oldest process first."""
    profiles = []
    for file in sorted(raw_dir.glob("*.json")):
        try:
            record = json.loads(file.read_text())
        except json.JSONDecodeError:
            continue  # a process killed mid-write leaves only its .tmp; a bad file is skipped the same way
        roots = nodes_from_json(record["nodes"])
        tasks = writers.with_wait_times(tasks_from_nodes(roots, float(record["trace_start_us"])))
        profiles.append(ProcessProfile(record["pid"], record["ppid"], record["argv"], tasks, api_calls(roots)))
    return sorted(profiles, key=lambda p: p.tasks[0].start_us if p.tasks else float("inf"))


def write_msprof_layout(out_dir: Path, profiles: list[ProcessProfile]) -> list[ProfDir]:
    """One ``PROF_*/mindstudio_profiler_output/`` per process, with msprof's file names and columns."""
    written = []
    for index, profile in enumerate(profiles, start=1):
        prof = new_prof_dir(out_dir, index)
        writers.write_op_summary(prof.file("op_summary"), profile.tasks)
        writers.write_op_statistic(prof.file("op_statistic"), writers.aggregate_op_statistic(profile.tasks))
        writers.write_api_statistic(prof.file("api_statistic"), api_statistic(profile.api))
        task_rows = [
            TaskTimeRow(t.op_name, t.task_type, "0", str(i), t.duration_us, t.start_us, t.end_us)
            for i, t in enumerate(profile.tasks)
        ]
        writers.write_task_time(prof.file("task_time"), task_rows)
        name = f"CPU ops (portable) pid {profile.pid}: {' '.join(profile.argv)[:80]}"
        writers.write_trace(prof.file("msprof", "json"), writers.timeline_events(profile.tasks, profile.pid, name))
        written.append(prof)
    return written
