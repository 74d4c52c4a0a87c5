"""Mode 01 — profile an unchanged program from the command line (black box).

The lab's side of the lesson ``01_cmdline/src/model.py``: it starts that program (told the
workload with ``--model``, its device, where to save its output) — or any program of yours —
under msprof on an NPU, under the portable launcher elsewhere, then reads what they wrote and
checks it: every exported file, op counts per forward, the declared top family, the output.

Usage: ``bash 01_cmdline/run.sh [device] [--workload FILE] [--threads N] [-- program args...]``
(default program: 01_cmdline/src/model.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

from common.analyze import grouping
from common.collect import launcher, runlogs
from common.collect.npu_commands import msprof_argv
from common.errors import LabError
from common.modes import lesson_file, mode_dir
from common.workload import WARMUP_FORWARDS

MODE_DIR = mode_dir("01_cmdline")
MODEL = lesson_file("01_cmdline", "model.py")  # the lesson: the program msprof wraps


# --- 1. profile ---------------------------------------------------------------------------------
def collect_command(backend, out: Path, app: list[str]) -> list[str]:
    """What runs: ``msprof --output=<out> <switches> <program>`` on the NPU (the switches and why are in
    common/collect/npu_commands.py), the program itself under the portable launcher elsewhere."""
    if backend.is_npu:
        return msprof_argv(backend.tools["msprof"], out, app)
    return ["portable-launcher", *app]


def profile(run, app: list[str], command: list[str]) -> launcher.AppRun:
    """Run the program to its end, profiled; msprof writes PROF_*/ itself, the portable launcher imitates it."""
    print("running:", " ".join(command), flush=True)
    if run.npu:
        # msprof and the program stop together; their stderr is also kept in prof_out/logs/ (runlogs.py)
        return launcher.run_command(
            command, run.child_env, run.timeout_s, stderr_log=runlogs.stderr_log(run.out, command)
        )
    raw = run.out / "portable_raw"
    result = launcher.run_app(app, raw, run.child_env, run.timeout_s, stderr_log=runlogs.stderr_log(run.out, app))
    profiles = launcher.load_raw(raw)
    launcher.write_msprof_layout(run.out, profiles)  # msprof's file names and columns, from torch.profiler
    if not profiles:
        print("note: no process imported torch, so there was nothing to profile", file=sys.stderr)
    return result


# --- 2. check · 3. read -------------------------------------------------------------------------
def check_run(run, own_model: bool, datasets: list) -> list:
    """Every file msprof exports is there and parses; for the workload: op counts, declared top family, output."""
    from common.analyze import checks
    from common.formats.datasets import file_rows, forward_windows, stats_of, tasks_of
    from common.formats.outputs import read_output

    verdicts = [
        checks.check_files(
            file_rows(datasets, ["op_summary", "op_statistic", "api_statistic", "task_time", "msprof"]), "01"
        )
    ]
    if own_model:  # the lesson model.py (a program of yours: the lab cannot know what it should contain)
        forwards, expected = run.info["forwards"], run.workload.expected(fp32=False)  # the model runs here, if at all
        # model.py names each forward with a range (msprof_tx): the tasks inside one range are one forward.
        windows, tasks = forward_windows(datasets), tasks_of(datasets)
        verdicts += [
            # msprof saw every forward the program ran (warm-up too): each holds what the first one holds.
            # Set-up (build_model, make_input) runs outside the ranges and is not compared.
            checks.check_same_records(
                grouping.records_in(tasks, windows), forwards, f"01, {forwards} forwards", warmup=WARMUP_FORWARDS
            ),
            # Which family dominates is a statement about the model: only the workload can declare it. Judged on
            # the measured forwards (the first calls of an op pay one-off costs that are not the model's).
            checks.check_declared_top_family(
                grouping.measured_forward_stats(tasks, windows, WARMUP_FORWARDS) or stats_of(datasets),
                expected,
                "01",
                grouping.measured_forward_groups(tasks, windows, WARMUP_FORWARDS),
            ),
            checks.check_output_file(read_output(run.out / "output.npy"), "01", expected, run.npu),
        ]
    return verdicts


# --- 4. interpret: the report (top ops, families, bounds) is printed by run.report -----------------
def stop_for_app(app_run: launcher.AppRun, out: Path) -> None:
    """The program failed: keep what was collected, say so, and pass its status on."""
    if any(out.glob("PROF_*/mindstudio_profiler_output/op_summary_*.csv")):
        kept = f"its partial profile is kept in {out}"
    else:  # e.g. killed by SIGKILL/SIGSEGV before any process could write its profile
        kept = f"no profile could be saved; {out}"
    print(
        f"Error: the profiled program {app_run.describe}; {kept}, marked incomplete in run_info.json", file=sys.stderr
    )
    sys.exit(app_run.lab_exit_code)


def main(argv: list[str] | None = None) -> int:
    from common.modes.lesson import Lesson
    from common.workload import MEASURED_FORWARDS

    lesson = Lesson("cmdline", MODE_DIR, __doc__, timeout=True)
    lesson.parser.epilog = "Anything after -- is the program to profile and its arguments (default: src/model.py)."
    argv = sys.argv[1:] if argv is None else argv
    split = argv.index("--") if "--" in argv else len(argv)
    args = lesson.parse(argv[:split])
    program = argv[split + 1 :]
    own_model = not program
    if program:  # a program of yours: found on PATH and run as an argv list, never through a shell
        if args.workload:
            raise LabError(
                "--workload chooses the model of the lab's own src/model.py, but a program was given",
                "drop --workload (your program runs as it is), or drop the program after --",
            )
        app = launcher.resolve_app(program)

    run = lesson.start(
        args=args,
        forwards=WARMUP_FORWARDS + MEASURED_FORWARDS if own_model else None,
        program=None if own_model else program,
    )
    if own_model:  # the lesson model.py, told the model, its logical device (it selects it itself), where to save
        app = [
            sys.executable,
            str(MODEL),
            "--device",
            f"npu:{run.device}" if run.npu else "cpu",
            *(["--model", run.workload.path] if run.workload.path else []),
            "--save-output",
            str(run.out / "output.npy"),
        ]
    command = collect_command(run.backend, run.out, app)
    run.record(command=command)
    app_run = profile(run, app, command)
    run.finish(completed=app_run.ok, exit_code=app_run.exit_code, app_status=app_run.status())
    if not app_run.ok:
        stop_for_app(app_run, run.out)
    datasets = run.datasets()  # read once, for the checks and the disturbance line
    disturbed = forward_disturbance(datasets) if own_model else None
    return run.report(check_run(run, own_model, datasets), warnings=[disturbed] if disturbed else [])


def forward_disturbance(datasets: list) -> str | None:
    """A 'disturbed' line when the measured forwards' op times vary widely: they run the same ops on the same
    input, so the spread is the machine's (another program, a stall), and the figures of this run say less."""
    from common.collect.calibrate import step_disturbance
    from common.formats.datasets import forward_windows, tasks_of
    from common.workload import MEASURED_FORWARDS

    groups = grouping.measured_forward_groups(tasks_of(datasets), forward_windows(datasets), WARMUP_FORWARDS)
    return step_disturbance(
        [sum(t.duration_us for t in g) for g in groups], f"the {MEASURED_FORWARDS} measured forwards' op times"
    )


if __name__ == "__main__":
    from common.modes.lesson import main_of

    main_of(main)
