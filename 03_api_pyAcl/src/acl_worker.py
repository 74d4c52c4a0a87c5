"""The npu backend's pyACL side: the worker program msprof starts, and what the driver does around it.

The worker is ``infer.py --worker <variant> --om <file> --output-npy <file> [--acl-prof <dir>]``:
a separate process, because msprof profiles a program it starts itself. It runs the chain of
``acl_chain.run_om`` (warm-up, then the measured executes) and saves the output for the
accuracy check. ``worker_argv`` builds that command and ``worker_main`` parses it, side by side,
so the two cannot drift apart.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from variants import MEASURED, VARIANTS, WARMUP, Variant, make_feed

from common.collect import launcher, msprof_layout
from common.errors import ArgumentParser, LabError
from common.formats.records import Task

LESSON = Path(__file__).resolve().with_name("infer.py")  # the worker is the lesson file run with --worker


def worker_argv(variant: Variant, output_npy: Path) -> list[str]:
    """The pyACL program msprof runs for one variant (this interpreter, the lesson file, ``--worker``)."""
    return [
        sys.executable,
        str(LESSON),
        "--worker",
        variant.name,
        "--om",
        str(variant.om_path()),
        "--output-npy",
        str(output_npy),
    ]


def worker_main(argv: list[str]) -> int:
    """The pyACL program msprof runs: one variant, warm-up + measured executes, output saved to .npy."""
    parser = ArgumentParser(prog="infer.py --worker")
    parser.add_argument("variant", choices=list(VARIANTS))
    parser.add_argument("--om", type=Path, required=True)
    parser.add_argument("--output-npy", type=Path, required=True)
    parser.add_argument("--acl-prof", type=Path, default=None, help="collect in-process into this directory")
    args = parser.parse_args(argv)
    variant = VARIANTS[args.variant]
    if not args.om.is_file():
        raise LabError(f"model file {args.om} not found", "build it first: bash 03_api_pyAcl/build_model.sh")
    import acl
    from acl_chain import run_om

    feed = make_feed(variant)
    # ASCEND_RT_VISIBLE_DEVICES (set by the driver) leaves one card visible: inside, it is device 0.
    output = run_om(
        acl,
        args.om,
        0,
        feed,
        variant.numpy_io_dtype,
        tuple(feed.shape),
        WARMUP,
        MEASURED,
        prof_dir=args.acl_prof.resolve() if args.acl_prof else None,
    )
    np.save(args.output_npy, output)
    return 0


def run_step(argv: list[str], env_vars: dict[str, str], what: str) -> None:
    """Print and run one command of the npu path; a failure stops the run with one line."""
    print("$ " + " ".join(argv), flush=True)
    run = launcher.run_command(argv, env_vars)  # own session: Ctrl-C / SIGTERM stop msprof and the worker together
    run.raise_if_stopped()
    if not run.ok:
        raise LabError(f"{what} {run.describe}", "read the messages above")


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
