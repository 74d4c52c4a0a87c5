"""The harness around every mode's lesson file: everything a mode does that is not the lesson.

A lesson file keeps the profiling call, its checks and its explanation; this module does the
rest, the same way in every mode::

    lesson = Lesson("pytorch", MODE_DIR, __doc__)        # the mode's name in run_info.json
    lesson.parser.add_argument("--train", ...)            # the mode's own options, if any
    run = lesson.start(argv, forwards=5)                  # banner, device, lock, prof_out/, run_info
    ...                                                   # the lesson: profile into run.out
    run.finish(completed=True)                            # run_info.json: completed, exit code
    return run.report(verdicts)                           # report + checks printed, report.md, exit code

``start`` prints the detected backend first, validates the device id, takes the mode's lock
(a second run of the same mode stops there, before anything is deleted), recreates the output
folder only when the lab made it, and writes ``run_info.json`` marked incomplete.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from common.analyze.checks import Verdict
from common.backend import Backend, detect, parse_device_id, select_device
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

DEVICE_HELP = "NPU device id, 0..63 (default 0)"
TIMEOUT_HELP = ("stop the program after this many seconds (default: $MSPROF_LAB_TIMEOUT_S, else no limit); "
                "its profile is kept, marked incomplete")


@dataclass
class Run:
    """One started run of a mode: where its output goes and what it was started with."""

    mode: str
    mode_dir: Path
    args: object
    backend: Backend
    device: int
    out: Path
    info: dict
    timeout_s: float | None = None
    child_env: dict[str, str] = field(default_factory=dict)

    @property
    def npu(self) -> bool:
        return self.backend.is_npu

    def record(self, **changes: object) -> None:
        """Add to run_info.json now (e.g. the command that really ran, once it is known)."""
        self.info.update(changes)
        write_run_info(self.out, self.info)

    def finish(self, *, completed: bool, exit_code: int | None = None, **extra: object) -> None:
        """Mark run_info.json finished (``completed`` false keeps what was collected, flagged partial)."""
        code = exit_code if exit_code is not None else (0 if completed else 1)
        finish_run(self.out, self.info, exit_code=code, completed=completed, **extra)

    def datasets(self, kind: str | None = None, where: Path | None = None) -> list[Dataset]:
        """The datasets (msprof / torch_npu exports) under the output folder, optionally of one kind."""
        found = find_datasets(where or self.out)
        return [ds for ds in found if kind is None or ds.kind == kind]

    def report(self, verdicts: list[Verdict], notes: list[str] = (), where: Path | None = None) -> int:
        """Print the report with the checks and notes, save report.md beside the data; 0 when every check held."""
        from common.cli.reports import directory_report, write_report_md

        text, markdown = directory_report(where or self.out, verdicts)
        print(text)
        for note in notes:
            print(note)
        print(write_report_md(where or self.out, markdown + "".join(f"\n{note}\n" for note in notes)))
        return 0 if all(v.ok for v in verdicts) else 1


class Lesson:
    """A mode's command line and start-up, shared by every lesson file."""

    def __init__(self, mode: str, mode_dir: Path, doc: str | None, *, prog: str | None = None,
                 device: bool = True, output: bool = True, timeout: bool = False) -> None:
        self.mode, self.mode_dir = mode, Path(mode_dir).resolve()
        self.parser = ArgumentParser(prog=prog or f"{self.mode_dir.name}/run.sh",
                                     description=(doc or "").strip().splitlines()[0] if doc else None)
        if device:
            self.parser.add_argument("device", nargs="?", default="0", help=DEVICE_HELP)
        if output:
            self.parser.add_argument("--output", help=f"output folder inside {self.mode_dir.name}/ "
                                     f"(default {self.mode_dir.name}/prof_out)")
        if timeout:
            self.parser.add_argument("--timeout", help=TIMEOUT_HELP)

    def parse(self, argv: list[str] | None) -> object:
        return self.parser.parse_args(sys.argv[1:] if argv is None else argv)

    def start(self, argv: list[str] | None = None, *, args: object = None, command: list[str] | None = None,
              out: Path | None = None, check: Callable[[Backend], dict | None] | None = None, **info: object) -> Run:
        """Banner, device, lock, a fresh output folder and run_info.json (extra keys from ``info``).

        ``check(backend)``, if given, runs under the lock and before the output folder is touched:
        what a user can get wrong for this backend (a missing model, a bad input) stops there,
        with nothing deleted. A dict it returns (what it found, e.g. the build's RUN_MODE) goes
        into run_info first.
        """
        args = args if args is not None else self.parse(argv)
        backend = detect()
        print(backend.banner(), flush=True)
        device = parse_device_id(getattr(args, "device", "0"))
        child_env = select_device(backend, device)
        timeout_s = parse_timeout(getattr(args, "timeout", None))
        target = out or output_path(self.mode_dir, getattr(args, "output", None))
        lock_mode(self.mode_dir)  # one run of this mode at a time: a second one stops here, before deleting anything
        found = check(backend) if check is not None else None
        target = prepare_output_dir(target)
        record = start_run(target, mode=self.mode, backend=backend.name, device=device,
                           command=command or sys.argv, **{**(found or {}), **info})
        return Run(self.mode, self.mode_dir, args, backend, device, target, record, timeout_s, child_env)


def require_module(backend: Backend, module: str, fix: str) -> None:
    """On the npu backend, stop with one line when a Python module the mode needs is not importable."""
    if backend.is_npu and module not in backend.python_modules:
        raise LabError(f"the npu backend needs {module}, which is not importable", fix)


def main_of(main: Callable[[], int]) -> None:
    """Run a lesson's ``main`` as a command: one ``Error:`` line for a user mistake, its exit code otherwise."""
    os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # the profiler's own logging stays quiet
    run_cli(main)
