"""Mode 02's harness (02_api_AscendC): what the lab does around the AscendC lesson files.

The lesson files in ``02_api_AscendC/src/`` are a CMake project of three files (``add_kernel.cpp``,
``main.cpp``, ``CMakeLists.txt``) and ``add_pyasc.py``; they use nothing of the lab. Here the lab
builds the project (``build_kernel``: RUN_MODE npu against CANN, portable against the CPU stand-in
headers in ``twin/``), launches the host program or ``add_pyasc.py`` (with the pyasc stand-in in
``pyasc_twin/`` where pyasc is missing) as programs, under msprof / msprof op on an NPU, and reads
what they and the profilers wrote: on the portable backend the stand-ins' per-block timers, which
``twin_profile`` turns into msprof's layout. ``add_profile`` runs the C++ kernel and ``pyasc_profile`` the pyasc one
(what both share: ``kernel_run``), and hand what was written to the layers (``common.analyze.checks.kernel``
judges, ``common.formats.msprof_op`` reads msprof op's files, ``common.render.kernel`` lays out the tables);
``kernel_report`` holds what the mode knows of its kernels (the lines its programs print, the bytes an Add moves,
the 910B3 estimate).

    python -m common.modes.ascendc build [--device N]      # what 02_api_AscendC/build.sh runs
    python -m common.modes.ascendc run --device N [...]    # what 02_api_AscendC/run.sh runs
"""

from __future__ import annotations

from common.modes import ROOT, lesson_dir, lesson_file, mode_dir

MODE = "ascendc"  # run_info.json's mode and the nox session
MODE_DIR = mode_dir("02_api_AscendC")
SRC_DIR = lesson_dir("02_api_AscendC")  # the lesson files: the CMake project
TWIN_DIR = ROOT / "common" / "modes" / "ascendc" / "twin"  # the CPU stand-in of the AscendC headers
PYASC_LESSON = lesson_file("02_api_AscendC", "add_pyasc.py")
