"""``python -m common profile --out DIR -- program [args...]``: 01's black box for any program.

On an NPU, msprof wraps the program (``msprof --output=DIR <switches> program ...``, the switches of
:mod:`common.collect.npu_commands`). Elsewhere the portable launcher runs it with the start-up hook
that profiles every Python process importing torch, and writes msprof's file names and columns into
DIR, as 01 does for its own lesson. The program runs as an argv list, never through a shell; DIR is a
new folder (or one the lab made before). ``python -m common report DIR`` then reads it.
"""

from __future__ import annotations

import argparse
import os
import sys

from common.errors import LabError


def profile(args: argparse.Namespace) -> int:
    from common.backend import detect
    from common.collect import launcher, runlogs
    from common.collect.npu_commands import msprof_argv
    from common.formats.rundir import check_output_dir, prepare_output_dir

    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not program:
        raise LabError("no program to profile", "python -m common profile --out prof_mine -- python3 my_script.py")
    if args.timeout is not None and args.timeout <= 0:
        raise LabError(f"--timeout {args.timeout:g}: not a positive number of seconds", "e.g. --timeout 600")
    check_output_dir(args.out)  # before anything runs: a bad --out stops here
    app = launcher.resolve_app(program)
    backend = detect()
    out = prepare_output_dir(args.out)
    env = {"KINETO_LOG_LEVEL": "5", **os.environ}  # the hook's profiler quiet, unless asked otherwise
    log = runlogs.stderr_log(out, app)
    if backend.is_npu:
        command = msprof_argv(backend.tools["msprof"], out, app)
        print("running:", " ".join(command), flush=True)
        run = launcher.run_command(command, env, args.timeout, stderr_log=log)
        written = sorted(out.glob("PROF_*"))
    else:
        print(
            f"running (portable: torch.profiler in every Python process that imports torch): {' '.join(app)}",
            flush=True,
        )
        raw = out / "portable_raw"
        run = launcher.run_app(app, raw, env, args.timeout, stderr_log=log)
        profiles = launcher.load_raw(raw)
        written = [p.root for p in launcher.write_msprof_layout(out, profiles)]
        if not profiles:
            print(
                "note: no process imported torch, so there was nothing to profile (the portable black box sees "
                "torch's ops only; msprof on an NPU sees every task)",
                file=sys.stderr,
            )
    run.raise_if_stopped()
    print(f"profiled: {len(written)} process(es) -> {out}; the program's stderr is kept in {log}")
    if not run.ok:
        print(f"Error: the profiled program {run.describe}; what was collected is kept in {out}", file=sys.stderr)
        return run.lab_exit_code
    print(f"next: python -m common report {out}")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser(
        "profile",
        help="profile any program as a black box (msprof on an NPU, else the portable launcher), into a new folder",
    )
    p.add_argument("--out", required=True, help="a new folder for the profile (or one the lab made before)")
    p.add_argument("--timeout", type=float, help="stop the program after this many seconds (default: none)")
    p.add_argument("program", nargs=argparse.REMAINDER, help="-- then the program and its arguments")
    p.set_defaults(func=profile)
