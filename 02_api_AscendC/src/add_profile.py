"""Mode 02: profile a hand-written AscendC kernel (fp16 vector Add) and name the pipe it is bound by.

What you will do:
  - build ``add_kernel.cpp`` for the NPU (CANN's ``ascendc_library``) or, without CANN, against
    the portable twin of the AscendC API (``build.sh`` -> ``python add_profile.py build``);
  - run it 20 times after a warm-up, verify all 8192 output elements of every launch, and collect
    op_summary / op_statistic with the PipeUtilization metrics (``run.sh`` -> ``... run``).

What you will learn:
  - how CopyIn -> Compute -> CopyOut maps onto the MTE2, vector (V) and MTE3 pipes, and what the
    scalar unit does between them;
  - how to read ``aiv_vec_ratio`` / ``aiv_scalar_ratio`` / ``aiv_mte2_ratio`` / ``aiv_mte3_ratio``
    and decide which pipe bounds a kernel;
  - what a CPU twin can check (API misuse, correctness, relative cost on the host) and what only
    the NPU's PMU can tell you.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import os
import re
import shutil
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from common.backend import Backend, detect, find_cann_home, parse_device_id, select_device, soc_version
from common.analyze.checks import Verdict
from common.collect import launcher
from common.collect.msprof_layout import new_prof_dir
from common.collect.npu_commands import msprof_argv, msprof_op_argv
from common.errors import ArgumentParser, LabError, run_cli
from common.formats import readers, writers
from common.formats.records import Task
from common.formats.table import read_table
from common.render.text import render_table, render_verdicts
from common.formats.rundir import MARKER, finish_run, lock_mode, parse_timeout, prepare_output_dir, start_run

MODE = "ascendc"  # as in run_info.json and the nox session
MODE_DIR = Path(__file__).resolve().parent.parent
SRC_DIR = MODE_DIR / "src"
BUILD_DIR = MODE_DIR / "build"
BINARY_NAME = "add_custom_main"
BUILD_INFO = "lab_build.json"
PROF_OUT = MODE_DIR / "prof_out"

# --- workload: what add_kernel.cpp computes and how often we launch it ---------------------------
KERNEL = "add_custom"
TOTAL_ELEMENTS = 8192  # TOTAL_LENGTH in add_kernel.cpp
BLOCK_DIM = 8  # USE_CORE_NUM in add_kernel.cpp
WARMUP_LAUNCHES = 3  # first launches pay for page faults, thread start-up, instruction cache misses
MEASURED_LAUNCHES = 20

RUN_MODES = ("portable", "npu", "cpu")
RUN_MODE_VAR = "RUN_MODE"  # build.sh override: RUN_MODE=portable|npu|cpu

# The four AI Vector pipes PipeUtilization reports, in op_summary's column names.
PIPES = ("vec", "scalar", "mte2", "mte3")
PIPE_ROLE = {
    "vec": "vector compute (Add)",
    "scalar": "scalar: loop, addresses, queue sync, instruction issue",
    "mte2": "GM -> UB copy (CopyIn)",
    "mte3": "UB -> GM copy (CopyOut)",
}

# Reference figures from elsewhere: the original msprof demo on an Atlas 910B3 (not measured here).
REFERENCE_910B3 = {"vec": 0.04, "scalar": 0.65, "mte2": 0.33, "mte3": None}

# Twin: the pipes run one after another on one thread and scalar is the remainder of the block's
# time, so the four ratios sum to 1 up to the 3-decimal rounding of the written cells
# (4 x 0.0005 = 0.002); 0.01 leaves room for that and nothing else.
RATIO_SUM_TOLERANCE_PORTABLE = 0.01
# NPU: the pipes are separate units that overlap (that is what the double buffer is for), so the
# sum exceeds 1 when they overlap and drops below 1 when the core waits. Below 0.5 most cycles are
# unaccounted (wrong metric set); above 2.5 more than two pipes are busy all the time, which a
# copy-add-copy kernel cannot do.
RATIO_SUM_RANGE_NPU = (0.5, 2.5)


# === build ========================================================================================
def choose_run_mode(backend: Backend, override: str | None) -> tuple[str, str]:
    """RUN_MODE for CMake and why: the override if given, else npu with an NPU, portable otherwise."""
    if override:
        mode = override.strip().lower()
        if mode not in RUN_MODES:
            raise LabError(f"{RUN_MODE_VAR}={override!r} is not one of {', '.join(RUN_MODES)}", "unset it or pick one")
        return mode, f"set by {RUN_MODE_VAR}={mode}"
    if backend.is_npu:
        return "npu", "CANN and an NPU found"
    return "portable", "no NPU toolchain: the portable twin of the AscendC API"


def cmake_configure_argv(
    cmake: str, source: Path, build: Path, run_mode: str, *, cxx: str | None = None,
    soc_version: str | None = None, cann_home: str | None = None,
) -> list[str]:
    """``cmake -S src -B build -DRUN_MODE=...``; npu/cpu also need the SoC and the CANN root."""
    if run_mode not in RUN_MODES:
        raise ValueError(f"unknown RUN_MODE {run_mode!r}")
    argv = [cmake, "-S", str(source), "-B", str(build), f"-DRUN_MODE={run_mode}", "-DCMAKE_BUILD_TYPE=Release"]
    if run_mode != "portable":
        if not soc_version or not cann_home:
            raise ValueError(f"RUN_MODE={run_mode} needs soc_version and cann_home")
        argv += [f"-DSOC_VERSION={soc_version}", f"-DASCEND_CANN_PACKAGE_PATH={cann_home}"]
    if cxx:
        argv.append(f"-DCMAKE_CXX_COMPILER={cxx}")
    return argv


def cmake_build_argv(cmake: str, build: Path, jobs: int) -> list[str]:
    return [cmake, "--build", str(build), "--parallel", str(max(1, jobs))]


def find_cmake() -> str:
    cmake = shutil.which("cmake")
    if not cmake:
        raise LabError(
            "CMake not found on PATH",
            "install CMake 3.16 or newer: `sudo apt-get install cmake` or `python3 -m pip install cmake`",
        )
    return cmake


def find_cxx() -> str:
    """The host C++ compiler for the twin: $CXX, else c++ / g++ / clang++ on PATH."""
    for name in filter(None, (os.environ.get("CXX"), "c++", "g++", "clang++")):
        found = shutil.which(name)
        if found:
            return found
    raise LabError(
        "no C++ compiler found ($CXX, c++, g++, clang++)",
        "install one with C++20 support: `sudo apt-get install g++` (GCC 10+) or clang 14+",
    )


def cmake_step(argv: list[str]) -> bool:
    """One CMake command; Ctrl-C stops it and its compilers, not just cmake."""
    run = launcher.run_command(argv)
    run.raise_if_stopped()
    return run.ok


def build(build_dir: Path = BUILD_DIR) -> int:
    backend = detect()
    print(backend.banner())
    lock_mode(MODE_DIR)  # never build while a run (or another build) uses build/
    run_mode, why = choose_run_mode(backend, os.environ.get(RUN_MODE_VAR))
    print(f"RUN_MODE={run_mode} ({why})")
    cmake = find_cmake()
    soc = cann_home = cxx = None
    if run_mode == "portable":
        cxx = find_cxx()
    else:
        cann_home = backend.cann_home or find_cann_home()
        if not cann_home:
            raise LabError(f"RUN_MODE={run_mode} needs CANN", "source <cann>/set_env.sh, or use RUN_MODE=portable")
        soc = soc_version(backend)

    info_file = build_dir / BUILD_INFO
    stale = info_file.is_file() and json.loads(info_file.read_text()).get("run_mode") != run_mode
    if stale or not build_dir.exists():
        # Fresh, or a cache configured for another RUN_MODE (it would keep its old compiler and flags):
        # recreated, and only if the lab made it (its marker).
        prepare_output_dir(build_dir)
    configure = cmake_configure_argv(cmake, SRC_DIR, build_dir, run_mode, cxx=cxx, soc_version=soc, cann_home=cann_home)
    print("$ " + " ".join(configure))
    ok = cmake_step(configure)
    if ok:
        make = cmake_build_argv(cmake, build_dir, os.cpu_count() or 1)
        print("$ " + " ".join(make))
        ok = cmake_step(make)
    binary = build_dir / BINARY_NAME
    ok = ok and binary.is_file()
    if ok:
        info = {
            "run_mode": run_mode, "soc_version": soc, "cann_home": cann_home, "cxx": cxx,
            "built_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "binary": str(binary),
        }
        info_file.write_text(json.dumps(info, indent=2) + "\n")
        (build_dir / MARKER).write_text("created by msprof lab; safe for the lab to delete and recreate\n")
    detail = f"{binary} (RUN_MODE={run_mode})" if ok else "cmake failed; see the messages above"
    print(render_verdicts([Verdict("build succeeds", ok, detail)]))
    return 0 if ok else 1


def read_build_info(build_dir: Path = BUILD_DIR) -> dict:
    info_file, binary = build_dir / BUILD_INFO, build_dir / BINARY_NAME
    if not info_file.is_file() or not binary.is_file():
        raise LabError(f"{binary} has not been built", "run `bash 02_api_AscendC/build.sh` first")
    return json.loads(info_file.read_text())


# === collect (portable): run the twin, turn its timers into op_summary rows ========================
@dataclass
class LaunchPipes:
    """One launch on the twin: wall time and the per-block mean time of each pipe (µs)."""

    start_us: float
    duration_us: float
    aiv_time_us: float
    pipe_us: dict[str, float]  # vec, scalar, mte2, mte3


def parse_twin_timings(path: Path) -> list[LaunchPipes]:
    """The twin's per-block timer CSV -> one LaunchPipes per launch.

    aiv_time is the mean block time (op_summary's aiv_time is a per-core figure too); scalar is
    what is left of a block's time outside the three timed pipes.
    """
    blocks: dict[int, list[dict[str, str]]] = {}
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            blocks.setdefault(int(row["launch"]), []).append(row)
    launches = []
    for _, rows in sorted(blocks.items()):
        def mean_us(key: str) -> float:
            return statistics.fmean(int(r[key]) for r in rows) / 1000.0

        aiv, vec, mte2, mte3 = mean_us("kernel_ns"), mean_us("vec_ns"), mean_us("mte2_ns"), mean_us("mte3_ns")
        launches.append(
            LaunchPipes(
                start_us=int(rows[0]["start_unix_ns"]) / 1000.0,
                duration_us=int(rows[0]["wall_ns"]) / 1000.0,
                aiv_time_us=aiv,
                pipe_us={"vec": vec, "scalar": aiv - vec - mte2 - mte3, "mte2": mte2, "mte3": mte3},
            )
        )
    return launches


def twin_tasks(launches: list[LaunchPipes]) -> list[Task]:
    """op_summary rows: measured aiv_* columns, every other PMU column N/A, Task Type CPU."""
    tasks = []
    for launch in launches:
        pmu: dict[str, float | None] = {"aiv_time(us)": launch.aiv_time_us}
        for pipe in PIPES:
            t = launch.pipe_us[pipe]
            pmu[f"aiv_{pipe}_time(us)"] = t
            pmu[f"aiv_{pipe}_ratio"] = t / launch.aiv_time_us if launch.aiv_time_us else None
        tasks.append(
            Task(
                op_name=KERNEL, op_type=KERNEL, task_type="CPU", start_us=launch.start_us,
                duration_us=launch.duration_us, device_id="host", block_dim=BLOCK_DIM,
                input_shapes=f"{TOTAL_ELEMENTS};{TOTAL_ELEMENTS}", input_dtypes="DT_FLOAT16;DT_FLOAT16",
                output_shapes=f"{TOTAL_ELEMENTS}", output_dtypes="DT_FLOAT16", pmu=pmu,
            )
        )
    return writers.with_wait_times(tasks)


def write_portable_profile(out_dir: Path, tasks: list[Task]) -> tuple[Path, Path]:
    """PROF_*/mindstudio_profiler_output/{op_summary,op_statistic}_<ts>.csv, as msprof lays them out."""
    prof = new_prof_dir(out_dir)
    summary = writers.write_op_summary(prof.file("op_summary"), tasks)
    statistic = writers.write_op_statistic(prof.file("op_statistic"), writers.aggregate_op_statistic(tasks))
    return summary, statistic


VERIFIED_RE = re.compile(r"verified: (\d+) of (\d+) elements")


def run_binary(
    argv: list[str], child_env: dict[str, str] | None = None, timeout_s: float | None = None
) -> tuple[int, str]:
    """Run the host program; its output is shown as it is (verification lines included)."""
    run = launcher.run_command(argv, child_env, timeout_s, capture=True)
    sys.stdout.write(run.output)
    if not run.ok:
        print(f"{Path(argv[0]).name} {run.describe}", file=sys.stderr)
    run.raise_if_stopped()  # Ctrl-C / SIGTERM: the program is stopped, the run ends here, marked incomplete
    return run.lab_exit_code, run.output


def verification_verdict(returncode: int, stdout: str) -> Verdict:
    match = VERIFIED_RE.search(stdout)
    if returncode == 0 and match and int(match.group(1)) == int(match.group(2)) == TOTAL_ELEMENTS:
        return Verdict(f"all {TOTAL_ELEMENTS} elements verified", True,
                       f"{match.group(1)} of {match.group(2)} equal fp16 2.0 (0x4000) in every launch")
    why = f"the program exited {returncode}" + ("" if match else " without its 'verified:' line")
    return Verdict(f"all {TOTAL_ELEMENTS} elements verified", False, f"{why}; see the mismatches printed above")


# === parse + check ================================================================================
def kernel_tasks(tasks: list[Task]) -> list[Task]:
    return [t for t in tasks if KERNEL in t.op_type or KERNEL in t.op_name]


def mean_ratios(tasks: list[Task]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for pipe in PIPES:
        values = [v for t in tasks if (v := t.pmu.get(f"aiv_{pipe}_ratio")) is not None]
        out[pipe] = statistics.fmean(values) if values else None
    return out


def mean_times(tasks: list[Task]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for column in ["aiv_time(us)"] + [f"aiv_{p}_time(us)" for p in PIPES]:
        values = [v for t in tasks if (v := t.pmu.get(column)) is not None]
        out[column] = statistics.fmean(values) if values else None
    return out


def bound_pipe(ratios: dict[str, float | None]) -> tuple[str, float] | None:
    """The pipe with the largest busy ratio: the one to make cheaper first."""
    known = {p: r for p, r in ratios.items() if r is not None}
    if not known:
        return None
    pipe = max(known, key=known.get)
    return pipe, known[pipe]


def check_launch_count(tasks: list[Task], where: str) -> Verdict:
    return Verdict(
        f"{MEASURED_LAUNCHES} measured launches ({where})", len(tasks) == MEASURED_LAUNCHES,
        f"{len(tasks)} {KERNEL} rows after {WARMUP_LAUNCHES} warm-up launches (want {MEASURED_LAUNCHES})",
    )


def check_ratio_sums(tasks: list[Task], backend_name: str) -> Verdict:
    """Every launch's four ratios are in [0, 1] and sum to ~1 (twin) or lie in a plausible range (NPU)."""
    sums, out_of_range = [], 0
    for t in tasks:
        ratios = [t.pmu.get(f"aiv_{p}_ratio") for p in PIPES]
        if any(r is None for r in ratios):
            return Verdict("pipe ratios sum to ~1", False, f"a row lacks one of aiv_{{{','.join(PIPES)}}}_ratio")
        out_of_range += sum(1 for r in ratios if not 0.0 <= r <= 1.0)
        sums.append(sum(ratios))
    if not sums:
        return Verdict("pipe ratios sum to ~1", False, "no rows to check")
    lo, hi = min(sums), max(sums)
    if backend_name == "portable":
        ok = out_of_range == 0 and max(abs(s - 1.0) for s in sums) <= RATIO_SUM_TOLERANCE_PORTABLE
        rule = f"|sum - 1| <= {RATIO_SUM_TOLERANCE_PORTABLE} (twin: pipes serial, scalar = remainder)"
    else:
        ok = out_of_range == 0 and RATIO_SUM_RANGE_NPU[0] <= lo and hi <= RATIO_SUM_RANGE_NPU[1]
        rule = f"sum in [{RATIO_SUM_RANGE_NPU[0]}, {RATIO_SUM_RANGE_NPU[1]}] (NPU: pipes overlap)"
    return Verdict(
        "pipe ratios sum to ~1", ok,
        f"vec+scalar+mte2+mte3 per launch in [{lo:.3f}, {hi:.3f}] over {len(sums)} launches, "
        f"{out_of_range} ratios outside [0, 1]; rule {rule}",
    )


def check_bound(ratios: dict[str, float | None]) -> Verdict:
    found = bound_pipe(ratios)
    if not found:
        return Verdict("bound pipe stated", False, "no aiv_*_ratio values to decide from")
    pipe, value = found
    others = ", ".join(f"{p} {ratios[p]:.3f}" for p in PIPES if p != pipe and ratios[p] is not None)
    return Verdict("bound pipe stated", True, f"{pipe} {value:.3f} ({PIPE_ROLE[pipe]}); {others}")


# === what it means ================================================================================
def render_report(tasks: list[Task], backend_name: str, where: str) -> str:
    ratios, times = mean_ratios(tasks), mean_times(tasks)
    durations = [t.duration_us for t in tasks]
    lines = [
        f"--- {KERNEL}: {len(tasks)} launches x {BLOCK_DIM} blocks x {TOTAL_ELEMENTS // BLOCK_DIM} fp16 elements "
        f"({backend_name}; from {where}) ---",
    ]
    if durations:
        lines.append(
            f"Task Duration(us): mean {statistics.fmean(durations):.1f}, "
            f"min {min(durations):.1f}, max {max(durations):.1f}"
            + (f"; aiv_time(us) per block: mean {times['aiv_time(us)']:.2f}" if times["aiv_time(us)"] else "")
        )
    label = "this run (portable twin, host CPU)" if backend_name == "portable" else "this run (NPU PMU)"
    rows = []
    for pipe in PIPES:
        ref = REFERENCE_910B3[pipe]
        rows.append([
            pipe, PIPE_ROLE[pipe], times[f"aiv_{pipe}_time(us)"], ratios[pipe],
            "-" if ref is None else f"~{ref:.2f}",
        ])
    lines.append(render_table(["pipe", "what runs there", "time(us)", f"ratio: {label}",
                               "ratio: 910B3 reference (from elsewhere)"], rows))
    found = bound_pipe(ratios)
    ref_pipe = max((p for p in PIPES if REFERENCE_910B3[p] is not None), key=lambda p: REFERENCE_910B3[p])
    if found:
        pipe, value = found
        lines.append(
            f"Bound pipe: {pipe} ({value:.3f} of the block's time: {PIPE_ROLE[pipe]}). "
            f"The 910B3 reference is bound by {ref_pipe} (~{REFERENCE_910B3[ref_pipe]:.2f})."
        )
    if backend_name == "portable":
        lines.append(
            "Reading it: on the twin every pipe is host code on one thread, so the ratios rank host costs "
            "(software fp16 makes vec expensive; memcpy makes MTE2/MTE3 cheap). They check the kernel's "
            "structure and correctness, not NPU cycles: only msprof on an NPU gives PMU data."
        )
    else:
        lines.append(
            "Reading it: a high scalar ratio with a tiny vec ratio means the tiles are too small for the "
            "vector unit to matter; larger tiles (fewer loop trips, fewer queue syncs) shift time to MTE2."
        )
    return "\n".join(lines)


# === npu ==========================================================================================
def read_msprof_op_pipes(out_dir: Path) -> dict[str, float | None] | None:
    """Mean aiv_*_ratio over the vector blocks of msprof op's PipeUtilization*.csv, if one was written."""
    files = sorted(out_dir.glob("OPPROF_*/**/PipeUtilization*.csv"))
    if not files:
        return None
    table = read_table(files[0], ["sub_block_id"], "msprof op (OPPROF_*)")
    rows = [r for r in range(len(table)) if (table.text(r, "sub_block_id") or "").startswith("vector")]
    out: dict[str, float | None] = {}
    for pipe in PIPES:
        values = [v for r in rows if (v := table.number(r, f"aiv_{pipe}_ratio")) is not None]
        out[pipe] = statistics.fmean(values) if values else None
    return out


def run_npu(
    backend: Backend, device: int, out_dir: Path, binary: Path, timeout_s: float | None = None
) -> tuple[list[Verdict], list[Task], str]:
    child_env = select_device(backend, device)  # ASCEND_RT_VISIBLE_DEVICES: msprof and the app see one card
    # Inside the child the chosen card is logical device 0.
    app = [str(binary), "--device", "0", "--warmup", str(WARMUP_LAUNCHES), "--launches", str(MEASURED_LAUNCHES)]
    verdicts = []
    argv = msprof_argv(backend.tools["msprof"], out_dir, app)
    print("$ " + " ".join(argv))
    code, stdout = run_binary(argv, child_env, timeout_s)
    verdicts.append(verification_verdict(code, stdout))
    summaries = sorted(out_dir.glob("PROF_*/mindstudio_profiler_output/op_summary_*.csv"))
    if not summaries:
        raise LabError(
            f"msprof wrote no op_summary_*.csv under {out_dir}", "check msprof's log in PROF_*/mindstudio_profiler_log"
        )
    rows = sorted(kernel_tasks(readers.read_op_summary(summaries[-1])), key=lambda t: t.start_us)
    measured = rows[WARMUP_LAUNCHES:]
    where = summaries[-1].name

    # msprof op: per-block PMU for the MetricsProfStart/Stop region of one launch.
    op_argv = msprof_op_argv(backend.tools["msprof"], out_dir, app, kernel_name=KERNEL, launch_count=1)
    print("$ " + " ".join(op_argv))
    code, _ = run_binary(op_argv, child_env, timeout_s)
    op_pipes = read_msprof_op_pipes(out_dir)
    verdicts.append(Verdict("msprof op wrote PipeUtilization", code == 0 and op_pipes is not None,
                            "OPPROF_*/PipeUtilization.csv " + ("read" if op_pipes else "missing")
                            + (": " + ", ".join(f"{p} {v:.3f}" for p, v in op_pipes.items() if v is not None)
                               if op_pipes else "")))
    return verdicts, measured, where


# === main =========================================================================================
def run(device_text: str, timeout_text: str | None = None) -> int:
    backend = detect()
    print(backend.banner())
    device = parse_device_id(device_text)
    timeout_s = parse_timeout(timeout_text)
    lock_mode(MODE_DIR)  # one run of this mode at a time: a second one stops here, before deleting anything
    build_info = read_build_info()
    run_mode = build_info["run_mode"]
    if run_mode == "npu" and not backend.is_npu:
        raise LabError("the build is RUN_MODE=npu but this machine has no NPU backend",
                       "rebuild: `bash 02_api_AscendC/build.sh` (it picks the portable twin here)")
    if run_mode != "npu" and backend.is_npu:
        print(f"note: build/ is RUN_MODE={run_mode}; running that build, not the NPU "
              "(rebuild without RUN_MODE for npu)")
    data_backend = "npu" if run_mode == "npu" else "portable"
    binary = BUILD_DIR / BINARY_NAME

    out_dir = prepare_output_dir(PROF_OUT)
    info = start_run(out_dir, mode=MODE, backend=data_backend, device=device, command=sys.argv, run_mode=run_mode,
                     warmup_launches=WARMUP_LAUNCHES, measured_launches=MEASURED_LAUNCHES)
    verdicts = [Verdict("build succeeds", True, f"{binary.name} built {build_info['built_at']} (RUN_MODE={run_mode})")]
    tasks: list[Task] = []
    where = ""
    try:
        if run_mode == "npu":
            more, tasks, where = run_npu(backend, device, out_dir, binary, timeout_s)
            verdicts += more
        else:
            timings = out_dir / "twin_timings.csv"
            app = [str(binary), "--warmup", str(WARMUP_LAUNCHES), "--launches", str(MEASURED_LAUNCHES)]
            if run_mode == "portable":
                app += ["--timings", str(timings)]
            print("$ " + " ".join(app))
            code, stdout = run_binary(app, timeout_s=timeout_s)
            verdicts.append(verification_verdict(code, stdout))
            if run_mode == "cpu":
                print("cpu (tikicpulib) build: correctness only; CANN's CPU debug has no pipe timers. "
                      "Use the portable twin or an NPU for the profile.")
            elif code == 0:
                summary, _ = write_portable_profile(out_dir, twin_tasks(parse_twin_timings(timings)))
                tasks = kernel_tasks(readers.read_op_summary(summary))  # check what was written, not what we meant
                where = summary.name
        if run_mode != "cpu":
            verdicts.append(check_launch_count(tasks, where or "no op_summary"))
            verdicts.append(check_ratio_sums(tasks, data_backend))
            verdicts.append(check_bound(mean_ratios(tasks)))
            if tasks:
                print(render_report(tasks, data_backend, where))
    finally:
        passed = all(v.ok for v in verdicts)
        finish_run(out_dir, info, exit_code=0 if passed else 1, completed=passed)
    print(render_verdicts(verdicts))
    print(f"outputs: {out_dir}")
    return 0 if passed else 1


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=ArgumentParser)
    sub.add_parser("build", help="configure and build with CMake (RUN_MODE from the backend or $RUN_MODE)")
    run_parser = sub.add_parser("run", help="run, verify, profile and report")
    run_parser.add_argument("--device", default="0", help="NPU id (0..63); ignored by the portable twin")
    run_parser.add_argument("--timeout", help="stop the host program after this many seconds "
                            "(default: $MSPROF_LAB_TIMEOUT_S, else no limit)")
    args = parser.parse_args(argv)
    if args.command == "build":
        return build()
    return run(args.device, args.timeout)


if __name__ == "__main__":
    run_cli(main)
