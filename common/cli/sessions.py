"""What each nox session runs: ``python -m common.cli.sessions <session> [its arguments]``.

noxfile.py hands every session's arguments here unchanged, from the folder nox was started in
(a relative ``--workload`` is taken from there, as a user expects). This module knows which of
them each mode's scripts take and runs those scripts with them; the scripts validate the values
(the device id, the workload file, ``--threads``, ``--kernel``) as they do when a user runs them
directly. Its own options are ``--repeat N`` (a mode's run.sh N times, each prof_out/ kept as
``<mode>/prof_runs/<i>/`` for ``python -m common compare``) and, for ddp, the slow-rank demo.

The mode sessions share one vocabulary, since nox gives every session of an invocation the same
arguments: ``[device] [--repeat N] [--workload FILE] [--threads N] [--train] [--kernel cpp|pyasc]``.
``--train`` reaches only mode 04 and ``--kernel`` only mode 02; the other modes profile inference
and their own kernel-free workloads. When a mode's script fails before its run wrote run_info.json
for this nox run, the mode's output folder is replaced by a record of the failure (the script and
its last error line), so ``agree`` repeats that reason instead of reading an older run's output.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from common.errors import ArgumentParser, LabError, run_cli
from common.formats.rundir import RUN_ID_VAR, finish_run, lock_mode, prepare_output_dir, read_run_info, start_run
from common.modes import ROOT
from common.workload.loader import workload_file
from common.workload.requires import declared, environment_dir

MAX_REPEAT = 20


@dataclass(frozen=True)
class Step:
    """One script of a mode session and the options of the shared vocabulary it takes."""

    script: str  # relative to the repository root
    takes: tuple[str, ...]  # "device" (first positional), "--device" (a build's), "--workload", "--threads", ...

    @property
    def is_run(self) -> bool:
        return self.script.endswith("/run.sh")


MODE_STEPS: dict[str, tuple[Step, ...]] = {
    "cmdline": (Step("01_cmdline/run.sh", ("device", "--workload", "--threads")),),
    "ascendc": (
        Step("02_api_AscendC/build.sh", ("--device",)),
        Step("02_api_AscendC/run.sh", ("device", "--workload", "--kernel")),
    ),
    "pyacl": (
        Step("03_api_pyAcl/build_model.sh", ("--device", "--workload")),
        Step("03_api_pyAcl/run.sh", ("device", "--workload", "--threads")),
    ),
    "pytorch": (Step("04_pyTorch/run.sh", ("device", "--workload", "--threads", "--train")),),
}
DISTURBED_OFF = 0.25  # --repeat: a run whose op time per forward is this far from the runs' median is named

MODE_USAGE = "[device] [--repeat N] [--workload FILE] [--threads N] [--train] [--kernel cpp|pyasc]"


def mode_parser(session: str) -> ArgumentParser:
    """The mode sessions' shared vocabulary. Values are checked by the scripts that take them, not here."""
    parser = ArgumentParser(prog=f"nox -s {session} --", usage=f"nox -s {session} -- {MODE_USAGE}")
    parser.add_argument("device", nargs="?", help="NPU device id (default 0)")
    parser.add_argument("--repeat", default="1", help=f"run the mode N times, 1..{MAX_REPEAT} (default 1)")
    parser.add_argument("--workload", metavar="FILE", help="your workload file (docs/own_model.md)")
    parser.add_argument("--threads", metavar="N", help="portable backend: torch's intra-op threads")
    parser.add_argument("--train", action="store_true", help="mode 04 profiles training steps")
    parser.add_argument("--kernel", help="mode 02's kernel: cpp (default) or pyasc")
    return parser


def parse_repeat(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= MAX_REPEAT:
        raise LabError(f"--repeat takes 1..{MAX_REPEAT}, got {text!r}", "e.g. --repeat 3")
    return int(text)


def step_argv(step: Step, args: argparse.Namespace) -> list[str]:
    """The script's command line: the options of the vocabulary it takes, those that were given."""
    argv = ["bash", str(ROOT / step.script)]
    if "device" in step.takes:
        argv.append(args.device or "0")
    if "--device" in step.takes and args.device is not None:
        argv += ["--device", args.device]
    for option in ("--workload", "--threads", "--kernel"):
        value = getattr(args, option[2:])
        if option in step.takes and value is not None:
            argv += [option, value]
    if "--train" in step.takes and args.train:
        argv.append("--train")
    return argv


def run_step(argv: list[str]) -> tuple[int, str]:
    """Run one script, its output passed through as it comes; its exit code and its last error line."""
    last = ""
    with subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, errors="replace", bufsize=1) as child:
        for line in child.stderr:
            sys.stderr.write(line)
            sys.stderr.flush()
            if line.strip():
                last = line.strip()
    return child.returncode, last


def record_failure(session: str, mode_dir: Path, script: str, code: int, line: str) -> None:
    """The mode stopped at ``script`` before writing this nox run's run_info.json: its older output is replaced by
    a run_info.json of this run that says so (agree reads it). Nothing is touched while another run of the mode
    holds its lock, or when prof_out/ is a folder the lab did not make."""
    from common.backend import detect

    out, run_id = mode_dir / "prof_out", os.environ.get(RUN_ID_VAR)
    failure = f"{Path(script).name} exited {code}: {line.removeprefix('Error: ') or 'no error line'}"
    try:
        with lock_mode(mode_dir):
            info = read_run_info(out)
            if info is not None and run_id and info.get("run_id") == run_id:  # this run's own record: add the reason
                if not info.get("completed") and "failure" not in info:
                    finish_run(out, info, exit_code=info.get("exit_code") or code, completed=False, failure=failure)
                return
            out = prepare_output_dir(out)
            info = start_run(out, mode=session, backend=detect().name, device=None, command=[script], failure=failure)
            finish_run(out, info, exit_code=code, completed=False)
    except LabError:
        return


def workload_environment(workload: str | None) -> str | None:
    """The python of the environment of the workload file's REQUIRES (built when stale), made the PYTHON of every
    script this process starts (common/lab_python.sh honours it); None when the file declares none, or for TinyMLP:
    the lab's own environment runs it."""
    found = workload_file(workload)  # the file, else $MSPROF_LAB_WORKLOAD's
    if found is None:
        return None
    from common.collect import workload_env

    python = workload_env.ensure(found[0], capture=False)  # pip prints to the terminal as it works, as nox's does
    if python is None:
        return None
    print(f"workload environment: {python.parents[1]} (the REQUIRES of {found[0].name})", flush=True)
    os.environ["PYTHON"] = str(python)
    return str(python)


def run_mode(session: str, argv: Sequence[str]) -> int:
    """A mode session: its build step, if any, then its run.sh (``--repeat`` times), under the environment of the
    workload's REQUIRES when it declares them."""
    args = mode_parser(session).parse_args(list(argv))
    repeat = parse_repeat(args.repeat)
    workload_environment(args.workload)
    for step in MODE_STEPS[session]:
        mode_dir = ROOT / Path(step.script).parts[0]
        runs = prepare_output_dir(mode_dir / "prof_runs") if step.is_run and repeat > 1 else None
        for i in range(1, (repeat if step.is_run else 1) + 1):
            if runs:
                print(f"run {i} of {repeat}", flush=True)
            command = step_argv(step, args)
            code, line = run_step(command)
            if code != 0:
                record_failure(session, mode_dir, step.script, code, line)
                return code
            if runs:
                shutil.copytree(mode_dir / "prof_out", runs / str(i))
        if runs:
            print(repeat_summary(runs, repeat), flush=True)
    return 0


def repeat_summary(runs: Path, repeat: int) -> str:
    """After ``--repeat N``: each run's folder and its op time per forward (init excluded, as compare sums it),
    then their median and spread; a run far off the median is named as disturbed."""
    from common.analyze.families import op_family
    from common.analyze.robust import estimate
    from common.formats.run_ops import load_run

    lines, totals, per = [], [], "forward"
    for i in range(1, repeat + 1):
        run = load_run(runs / str(i))
        per = run.per
        total = sum(v for k, v in run.ops.items() if op_family(k[1]) != "init")
        totals.append(total)
        lines.append(f"run {i}: {runs / str(i)}: op time {total:,.1f} us per {run.per} (init excluded)")
    est = estimate(totals)
    off = [i + 1 for i, t in enumerate(totals) if est.median and abs(t - est.median) > DISTURBED_OFF * est.median]
    lines.append(
        f"{repeat} runs: op time per {per} {est.text(unit=' us')}, min {min(totals):,.1f}, max "
        f"{max(totals):,.1f} us"
        + (
            f"; disturbed: run {', '.join(map(str, off))} more than {100 * DISTURBED_OFF:.0f}% off the median"
            if off
            else ""
        )
    )
    lines.append(f"compare them with another set: python -m common compare {runs} <other prof_runs/>")
    return "\n".join(lines)


def check_workload(argv: Sequence[str]) -> int:
    """The ``workload`` session every mode session requires: the workload loaded and its model run once."""
    from common.cli.commands import main

    args = mode_parser("workload").parse_args(list(argv))
    command = ["workload", *([args.workload] if args.workload else []), *(["--train"] if args.train else [])]
    python = workload_environment(args.workload)  # built here, first, for the mode sessions after it
    if python is not None:
        return subprocess.run([python, "-m", "common", *command], check=False).returncode
    return main(command)


def run_agree(argv: Sequence[str]) -> int:
    """``nox -s agree``: ``python -m common agree``, under the environment of the workload's REQUIRES when the runs
    it compares profiled a file that declares them (agree imports the file for its reference and op counts)."""
    from common.cli.agree import default_dirs
    from common.cli.commands import command_parser, main

    known = command_parser().parse_args(["agree", *argv])  # agree's own options, its own one-line errors
    files = []
    for folder in known.dirs or default_dirs():
        try:
            files += [(read_run_info(Path(folder)) or {}).get("workload", {}).get("path")]
        except LabError:  # a damaged run_info.json: agree itself says so
            pass
    files = [Path(f) for f in files if f]
    if files and files[0].is_file():
        requirements = declared(files[0])
        python = environment_dir(requirements) / "bin" / "python" if requirements else None
        if python is not None and python.exists() and Path(sys.prefix).resolve() != python.parents[1].resolve():
            return subprocess.run([str(python), "-m", "common", "agree", *argv], check=False).returncode
    return main(["agree", *argv])


def run_ddp(argv: Sequence[str]) -> int:
    """``nox -s ddp``: the run on N ranks cross-checked with msprof-analyze, then, on more than one rank, the
    slow-rank demo (the last rank gets 4x the work; the view must name it)."""
    parser = ArgumentParser(prog="nox -s ddp --", add_help=False)
    parser.add_argument("--output", default=str(ROOT / "04_pyTorch" / "prof_out_ddp"))
    known, _ = parser.parse_known_args(list(argv))
    script = ["bash", str(ROOT / "04_pyTorch" / "run_ddp.sh")]
    code, _ = run_step([*script, *argv, "--cross-check"])
    if code != 0:
        return code
    world = int((read_run_info(Path(known.output)) or {}).get("world_size") or 1)  # the ranks it ran on
    if world < 2:
        return code
    return run_step(
        [
            *script,
            *argv,
            "--slow-rank",
            str(world - 1),
            "--cross-check",
            "--output",
            str(ROOT / "04_pyTorch" / "prof_out_ddp_slow"),
        ]
    )[0]


def run_ecosystem(argv: Sequence[str]) -> int:
    """``nox -s ecosystem``: without ``--candidate``, a fresh mode 04 run of the workload first (device 0), then
    msprof-analyze on it (common.cli.ecosystem, which validates its own options)."""
    parser = ArgumentParser(prog="nox -s ecosystem --", add_help=False)
    parser.add_argument("--workload")
    known, rest = parser.parse_known_args(list(argv))
    if not any(a == "--candidate" or a.startswith("--candidate=") for a in rest):
        workload = ["--workload", known.workload] if known.workload else []
        workload_environment(known.workload)
        code, _ = run_step(["bash", str(ROOT / "04_pyTorch" / "run.sh"), "0", *workload])
        if code != 0:
            return code
    elif known.workload:
        raise LabError(
            "--workload picks the model of a fresh mode 04 run, and --candidate names a finished one",
            "give one of them",
        )
    from common.cli.ecosystem import main

    return main(rest)


SESSIONS = {"workload": check_workload, "agree": run_agree, "ddp": run_ddp, "ecosystem": run_ecosystem}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or (argv[0] not in MODE_STEPS and argv[0] not in SESSIONS):
        raise LabError(
            f"no session {argv[0] if argv else ''!r}",
            f"name one of {', '.join([*MODE_STEPS, *SESSIONS])} (noxfile.py runs these)",
        )
    name, rest = argv[0], argv[1:]
    return run_mode(name, rest) if name in MODE_STEPS else SESSIONS[name](rest)


if __name__ == "__main__":
    run_cli(main)
