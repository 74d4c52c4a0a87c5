"""Mode 01 — profile an unchanged program from the command line (black box).

What you will do: run ``model.py`` — or any program of yours — under msprof without editing
a line of it, then read the files msprof exports.

What you will learn:
- msprof wraps a whole process: everything it runs, model set-up included, lands in the profile;
- which msprof switch fills which file (op_summary, op_statistic, api_statistic, task_time);
- how to check a profile before trusting it: op counts per forward and the output itself.

Usage: ``bash 01_cmdline/run.sh [device] [-- program args...]`` (default program: src/model.py).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from common.analyze import checks
from common.collect import launcher
from common.collect.npu_commands import msprof_argv
from common.backend import Backend, detect, parse_device_id, select_device
from common.errors import ArgumentParser, run_cli
from common.formats.datasets import find_datasets
from common.cli.reports import directory_report, write_report_md
from common.formats.rundir import finish_run, lock_mode, output_path, parse_timeout, prepare_output_dir, start_run
from common.workload import MEASURED_FORWARDS, WARMUP_FORWARDS, build_model, expected_op_counts

MODE_DIR = Path(__file__).resolve().parent.parent
MODEL = MODE_DIR / "src" / "model.py"
MSPROF_FILES = ["op_summary", "op_statistic", "api_statistic", "task_time", "msprof"]


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = ArgumentParser(prog="01_cmdline/run.sh", description=__doc__.splitlines()[0])
    parser.add_argument("device", nargs="?", default="0", help="NPU device id, 0..63 (default 0)")
    parser.add_argument("--output", help="output folder inside 01_cmdline/ (default 01_cmdline/prof_out)")
    parser.add_argument("--timeout", help="stop the program after this many seconds (default: $MSPROF_LAB_TIMEOUT_S, "
                        "else no limit); its profile is kept, marked incomplete")
    parser.epilog = "Anything after -- is the program to profile and its arguments (default: src/model.py)."
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    args.app = argv[split + 1:]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # --- workload: the program to profile, unchanged ---------------------------------------
    backend = detect()
    print(backend.banner(), flush=True)
    device = parse_device_id(args.device)
    timeout_s = parse_timeout(args.timeout)
    env = select_device(backend, device)  # ASCEND_RT_VISIBLE_DEVICES must be set before msprof starts
    out = output_path(MODE_DIR, args.output)
    own_model = not args.app
    if own_model:
        app = [sys.executable, str(MODEL), "--device", "npu" if backend.is_npu else "cpu",
               "--save-output", str(out / "output.npy")]
    else:
        app = launcher.resolve_app(args.app)

    # --- collect ---------------------------------------------------------------------------
    lock_mode(MODE_DIR)  # one run of this mode at a time: a second one stops here, before deleting anything
    out = prepare_output_dir(out)
    forwards = WARMUP_FORWARDS + MEASURED_FORWARDS if own_model else None
    command = collect_command(backend, out, app)
    info = start_run(out, mode="cmdline", backend=backend.name, device=device, command=command, forwards=forwards)
    print("running:", " ".join(command), flush=True)
    if backend.is_npu:
        run = launcher.run_command(command, env, timeout_s)  # msprof and the program stop together, as a group
    else:
        raw = out / "portable_raw"
        run = launcher.run_app(app, raw, env, timeout_s)
        profiles = launcher.load_raw(raw)
        launcher.write_msprof_layout(out, profiles)
        if not profiles:
            print("note: no process imported torch, so there was nothing to profile", file=sys.stderr)
    finish_run(out, info, exit_code=run.exit_code, completed=run.ok, app_status=run.status())
    if not run.ok:
        raise_for_app(run, out)

    # --- parse, check, report --------------------------------------------------------------
    datasets = find_datasets(out)
    verdicts = [checks.check_files(datasets, MSPROF_FILES, "01")]
    stats = checks.stats_of(datasets)
    if own_model:
        tasks = checks.tasks_of(datasets)
        verdicts += [
            checks.check_counts(tasks, forwards, expected_op_counts(build_model()), f"01, {forwards} forwards"),
            checks.check_top_family(stats, "matmul", "01"),
            checks.check_output_file(out / "output.npy", "01"),
        ]
    text, markdown = directory_report(out, verdicts)
    print(text)
    print(write_report_md(out, markdown))
    return 0 if all(v.ok for v in verdicts) else 1


def collect_command(backend: Backend, out: Path, app: list[str]) -> list[str]:
    """What runs: msprof wrapping the program (npu), or the program itself under the portable launcher."""
    if backend.is_npu:
        return msprof_argv(backend.tools["msprof"], out, app)
    return ["portable-launcher", *app]


def raise_for_app(run: launcher.AppRun, out: Path) -> None:
    """The program failed: keep what was collected, say so, and pass its status on."""
    if any(out.glob("PROF_*/mindstudio_profiler_output/op_summary_*.csv")):
        kept = f"its partial profile is kept in {out}"
    else:  # e.g. killed by SIGKILL/SIGSEGV before any process could write its profile
        kept = f"no profile could be saved; {out}"
    print(f"Error: the profiled program {run.describe}; {kept}, marked incomplete in run_info.json", file=sys.stderr)
    sys.exit(run.lab_exit_code)


if __name__ == "__main__":
    os.environ.setdefault("KINETO_LOG_LEVEL", "5")
    run_cli(main)
