"""The lesson ``03_api_pyAcl/src/infer.py`` as the lab launches it, and what the lab does around its runs.

On the NPU the lesson is the pyACL program msprof starts (``--om <file> --device <id> ... --no-acl-prof``), or
that profiles itself with acl.prof (``--out <dir>``); ``python -m common precision`` starts it with
``--acl-config`` for the ACL dump. On the portable backend it runs the variant's model under ONNX Runtime's
profiler (``--onnx <file>``). Each time it is fed the arrays the lab saved (one per model input, in
the variant's dtype) and saves every output for the accuracy check. ``lesson_argv`` builds those commands;
``read_outputs`` has what the lesson saved read (common.formats.outputs) and checks its dtypes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from common.collect import launcher, msprof_layout, runlogs
from common.errors import LabError
from common.formats.outputs import read_numbered_outputs
from common.formats.records import Task
from common.modes import lesson_file
from common.modes.pyacl.variants import BUILD, MEASURED, WARMUP, Variant

LESSON = lesson_file("03_api_pyAcl", "infer.py")


def lesson_argv(
    model: Path,
    inputs: Path,
    output_npy: Path,
    *,
    device: int | None = None,
    out: Path | None = None,
    warmup: int = WARMUP,
    measured: int = MEASURED,
    extra: tuple[str, ...] = (),
) -> list[str]:
    """The lesson run on one variant's model (this interpreter): ``--om`` with ``device`` (the logical device it
    selects itself with acl.rt.set_device), else ``--onnx``; ``out``: where its profiler writes (acl.prof or ONNX
    Runtime), None on the NPU: no acl.prof (msprof wraps the program)."""
    argv = [sys.executable, str(LESSON)]
    argv += ["--om", str(model), "--device", str(device)] if device is not None else ["--onnx", str(model)]
    argv += [
        "--inputs",
        str(inputs),
        "--save-output",
        str(output_npy),
        "--warmup",
        str(warmup),
        "--measured",
        str(measured),
    ]
    argv += ["--out", str(out)] if out is not None else ["--no-acl-prof"]
    return [*argv, *extra]


def save_inputs(path: Path, feeds: list[np.ndarray]) -> Path:
    """The arrays the lesson feeds, in model-input order (arr_0, arr_1 ...)."""
    np.savez(path, *feeds)
    return path


def read_outputs(variant: Variant, model: Path, output_npy: Path, count: int) -> list[np.ndarray]:
    """Every output the lesson saved; floating-point ones must come back in the variant's IO dtype."""
    outputs = read_numbered_outputs(output_npy, count, "the lesson infer.py")
    for i, out in enumerate(outputs):
        if np.issubdtype(out.dtype, np.floating) and out.dtype != variant.numpy_io_dtype:
            raise LabError(
                f"{model} gives {out.dtype} at output {i}, variant {variant.name} expects {variant.io_dtype}",
                f"rebuild the model for this variant: {BUILD}",
            )
    return outputs


def run_step(argv: list[str], env_vars: dict[str, str], what: str) -> None:
    """Print and run one command of the npu path; a failure stops the run with one line."""
    print("$ " + " ".join(argv), flush=True)
    # own session: Ctrl-C / SIGTERM stop msprof and the worker together; stderr also kept in prof_out/logs/
    run = launcher.run_command(argv, env_vars, stderr_log=runlogs.stderr_log_beside(env_vars, argv))
    run.raise_if_stopped()
    if not run.ok:
        raise LabError(f"{what} {run.describe}", runlogs.where_to_look(env_vars))


def find_export(variant_dir: Path, name: str) -> Path:
    """The newest ``<name>_*.csv`` msprof exported under ``variant_dir``."""
    found = sorted(variant_dir.glob(f"PROF_*/{msprof_layout.OUTPUT_SUBDIR}/{name}_*.csv"))
    if not found:
        raise LabError(
            f"no {name}_*.csv under {variant_dir}/PROF_*/{msprof_layout.OUTPUT_SUBDIR}", "check msprof's messages"
        )
    return found[-1]


def measured_window_npu(tasks: list[Task], acl_prof: bool) -> tuple[list[Task], str, bool]:
    """acl.prof started after the warm-up; msprof saw everything, so cut the first WARMUP executes.

    A static om launches the same task list on every execute, so each execute is len/23 tasks.
    """
    if acl_prof:
        return tasks, f"acl.prof started after {WARMUP} warm-up executes; {MEASURED} recorded", True
    total = WARMUP + MEASURED
    if not tasks or len(tasks) % total:
        return tasks, f"{len(tasks)} tasks are not {total} equal executes; window not cut", False
    per_execute = len(tasks) // total
    ordered = sorted(tasks, key=lambda t: t.start_us)
    return ordered[WARMUP * per_execute :], f"{total} executes recorded x {per_execute} tasks; first {WARMUP} cut", True
