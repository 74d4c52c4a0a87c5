"""The npu backend's pyACL side: the worker program msprof starts, and what the driver does around it.

The worker is ``infer.py --worker <variant> --device <id> --om <file> --inputs <npz> --output-npy <file>
[--acl-prof <dir>] [--acl-config <json>]``: a separate process, because msprof profiles a program it starts
itself (``python -m common precision`` starts it too, with ``--acl-config`` for the ACL dump). It
feeds the arrays the driver saved (one per model input, in the variant's dtype), runs the chain of
``acl_chain.run_om`` (warm-up, then the measured executes) and saves every output for the
accuracy check. ``worker_argv`` builds that command and ``worker_main`` parses it, side by side,
so the two cannot drift apart.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from variants import BUILD, MEASURED, VARIANTS, WARMUP, Variant

from common.backend import parse_device_id
from common.collect import launcher, msprof_layout, runlogs
from common.errors import ArgumentParser, LabError
from common.formats.records import Task

LESSON = Path(__file__).resolve().with_name("infer.py")  # the worker is the lesson file run with --worker


def worker_argv(variant: Variant, om: Path, inputs: Path, output_npy: Path, device: int = 0) -> list[str]:
    """The pyACL program msprof runs for one variant (this interpreter, the lesson file, ``--worker``);
    ``device`` is the logical device it selects itself with acl.rt.set_device."""
    return [sys.executable, str(LESSON), "--worker", variant.name, "--device", str(device), "--om", str(om),
            "--inputs", str(inputs), "--output-npy", str(output_npy)]


def save_inputs(path: Path, feeds: list[np.ndarray]) -> Path:
    """The arrays the worker feeds, in model-input order (arr_0, arr_1 ...)."""
    np.savez(path, *feeds)
    return path


def output_paths(output_npy: Path, count: int) -> list[Path]:
    """Where the worker saves output i: output.npy, then output_1.npy, output_2.npy ..."""
    return [output_npy] + [output_npy.with_name(f"{output_npy.stem}_{i}.npy") for i in range(1, count)]


def worker_main(argv: list[str]) -> int:
    """The pyACL program msprof runs: one variant, warm-up + measured executes, every output saved to .npy."""
    parser = ArgumentParser(prog="infer.py --worker")
    parser.add_argument("variant", choices=list(VARIANTS))
    parser.add_argument("--device", default="0", help="logical device id (acl.rt.set_device)")
    parser.add_argument("--om", type=Path, required=True)
    parser.add_argument("--inputs", type=Path, required=True, help="npz of the arrays to feed, in input order")
    parser.add_argument("--output-npy", type=Path, required=True)
    parser.add_argument("--acl-prof", type=Path, default=None, help="collect in-process into this directory")
    parser.add_argument("--acl-config", type=Path, default=None,
                        help="JSON file for acl.init (a dump block): one execute, no warm-up")
    args = parser.parse_args(argv)
    variant = VARIANTS[args.variant]
    if not args.om.is_file():
        raise LabError(f"model file {args.om} not found", f"build it first: {BUILD}")
    device = parse_device_id(args.device)
    try:
        with np.load(args.inputs) as saved:
            feeds = [saved[f"arr_{i}"] for i in range(len(saved.files))]
    except (OSError, ValueError, KeyError) as err:
        raise LabError(f"{args.inputs}: cannot read the arrays to feed ({err})",
                       "re-run: bash 03_api_pyAcl/run.sh") from None
    try:
        import acl  # pyACL ships with CANN: set_env.sh puts it on PYTHONPATH
    except ImportError as err:
        raise LabError(f"pyACL (the acl module) is not importable: {err}",
                       "source CANN's set_env.sh (e.g. /usr/local/Ascend/ascend-toolkit/set_env.sh) first") from None
    from acl_chain import run_om

    # The worker selects the logical device itself (acl.rt.set_device inside run_om); msprof follows it.
    # A dump keeps every execute's tensors (ACL-DUMP-DATA: dump one inference only): one execute then.
    warmup, measured = (0, 1) if args.acl_config else (WARMUP, MEASURED)
    outputs = run_om(acl, args.om, device, feeds, warmup, measured,
                     prof_dir=args.acl_prof.resolve() if args.acl_prof else None,
                     acl_config=args.acl_config.resolve() if args.acl_config else None)
    for i, out in enumerate(outputs):  # floating-point outputs come back in the variant's IO dtype
        if np.issubdtype(out.dtype, np.floating) and out.dtype != variant.numpy_io_dtype:
            raise LabError(f"{args.om} gives {out.dtype} at output {i}, variant {variant.name} expects "
                           f"{variant.io_dtype}", f"rebuild the model for this variant: {BUILD}")
    for path, out in zip(output_paths(args.output_npy, len(outputs)), outputs):
        np.save(path, out)
    return 0


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
