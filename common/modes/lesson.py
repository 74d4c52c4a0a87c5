"""The harness around every mode's lesson file: everything a mode does that is not the lesson.

A lesson file keeps the profiling call, its checks and its explanation; this module does the
rest, the same way in every mode::

    lesson = Lesson("pytorch", MODE_DIR, __doc__)        # the mode's name in run_info.json
    lesson.parser.add_argument("--train", ...)            # the mode's own options, if any
    run = lesson.start(argv, forwards=5)                  # banner, device, lock, prof_out/, run_info
    ...                                                   # the lesson: profile into run.out
    run.finish(completed=True)                            # run_info.json: completed, exit code
    return run.report(verdicts)                           # report + checks printed, report.md, exit code

``start`` prints the detected backend first, validates the device id, loads the workload
(``--workload FILE``, else $MSPROF_LAB_WORKLOAD, else TinyMLP: a bad file stops here, nothing
deleted), sets the portable backend's thread count (``--threads``), takes the mode's lock (a
second run of the same mode stops there, before anything is deleted), recreates the output
folder only when the lab made it, and writes ``run_info.json`` marked incomplete.
``run.report`` prints the report and writes report.md and report.html beside the data.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from common.verdict import Verdict, as_record
from common.backend import Backend, detect, parse_device_id, select_device
from common.collect import runlogs
from common.errors import ArgumentParser, LabError, run_cli
from common.formats.datasets import Dataset, find_datasets
from common.formats.rundir import (
    finish_run,
    lock_mode,
    output_path,
    parse_timeout,
    prepare_output_dir,
    start_run,
    write_run_info,
)
from common.workload import Workload, load_workload, use_threads, workload_identity

DEVICE_HELP = "NPU device id, 0..63 (default 0)"
WORKLOAD_HELP = (
    "a Python file defining build_model() and make_input() (see docs/own_model.md); default: "
    "$MSPROF_LAB_WORKLOAD, else the built-in TinyMLP"
)
# One thread by default: on a small shared machine a parallel op lasts as long as its slowest
# thread, so per-op times would measure whatever else the machine is doing, not the op.
THREADS_HELP = (
    "portable backend: torch's intra-op threads (default 1: an op split over threads waits for the "
    "slowest one, so on a busy machine its time measures the other programs; 0 = torch's default)"
)
THREADS_VAR = "OMP_NUM_THREADS"  # what a profiled child process's torch reads its thread count from
TIMEOUT_HELP = (
    "stop the program after this many seconds (default: $MSPROF_LAB_TIMEOUT_S, else no limit); "
    "its profile is kept, marked incomplete"
)


@dataclass
class Run:
    """One started run of a mode: where its output goes and what it was started with."""

    mode: str
    mode_dir: Path
    args: object
    backend: Backend
    devices: list[int]  # one for a mode's run, one per rank for DDP's
    out: Path
    info: dict
    timeout_s: float | None = None
    child_env: dict[str, str] = field(default_factory=dict)
    workload: Workload | None = None  # None: the mode profiles something else (02's kernel)
    finished: bool = False

    @property
    def npu(self) -> bool:
        return self.backend.is_npu

    @property
    def device(self) -> int:
        """The run's device (the first of DDP's)."""
        return self.devices[0]

    def record(self, **changes: object) -> None:
        """Add to run_info.json now (e.g. the command that really ran, once it is known)."""
        self.info.update(changes)
        write_run_info(self.out, self.info)

    def finish(self, *, completed: bool, exit_code: int | None = None, **extra: object) -> None:
        """Mark run_info.json finished (``completed`` false keeps what was collected, flagged partial)."""
        code = exit_code if exit_code is not None else (0 if completed else 1)
        self.finished = True
        finish_run(self.out, self.info, exit_code=code, completed=completed, **extra)
        if not completed:  # point at the logs of what failed: stderr files, CANN's plogs (runlogs.py)
            runlogs.print_failure_report(self.out, self.npu)

    def datasets(self, kind: str | None = None, where: Path | None = None) -> list[Dataset]:
        """The datasets (msprof / torch_npu exports) under the output folder, optionally of one kind."""
        found = find_datasets(where or self.out)
        return [ds for ds in found if kind is None or ds.kind == kind]

    def report(
        self, verdicts: list[Verdict], notes: list[str] = (), where: Path | None = None, warnings: list[str] = ()
    ) -> int:
        """Print the report with the checks and notes (common.modes.reports.directory_report), save report.md and
        report.html beside the data; 0 when every check held. ``warnings`` (e.g. a disturbed run) are shown, never
        failed."""
        from common.modes.report_files import write_reports

        root = where or self.out
        report = write_reports(root, verdicts, notes, warnings)
        failed = [v.name for v in [*verdicts, *report.integrity] if not v.ok]
        # what agree reads: whether this mode's own checks held, and which did not
        self.record(
            verdicts_passed=not failed,
            failed_checks=failed,
            checks=[as_record(v) for v in verdicts],
            report_notes=list(notes),
            **({"disturbed": report.warnings} if report.warnings else {}),
        )
        print(report.text)
        for line in report.written:
            print(line)
        return 0 if not failed else 1


class Lesson:
    """A mode's command line and start-up, shared by every lesson file."""

    def __init__(
        self,
        mode: str,
        mode_dir: Path,
        doc: str | None,
        *,
        prog: str | None = None,
        device: bool = True,
        output: bool = True,
        timeout: bool = False,
        workload: bool = True,
        threads: bool = True,
    ) -> None:
        """``workload`` false: the mode profiles something else; ``--workload`` (added by the mode where it
        fits, see :meth:`add_workload_option`) is only identified and recorded, never run. ``threads`` false: no
        ``--threads`` (DDP's ranks keep torch's own count)."""
        self.mode, self.mode_dir = mode, Path(mode_dir).resolve()
        self.uses_workload = workload
        self.parser = ArgumentParser(
            prog=prog or f"{self.mode_dir.name}/run.sh",
            description=(doc or "").strip().splitlines()[0] if doc else None,
        )
        if device:
            self.parser.add_argument("device", nargs="?", default="0", help=DEVICE_HELP)
        if output:
            self.parser.add_argument(
                "--output", help=f"output folder inside {self.mode_dir.name}/ (default {self.mode_dir.name}/prof_out)"
            )
        if timeout:
            self.parser.add_argument("--timeout", help=TIMEOUT_HELP)
        if workload:
            self.add_workload_option(self.parser)
        if workload and threads:
            self.parser.add_argument("--threads", default="1", metavar="N", help=THREADS_HELP)

    @staticmethod
    def add_workload_option(parser) -> None:
        parser.add_argument("--workload", metavar="FILE", help=WORKLOAD_HELP)

    def parse(self, argv: list[str] | None) -> object:
        return self.parser.parse_args(sys.argv[1:] if argv is None else argv)

    def start(
        self,
        argv: list[str] | None = None,
        *,
        args: object = None,
        command: list[str] | None = None,
        out: Path | None = None,
        check: Callable[[Backend], dict | None] | None = None,
        program: list[str] | None = None,
        devices: list[int] | None = None,
        **info: object,
    ) -> Run:
        """Banner, device, lock, a fresh output folder and run_info.json (extra keys from ``info``).

        ``devices``: the run's devices when it has several (DDP's ranks, recorded as a list), each checked as the
        one device of a mode's run is (``args.device``).

        ``program``: a program of the user's that the run profiles whole, recorded as such, with no workload (the
        lab's model is neither loaded nor named).

        ``check(backend)``, if given, runs under the lock and before the output folder is touched:
        what a user can get wrong for this backend (a missing model, a bad input) stops there,
        with nothing deleted. A dict it returns (what it found, e.g. the build's RUN_MODE) goes
        into run_info first.
        """
        args = args if args is not None else self.parse(argv)
        backend = detect()
        print(backend.banner(), flush=True)
        several = devices is not None
        devices = list(devices) if several else [parse_device_id(getattr(args, "device", "0"))]
        for device in devices:
            child_env = select_device(backend, device)  # each a logical id here (npu)
        timeout_s = parse_timeout(getattr(args, "timeout", None))
        threads = parse_threads(getattr(args, "threads", None))
        target = out or output_path(self.mode_dir, getattr(args, "output", None))
        # The workload is imported and run once here, before anything is deleted: a bad file stops the run.
        workload = load_workload(getattr(args, "workload", None)) if self.uses_workload and not program else None
        identity = (
            None if program else workload.info() if workload else workload_identity(getattr(args, "workload", None))
        )
        if threads is not None and not backend.is_npu:
            threads = set_threads(threads, child_env)
        else:
            threads = None  # the NPU backend leaves the host's thread count as it is
        lock_mode(self.mode_dir)  # one run of this mode at a time: a second one stops here, before deleting anything
        found = check(backend) if check is not None else None
        runlogs.use_run_logs(backend.is_npu, target, child_env)  # npu: CANN's logs of every program into <out>/logs
        target = prepare_output_dir(target)
        record = start_run(
            target,
            mode=self.mode,
            backend=backend.name,
            device=devices if several else devices[0],
            command=command or sys.argv,
            workload=identity,
            threads=threads,
            **({"samples": workload.samples} if workload else {}),
            **{**(found or {}), **info, **({"program": list(program)} if program else {})},
        )
        run = Run(self.mode, self.mode_dir, args, backend, devices, target, record, timeout_s, child_env, workload)
        STARTED.append(run)
        return run


STARTED: list[Run] = []  # the runs this process started: a failure in the harness's own work is kept in the last one


def parse_threads(text: object) -> int | None:
    """``--threads``: an integer 0..1024 (0: torch's default); None when the mode has no such option."""
    if text is None:
        return None
    value = str(text).strip()
    if not value.isdigit() or int(value) > 1024:
        raise LabError(
            f"--threads {text!r} is not an integer in 0..1024",
            "e.g. --threads 1 (one thread, the default) or --threads 0 (torch's default)",
        )
    return int(value)


def set_threads(threads: int, child_env: dict[str, str]) -> int:
    """The thread count of any program the run profiles (OMP_NUM_THREADS), and of this process's torch: set
    now when torch is loaded, else through the same variable, which torch reads when it is first imported (a
    mode that only reads files never imports it)."""
    if threads == 0:
        import torch

        return torch.get_num_threads()
    child_env[THREADS_VAR] = str(threads)
    if "torch" in sys.modules:
        return use_threads(threads)
    os.environ[THREADS_VAR] = str(threads)
    return threads


def require_module(backend: Backend, module: str, fix: str) -> None:
    """On the npu backend, stop with one line when a Python module the mode needs is not importable."""
    if backend.is_npu and module not in backend.python_modules:
        raise LabError(f"the npu backend needs {module}, which is not importable", fix)


def main_of(main: Callable[[], int]) -> None:
    """Run a lesson's ``main`` as a command: one ``Error:`` line for a user mistake, its exit code otherwise; an
    error in the harness's own work after the run started is kept in its logs (:func:`keep_failure`)."""
    os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # the profiler's own logging stays quiet
    run_cli(lambda: keep_failure(main))


def keep_failure(main: Callable[[], int]) -> int:
    """``main()``; when it raises something other than a user mistake after a run started (the workload's forward
    fails in the harness's own steps: mode 04's timing without the profiler, a reference), the traceback is shown,
    kept as ``<out>/logs/<n>-<mode>-harness.stderr.log`` like a launched program's stderr, the run is marked
    incomplete with the error, and the logs are named as after any failed program. Exit 1."""
    try:
        return main()
    except (LabError, KeyboardInterrupt, BrokenPipeError):
        raise
    except Exception as err:
        run = next((r for r in reversed(STARTED) if not r.finished), None)
        if run is None:
            raise
        text = traceback.format_exc()
        sys.stderr.write(text)
        log = runlogs.stderr_log(run.out, [f"{run.mode}-harness"])
        log.write_text(f"{' '.join(sys.argv)}: the harness's own work failed\n{text}")
        run.finish(completed=False, exit_code=1, failure=f"{type(err).__name__}: {err}"[:300])
        return 1
