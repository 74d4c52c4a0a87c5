"""The harness of each mode: what the lab does around a lesson file.

A mode's ``src/`` holds only lesson files, templates a user copies alone beside a model; they
import nothing of the lab. The modules here launch them as programs, with arguments, then read
what the profiler wrote and do the rest: the workload check, the backend, the output folder and
run_info.json, the portable profilers' output turned into msprof's layout, the checks, the report.
This package is the top layer of ``common``: it may import every other one, and none imports it.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository root


def mode_dir(name: str) -> Path:
    """A mode's folder, e.g. ``mode_dir("01_cmdline")``."""
    return ROOT / name


def lesson_dir(mode: str) -> Path:
    """A mode's lesson files' folder (its ``src/``), e.g. the CMake project of ``lesson_dir("02_api_AscendC")``."""
    return ROOT / mode / "src"


def lesson_file(mode: str, name: str) -> Path:
    """A lesson file of a mode, e.g. ``lesson_file("04_pyTorch", "model_with_profiler.py")``."""
    return lesson_dir(mode) / name
