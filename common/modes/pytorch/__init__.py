"""Mode 04's harness: the lab around the lesson files of ``04_pyTorch/src``.

``python -m common.modes.pytorch`` (``04_pyTorch/run.sh``) launches ``model_with_profiler.py``,
``python -m common.modes.pytorch.dynamic`` (``run_dynamic.sh``) ``dynamic_profile.py``, and
``python -m common.modes.pytorch.sweep`` (``nox -s sweep``) the first over a grid of sizes. Each
launches the lesson as a program with its documented arguments, then reads what the profiler
wrote: torch_npu's ``*_ascend_pt/`` on an NPU, torch.profiler's ``*.pt.trace.json`` elsewhere,
converted here into torch_npu's layout (:mod:`common.collect.torch_trace`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from common.collect import launcher, runlogs
from common.collect.torch_npu_layout import portable_profiler_info
from common.collect.torch_trace import find_trace, write_ascend_pt_from_trace
from common.errors import LabError
from common.modes import lesson_file, mode_dir

MODE_DIR = mode_dir("04_pyTorch")
# model_with_profiler.py's schedule (the lesson keeps its own copy: it is copied alone; a test compares them)
WAIT, WARMUP, ACTIVE = 1, 3, 5
STEPS = WAIT + WARMUP + ACTIVE
TORCH_TRACE_DIR = "torch_profiler"  # portable: where the lesson's torch.profiler writes its trace, under the run


def lesson_argv(name: str, *args: object) -> list[str]:
    """``python <04_pyTorch/src/name> args...``, with the lab's own interpreter."""
    return [sys.executable, str(lesson_file("04_pyTorch", name)), *map(str, args)]


def device_arg(run) -> str:
    """The lesson's ``--device``: ``npu:<id>`` on the npu backend, else ``cpu``."""
    return f"npu:{run.device}" if run.npu else "cpu"


def model_args(run) -> list[str]:
    """``--model <file>`` when the user gave a workload; nothing for TinyMLP (the lesson has its own)."""
    path = run.workload.path if run.workload is not None else None
    return ["--model", str(Path(path).resolve())] if path else []


def launch(run, argv: list[str]) -> None:
    """Run a lesson (no shell) with the run's environment (device, threads, CANN's log folder); its
    stderr is shown and kept under ``<out>/logs``. A lesson that fails marks the run incomplete."""
    app = launcher.run_command(
        argv, {**os.environ, **run.child_env}, run.timeout_s, stderr_log=runlogs.stderr_log(run.out, argv)
    )
    if app.ok:
        return
    run.finish(completed=False, exit_code=-1 if app.timed_out else app.exit_code)
    app.raise_if_stopped()
    raise LabError(
        f"{Path(argv[1]).name} exited {app.exit_code}{' (timed out)' if app.timed_out else ''}; "
        f"profile marked incomplete in {run.out}",
        "see its messages above (kept under logs/)",
    )


def convert_portable(run, trace_dir: Path, wait: int, warmup: int, active: int, into: Path | None = None) -> Path:
    """The lesson's torch.profiler trace (schedule ``wait``/``warmup``/``active``) -> ``*_ascend_pt`` in torch_npu's
    layout, under ``into`` (default: the run's folder); returns the trace it read."""
    trace = find_trace(trace_dir)
    write_ascend_pt_from_trace(trace, into or run.out, wait + warmup, portable_profiler_info(wait, warmup, active))
    return trace
