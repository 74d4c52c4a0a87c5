"""Mode 02's lesson files copied alone, outside the repository, as a user copies them (issue 31).

The C++ project is its three files (add_kernel.cpp, main.cpp, CMakeLists.txt): configured with CMake
for the portable backend with the CPU stand-in headers named by ASCENDC_TWIN_DIR (as CANN's are named
on an NPU), built, run and verified. add_pyasc.py is one file, run with the pyasc stand-in package on
its PYTHONPATH. Each also runs with sizes of the user's own (a kernel the lab has never built), and the
stand-ins' profiler files are written where $ASCENDC_TWIN_TIMINGS says. Nothing of the lab is imported.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, run

SRC = ROOT / "02_api_AscendC" / "src"
TWIN = ROOT / "common" / "modes" / "ascendc" / "twin"
PYASC_SITE = ROOT / "common" / "modes" / "ascendc" / "pyasc_twin" / "site"
CPP_PROJECT = ("add_kernel.cpp", "main.cpp", "CMakeLists.txt")
IMPORTS_COMMON = re.compile(r"^\s*(from|import)\s+common\b", re.MULTILINE)
CXX = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
needs_cxx = pytest.mark.skipif(CXX is None or shutil.which("cmake") is None, reason="needs a C++ compiler and CMake")


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """An empty folder outside the repository."""
    assert not tmp_path.resolve().is_relative_to(ROOT.resolve())
    return tmp_path


def test_src_holds_only_the_lesson_files_and_none_reaches_into_the_lab():
    """Their line budgets: tests/unit/test_lessons.py, one rule for every lesson."""
    assert sorted(p.name for p in SRC.iterdir() if p.name != "__pycache__") == sorted([*CPP_PROJECT, "add_pyasc.py"])
    for name in (*CPP_PROJECT, "add_pyasc.py"):
        text = (SRC / name).read_text()
        assert not IMPORTS_COMMON.search(text), name
        assert '#include "twin/' not in text and "add_sizes.h" not in text and "device_npu.h" not in text, name


def build_and_run(project: Path, *args: str) -> subprocess.CompletedProcess:
    build = project / "build"
    for argv in (
        ["cmake", "-S", str(project), "-B", str(build), "-DRUN_MODE=portable", f"-DASCENDC_TWIN_DIR={TWIN}"],
        ["cmake", "--build", str(build), "--parallel", "2"],
    ):
        step = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
        assert step.returncode == 0, step.stdout + step.stderr
    timings = project / "twin_timings.csv"
    env = {**os.environ, "ASCENDC_TWIN_TIMINGS": str(timings)}
    return subprocess.run(
        [str(build / "add_custom_main"), *args], env=env, capture_output=True, text=True, timeout=300, check=False
    )


def timer_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


@needs_cxx
def test_the_cpp_project_copied_alone_builds_runs_and_verifies(outside: Path):
    for name in CPP_PROJECT:
        shutil.copy(SRC / name, outside / name)
    proc = build_and_run(outside, "--warmup", "1", "--launches", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "verified: 8192 of 8192 elements equal 0x4000 in each of 3 launches (1 warm-up + 2 measured)" in proc.stdout
    rows = timer_rows(outside / "twin_timings.csv")  # the stand-in's profiler output: 3 launches x 8 blocks
    assert len(rows) == 3 * 8 and all(int(r["vec_ns"]) > 0 and int(r["mte2_ns"]) > 0 for r in rows)
    # the lab reads that file as it is, through the mode's own conversion: launches 1 and 2 (the first: warm-up)
    compared = run(
        [
            sys.executable,
            "-m",
            "common",
            "compare",
            str(outside / "twin_timings.csv"),
            str(outside / "twin_timings.csv"),
            "--json",
        ]
    )
    assert compared.returncode == 0, compared.stderr
    assert "3 launches recorded, the first left out as a warm-up, 2 read" in compared.stderr
    walls = {r["launch"]: int(r["wall_ns"]) / 1000 for r in rows}
    assert json.loads(compared.stdout)["total"]["baseline_us"] == pytest.approx(walls["1"] + walls["2"], abs=0.01)
    report = run([sys.executable, "-m", "common", "report", str(outside / "twin_timings.csv")])
    assert report.returncode == 0, report.stderr
    assert re.search(r"^add_custom +2 +aiv_vec", report.stdout, re.M), report.stdout  # the pipes, per launch


@needs_cxx
def test_the_cpp_project_with_sizes_of_your_own(outside: Path):
    for name in CPP_PROJECT:
        shutil.copy(SRC / name, outside / name)
    kernel = outside / "add_kernel.cpp"
    text = kernel.read_text()
    for old, new in [
        ("TOTAL_LENGTH = 8 * 1024;", "TOTAL_LENGTH = 3 * 4096;"),
        ("USE_CORE_NUM = 8;", "USE_CORE_NUM = 6;"),
        ("#define ADD_TILE_NUM 8", "#define ADD_TILE_NUM 4"),
    ]:  # the default of the tiling variant
        assert old in text
        text = text.replace(old, new)
    kernel.write_text(text)
    proc = build_and_run(outside, "--launches", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (
        "kernel sizes: total_length=12288 block_dim=6 block_length=2048 tile_num=4 buffer_num=2 tile_length=256"
        in proc.stdout
    )
    assert "verified: 12288 of 12288 elements" in proc.stdout
    assert len(timer_rows(outside / "twin_timings.csv")) == 2 * 6


@needs_cxx
def test_the_portable_build_without_the_stand_in_headers_says_what_it_needs(outside: Path):
    for name in CPP_PROJECT:
        shutil.copy(SRC / name, outside / name)
    proc = subprocess.run(
        ["cmake", "-S", str(outside), "-B", str(outside / "build"), "-DRUN_MODE=portable"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode != 0 and "RUN_MODE=portable needs -DASCENDC_TWIN_DIR=" in proc.stderr


def run_pyasc(folder: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(PYASC_SITE), "ASCENDC_TWIN_TIMINGS": str(folder / "timings.csv")}
    return subprocess.run(
        [sys.executable, "add_pyasc.py", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_add_pyasc_copied_alone_runs_on_the_stand_in_and_verifies(outside: Path):
    shutil.copy(SRC / "add_pyasc.py", outside / "add_pyasc.py")
    proc = run_pyasc(outside, "--warmup", "1", "--launches", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (
        "verified: 8192 of 8192 elements equal numpy's fp16 x + y (within 0 ULP) in each of 2 launches" in proc.stdout
    )
    assert len(timer_rows(outside / "timings.csv")) == 2 * 8
    # PYTHONPATH is the stand-in's folder alone, so an import of the lab would have failed the run
    assert "Error" not in proc.stderr


def test_add_pyasc_with_sizes_of_your_own(outside: Path):
    text = (SRC / "add_pyasc.py").read_text()
    for old, new in [("TOTAL_LENGTH = 8 * 1024", "TOTAL_LENGTH = 4 * 1024"), ("USE_CORE_NUM = 8", "USE_CORE_NUM = 4")]:
        assert old in text
        text = text.replace(old, new)
    (outside / "add_pyasc.py").write_text(text)
    proc = run_pyasc(outside)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "kernel sizes: total_length=4096 block_dim=4 block_length=1024" in proc.stdout
    assert "verified: 4096 of 4096 elements" in proc.stdout and len(timer_rows(outside / "timings.csv")) == 4
