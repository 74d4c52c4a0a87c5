"""Build add_custom with CMake: the kernel for the NPU (CANN's ascendc_library) or the portable twin.

``build.sh`` runs ``python -m common.modes.ascendc build``, which calls :func:`build` on the lesson's
CMake project (``02_api_AscendC/src``); the portable build gets the CPU stand-in headers (``twin/``)
through the cache variable ``ASCENDC_TWIN_DIR``, as the npu build gets CANN's. RUN_MODE comes from the
machine (npu with CANN and an NPU, portable otherwise) unless ``$RUN_MODE`` says otherwise; the
npu build is for the SoC of the logical device given (``build.sh --device N``, default 0) or
``$SOC_VERSION``. The build folder records what it was built for in ``lab_build.json``, which
``run.sh`` reads back.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from pathlib import Path

from common.backend import Backend, detect, find_cann_home, is_atlas_a2_a3, soc_version
from common.collect import launcher
from common.errors import LabError
from common.formats.rundir import MARKER, lock_mode, prepare_output_dir
from common.modes.ascendc import MODE_DIR, SRC_DIR, TWIN_DIR
from common.analyze import checks
from common.render.text import render_verdicts

BUILD_DIR = MODE_DIR / "build"
BINARY_NAME = "add_custom_main"
BUILD_INFO = "lab_build.json"

RUN_MODES = ("portable", "npu")
RUN_MODE_VAR = "RUN_MODE"  # build.sh override: RUN_MODE=portable|npu


def choose_run_mode(backend: Backend, override: str | None) -> tuple[str, str]:
    """RUN_MODE for CMake and why: the override if given, else npu with an NPU, portable otherwise."""
    if override:
        mode = override.strip().lower()
        if mode == "cpu":  # CANN's CPU debug route (tikicpulib, ICPU_RUN_KF) is a separate build the lab does not offer
            raise LabError(
                f"{RUN_MODE_VAR}=cpu is not offered: ascendc_library builds device code only",
                "use RUN_MODE=portable (the twin, on any CPU) or npu; see 02_api_AscendC/README.md",
            )
        if mode not in RUN_MODES:
            raise LabError(f"{RUN_MODE_VAR}={override!r} is not one of {', '.join(RUN_MODES)}", "unset it or pick one")
        return mode, f"set by {RUN_MODE_VAR}={mode}"
    if backend.is_npu:
        return "npu", "CANN and an NPU found"
    return "portable", "no NPU toolchain: the portable twin of the AscendC API"


def cmake_configure_argv(
    cmake: str,
    source: Path,
    build: Path,
    run_mode: str,
    *,
    cxx: str | None = None,
    soc_version: str | None = None,
    cann_home: str | None = None,
    twin_dir: Path = TWIN_DIR,
) -> list[str]:
    """``cmake -S src -B build -DRUN_MODE=...``; portable names the stand-in headers (``twin_dir``); npu needs
    the SoC and the CANN root, and compiles the kernel's MetricsProfStart/Stop region only for an Atlas A2/A3
    SoC (the only ones that have it)."""
    if run_mode not in RUN_MODES:
        raise ValueError(f"unknown RUN_MODE {run_mode!r}")
    argv = [cmake, "-S", str(source), "-B", str(build), f"-DRUN_MODE={run_mode}", "-DCMAKE_BUILD_TYPE=Release"]
    if run_mode == "portable":
        argv.append(f"-DASCENDC_TWIN_DIR={twin_dir}")
    else:
        if not soc_version or not cann_home:
            raise ValueError(f"RUN_MODE={run_mode} needs soc_version and cann_home")
        argv += [
            f"-DSOC_VERSION={soc_version}",
            f"-DASCEND_CANN_PACKAGE_PATH={cann_home}",
            f"-DLAB_METRICS_PROF_REGION={'ON' if is_atlas_a2_a3(soc_version) else 'OFF'}",
        ]
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


def cmake_step(argv: list[str], log: Path | None = None) -> bool:
    """One CMake command; Ctrl-C stops it and its compilers, not just cmake. Its output goes to the terminal, or
    into ``log`` (stderr, then stdout: the compilers' errors reach make's stdout) when one is given."""
    run = launcher.run_command(argv, capture=log is not None, stderr=log)
    run.raise_if_stopped()
    if log is not None:
        with log.open("a", encoding="utf-8") as f:
            f.write(run.output)
    return run.ok


def build(build_dir: Path = BUILD_DIR, device: int = 0) -> int:
    """Configure and build; an npu build is for the SoC of logical device ``device`` (or $SOC_VERSION)."""
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
        soc = soc_version(backend, device)
        print(f"SOC_VERSION={soc} ({'$SOC_VERSION' if os.environ.get('SOC_VERSION') else f'logical device {device}'})")

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
            "run_mode": run_mode,
            "soc_version": soc,
            "cann_home": cann_home,
            "cxx": cxx,
            "built_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "binary": str(binary),
        }
        info_file.write_text(json.dumps(info, indent=2) + "\n")
        (build_dir / MARKER).write_text("created by msprof lab; safe for the lab to delete and recreate\n")
    detail = f"{binary} (RUN_MODE={run_mode})" if ok else "cmake failed; see the messages above"
    print(render_verdicts([checks.check_build(ok, detail)]))
    return 0 if ok else 1


def read_build_info(build_dir: Path = BUILD_DIR) -> dict:
    info_file, binary = build_dir / BUILD_INFO, build_dir / BINARY_NAME
    if not info_file.is_file() or not binary.is_file():
        raise LabError(f"{binary} has not been built", "run `bash 02_api_AscendC/build.sh` first")
    return json.loads(info_file.read_text())


def usable_build(backend: Backend, build_dir: Path = BUILD_DIR) -> dict:
    """The build's lab_build.json, if this machine can run it: an npu build needs the npu backend."""
    info = read_build_info(build_dir)
    run_mode = info["run_mode"]
    if run_mode not in RUN_MODES:
        raise LabError(
            f"build/ is RUN_MODE={run_mode}, which this lab no longer builds", "rebuild: `bash 02_api_AscendC/build.sh`"
        )
    if run_mode == "npu" and not backend.is_npu:
        raise LabError(
            "the build is RUN_MODE=npu but this machine has no NPU backend",
            "rebuild: `bash 02_api_AscendC/build.sh` (it picks the portable twin here)",
        )
    if run_mode == "npu" and not is_atlas_a2_a3(info.get("soc_version")):
        # The report reads the A2/A3 PipeUtilization layout: aiv_* columns in op_summary, sub_block_id
        # rows in msprof op's CSV. Other SoCs write other columns (msprof's metric lists), which it does not read.
        raise LabError(
            f"mode 02 reads the Atlas A2/A3 profile layout (aiv_* columns, sub_block_id); build/ is for "
            f"{info.get('soc_version')}, whose msprof output has other columns",
            "on this machine use the portable twin: `RUN_MODE=portable bash 02_api_AscendC/build.sh`",
        )
    if run_mode != "npu" and backend.is_npu:
        print(
            f"note: build/ is RUN_MODE={run_mode}; running that build, not the NPU (rebuild without RUN_MODE for npu)"
        )
    return info
