"""The portable backend of mode 01: run an unchanged program and profile it for its whole life.

The program is started as an argv list (never through a shell) with the ``autoprofile``
start-up hook on its PYTHONPATH. Every Python process of the program tree that imports
torch writes its own op tree; this module turns each into a ``PROF_*`` folder the way
msprof writes one folder per profiled process.

:func:`run_command` is how the lab starts every external program (msprof, the app, the
AscendC host program, torchrun): in a session of its own, so that a timeout, Ctrl-C (SIGINT)
or SIGTERM reaching the lab is passed to the program's whole process group, children and
grandchildren included, and whatever the program leaves running when it ends is stopped
too. The program first gets ``grace_s`` seconds to exit by itself (the start-up hook turns
SIGTERM into a normal exit, so the profile is written), then the group is killed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from common.collect import runlogs
from common.collect.msprof_layout import ProfDir, new_prof_dir
from common.collect.torch_ops import (
    api_calls,
    api_statistic,
    learn_decompositions,
    nodes_from_json,
    tasks_from_nodes,
    user_ranges,
)
from common.errors import Interrupted, LabError
from common.formats import writers
from common.formats.records import Task, TaskTimeRow, TxRange

AUTOPROFILE_DIR = Path(__file__).resolve().parent / "autoprofile"
OUT_DIR_VAR = "MSPROF_LAB_AUTOPROFILE_DIR"
TERMINATE_GRACE_S = 10.0  # after SIGTERM / SIGINT, how long the program gets to run its exit handlers
EXIT_TIMEOUT = 124  # the lab's exit code when it stopped a program at the timeout (as timeout(1) does)


class _Terminated(Interrupted):
    """SIGTERM reached the lab while it waited for a program."""

    def __init__(self) -> None:
        super().__init__("SIGTERM", 128 + signal.SIGTERM)


@dataclass
class AppRun:
    """How a program the lab started ended."""

    exit_code: int  # the program's own status: its exit code, or -N when signal N killed it
    timed_out: bool = False
    timeout_s: float | None = None
    stopped_by: str | None = None  # "SIGINT" / "SIGTERM": the lab got it and passed it on
    leftovers: int = 0  # processes of the program still running after it ended; the lab stopped them
    output: str = field(default="", repr=False)  # stdout, when captured

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.stopped_by

    @property
    def describe(self) -> str:
        if self.timed_out:
            return f"did not finish within the {self.timeout_s:g} s timeout and was stopped ({self._status()})"
        if self.stopped_by:
            return f"was stopped because the lab received {self.stopped_by} ({self._status()})"
        return self._status()

    def _status(self) -> str:
        if self.exit_code < 0:
            return f"killed by signal {_signal_name(-self.exit_code)}"
        if self.exit_code > 128 and _signal_name(self.exit_code - 128, None):
            return f"exited with code {self.exit_code}, i.e. ended by {_signal_name(self.exit_code - 128)}"
        return f"exited with code {self.exit_code}"

    @property
    def lab_exit_code(self) -> int:
        """What the lab exits with: 124 on timeout, 128+N for a signal, else the program's own code."""
        if self.timed_out:
            return EXIT_TIMEOUT
        if self.stopped_by:
            return 128 + signal.Signals[self.stopped_by].value
        if self.exit_code < 0:
            return 128 - self.exit_code
        return self.exit_code

    def raise_if_stopped(self) -> None:
        """The lab was asked to stop (SIGINT / SIGTERM): after the program, the lab stops too."""
        if self.stopped_by:
            raise Interrupted(self.stopped_by, self.lab_exit_code)

    def status(self) -> dict:
        """For run_info.json."""
        return {
            "exit_code": self.exit_code,
            "timed_out": self.timed_out,
            "timeout_s": self.timeout_s,
            "stopped_by": self.stopped_by,
            "leftover_processes_stopped": self.leftovers,
            "describe": self.describe,
        }


def _signal_name(number: int, default: str | None = "") -> str | None:
    try:
        return signal.Signals(number).name
    except ValueError:
        return default if default is None else f"{number}"


@dataclass
class ProcessProfile:
    pid: int
    ppid: int
    argv: list[str]
    tasks: list[Task]
    api: dict[str, list[float]]
    ranges: list[TxRange] = field(default_factory=list)  # the program's own record_function ranges


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


def check_argv(argv: Sequence[object]) -> list[str]:
    """An external command is a list of strings (or paths); a single string would need a shell."""
    if isinstance(argv, (str, bytes)) or not argv or not all(isinstance(a, (str, os.PathLike)) for a in argv):
        raise TypeError(f"an external command must be a non-empty argv list, not {argv!r}")
    return [os.fspath(a) for a in argv]


def run_app(
    app_argv: list[str],
    raw_dir: Path,
    env: dict[str, str],
    timeout_s: float | None = None,
    grace_s: float = TERMINATE_GRACE_S,
    stderr_log: Path | None = None,
) -> AppRun:
    """Run the program with the start-up hook; its stdout/stderr go straight to the terminal (stderr also to
    ``stderr_log``, when given)."""
    env = dict(env)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(AUTOPROFILE_DIR), env.get("PYTHONPATH")]))
    env[OUT_DIR_VAR] = str(raw_dir)
    raw_dir.mkdir(parents=True, exist_ok=True)
    return run_command(app_argv, env, timeout_s, grace_s=grace_s, stderr_log=stderr_log)


def run_command(
    argv: Sequence[object],
    env: dict[str, str] | None = None,
    timeout_s: float | None = None,
    *,
    capture: bool = False,
    grace_s: float = TERMINATE_GRACE_S,
    stderr: Path | None = None,
    on_timeout: Callable[[], object] | None = None,
    stderr_log: Path | None = None,
    cwd: Path | None = None,
) -> AppRun:
    """Run ``argv`` (no shell) in its own session and wait; stop its whole group on timeout, SIGINT or SIGTERM.

    ``capture``: stdout is collected (through a file, so a chatty program never blocks on a
    full pipe) into ``AppRun.output``; stderr goes to the terminal, or into the file ``stderr``,
    or to both the terminal and the file ``stderr_log`` (kept for after a failure, runlogs.py).
    ``on_timeout`` runs at the timeout while the program is still alive (to ask it where it is).
    """
    argv = check_argv(argv)
    with (
        tempfile.TemporaryFile() if capture else _nothing() as out,
        stderr.open("w") if stderr else _nothing() as err,
        _sigterm_raises(),
    ):
        # A session of its own: the terminal's Ctrl-C reaches only the lab, which passes it on
        # to the whole group; and the group can be stopped without touching the lab.
        proc = subprocess.Popen(
            argv, env=env, cwd=cwd, stdout=out, stderr=subprocess.PIPE if stderr_log else err, start_new_session=True
        )
        copier = runlogs.tee(proc.stderr, stderr_log) if stderr_log else None
        run = AppRun(0, timeout_s=timeout_s)
        try:
            run.exit_code = _wait(proc, timeout_s)
        except subprocess.TimeoutExpired:
            run.timed_out = True
            if on_timeout:
                on_timeout()
            run.exit_code = _stop_group(proc, signal.SIGTERM, grace_s)
        except _Terminated:
            run.stopped_by = "SIGTERM"
            run.exit_code = _stop_group(proc, signal.SIGTERM, grace_s)
        except KeyboardInterrupt:
            run.stopped_by = "SIGINT"
            run.exit_code = _stop_group(proc, signal.SIGINT, grace_s)
        finally:
            if proc.returncode is None:  # an error in the lab itself: never leave the program behind
                _signal_group(proc.pid, signal.SIGKILL)
                proc.wait()
            run.leftovers = _stop_leftovers(proc.pid, grace_s)
            if copier is not None:  # the group is gone, so the pipe ends; never wait on it for long
                copier.join(timeout=5.0)
                proc.stderr.close()
            if run.leftovers:
                print(
                    f"note: {argv[0]} left {run.leftovers} process(es) running when it ended; the lab stopped them",
                    file=sys.stderr,
                )
        if out is not None:
            out.seek(0)
            run.output = out.read().decode(errors="replace")
    return run


def _wait(proc: subprocess.Popen, timeout_s: float | None) -> int:
    """``proc.wait`` that never blocks in one long system call.

    The lab has threads (torch's): a SIGINT or SIGTERM may be delivered to one of them, and
    then a main thread blocked in ``waitpid`` would not wake up to run the Python handler.
    Waiting with a timeout polls, so the handler runs within a fraction of a second.
    """
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        step = 0.5 if deadline is None else max(0.0, min(0.5, deadline - time.monotonic()))
        try:
            return proc.wait(timeout=step)
        except subprocess.TimeoutExpired:
            if deadline is not None and time.monotonic() >= deadline:
                raise


@contextmanager
def _nothing() -> Iterator[None]:
    yield None


@contextmanager
def _sigterm_raises() -> Iterator[None]:
    """While a program runs, SIGTERM to the lab becomes an exception, so the program is stopped first."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_terminated(signum, frame):
        raise _Terminated

    previous = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _signal_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _stop_group(proc: subprocess.Popen, first: int, grace_s: float) -> int:
    """Send ``first`` to the program's group, give it ``grace_s`` to exit (and flush), then kill the group."""
    _signal_group(proc.pid, first)
    try:
        return proc.wait(timeout=grace_s)
    except (subprocess.TimeoutExpired, KeyboardInterrupt):  # no answer, or asked twice: stop now
        _signal_group(proc.pid, signal.SIGKILL)
        return proc.wait()


def live_group_members(pgid: int) -> list[int] | None:
    """Running (not zombie) processes of process group ``pgid``; None where /proc cannot tell."""
    proc_dir = Path("/proc")
    if not (proc_dir / "self" / "stat").is_file():
        return None
    members = []
    for stat in proc_dir.glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # it ended while we looked
        fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) ": state ppid pgrp ...
        if len(fields) > 2 and fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(stat.parent.name))
    return members


def _group_alive(pgid: int) -> int:
    members = live_group_members(pgid)
    if members is not None:
        return len(members)
    return 1 if _signal_group(pgid, 0) else 0


def _stop_leftovers(pgid: int, grace_s: float) -> int:
    """The program ended; stop what it left running in its group (they would be orphans). Returns how many."""
    found = _group_alive(pgid)
    if not found:
        return 0
    _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while _group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _group_alive(pgid):
        _signal_group(pgid, signal.SIGKILL)
        deadline = time.monotonic() + 5.0
        while _group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.05)
    return found


def load_raw(raw_dir: Path) -> list[ProcessProfile]:
    """Every process profile the hook wrote, oldest process first."""
    profiles = []
    for file in sorted(raw_dir.glob("*.json")):
        try:
            record = json.loads(file.read_text())
        except json.JSONDecodeError:
            continue  # a process killed mid-write leaves only its .tmp; a bad file is skipped the same way
        learn_decompositions(record.get("decomposes") or {})  # the program's torch answered for its op names
        roots, start_us = nodes_from_json(record["nodes"]), float(record["trace_start_us"])
        tasks = writers.with_wait_times(tasks_from_nodes(roots, start_us))
        profiles.append(
            ProcessProfile(
                record["pid"], record["ppid"], record["argv"], tasks, api_calls(roots), user_ranges(roots, start_us)
            )
        )
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
        if profile.ranges:  # msprof writes msprof_tx only when the program marked ranges (--msproftx=on)
            writers.write_msprof_tx(prof.file("msprof_tx"), profile.ranges, profile.pid)
        written.append(prof)
    return written
