"""The pyasc kernel's NPU commands (mode 02, ``run.sh <dev> --kernel pyasc [--simulator SOC]``): the exact argv
and its order, the simulator builder's refusals, and the reader of the simulator's per-core files."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import ROOT

from common.collect.npu_commands import msprof_op_simulator_argv
from common.errors import LabError
from common.formats.msprof_op import read_simulator_cores
from common.modes.ascendc import pyasc_profile
from common.render.kernel import render_simulator

LESSON = str(ROOT / "02_api_AscendC" / "src" / "add_pyasc.py")  # the lesson file, launched as a program


def test_board_argv_is_msprof_op_with_kernelscale_then_the_lesson_on_the_npu():
    argv = pyasc_profile.pyasc_msprof_argv("msprof", Path("/out"), 5, python="python3")
    assert argv == [
        "msprof",
        "op",
        "--output=/out",
        "--kernel-name=add_kernel",
        "--aic-metrics=KernelScale,PipeUtilization",
        "--launch-count=1",
        "python3",
        LESSON,
        "-r",
        "NPU",
        "--device",
        "5",
    ]


def test_simulator_argv_names_the_soc_twice_and_runs_the_lesson_on_the_model_backend():
    argv = pyasc_profile.pyasc_msprof_argv("msprof", Path("/out"), 5, simulator_soc="Ascend910B1", python="python3")
    assert argv == [
        "msprof",
        "op",
        "simulator",
        "--soc-version=Ascend910B1",
        "--output=/out",
        "--kernel-name=add_kernel",
        "--launch-count=1",
        "python3",
        LESSON,
        "-r",
        "Model",
        "-v",
        "Ascend910B1",
    ]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"soc_version": "910B1"},
        {"soc_version": "Ascend910B1", "launch_count": 0},
        {"soc_version": "Ascend910B1", "launch_count": 5001},
    ],
)
def test_simulator_builder_refuses_values_outside_the_documented_ones(kwargs):
    with pytest.raises(ValueError):
        msprof_op_simulator_argv("msprof", Path("/out"), ["app"], **kwargs)
    with pytest.raises(ValueError):
        msprof_op_simulator_argv("msprof", Path("/out"), [], "Ascend910B1")


def test_simulator_reader_summarises_each_core_and_says_what_is_missing(tmp_path):
    sim = tmp_path / "OPPROF_20261202031400_ABCDEFGHIJKLMNOP" / "simulator"
    full, bare = sim / "core0.veccore0", sim / "core0.veccore1"
    full.mkdir(parents=True)
    bare.mkdir()
    (sim / "not_a_core").mkdir()
    (full / "core0.veccore0_code_exe.csv").write_text(
        "code,call_count,cycles,running_time(us)\nadd_pyasc.py:80,2,100,0.5\nadd_pyasc.py:84,4,300,1.5\n"
    )
    (full / "core0.veccore0_instr_exe.csv").write_text(
        "instr,addr,pipe,call_count,cycles,running_time(us),detail\n"
        "VADD,0x10,VEC,4,300,1.5,NA\nMOV,0x20,MTE2,2,100,0.5,NA\n"
        "VADD,0x30,VEC,1,50,0.25,NA\n"
    )
    (full / "trace.json").write_text("{}")
    cores = read_simulator_cores(tmp_path)
    assert [c["core"] for c in cores] == ["core0.veccore0", "core0.veccore1"]
    assert cores[0]["pipe_cycles"] == {"VEC": 350.0, "MTE2": 100.0}
    assert cores[0]["hot_line"] == ("add_pyasc.py:84", 300.0)
    assert cores[0]["running_us"] == pytest.approx(2.0) and cores[0]["trace"]
    assert cores[1] == {
        "core": "core0.veccore1",
        "trace": False,
        "pipe_cycles": None,
        "hot_line": None,
        "running_us": None,
    }
    text = render_simulator(cores)
    assert "no instr_exe.csv" in text and "missing" in text and "VEC 350, MTE2 100" in text
    assert read_simulator_cores(tmp_path / "nothing") == []


def test_simulator_reader_names_the_file_when_a_documented_column_is_missing(tmp_path):
    core = tmp_path / "OPPROF_1_X" / "simulator" / "core1.veccore0"
    core.mkdir(parents=True)
    (core / "core1.veccore0_code_exe.csv").write_text("code,call_count\nx,1\n")
    with pytest.raises(LabError, match="code_exe"):
        read_simulator_cores(tmp_path)


@pytest.mark.parametrize(
    "options",
    [
        ["--soc-version=Ascend910B1", "--aic-metrics=KernelScale"],  # KernelScale is an on-board metric set
        ["--soc-version=Ascend910B1", "--timeout=0"],  # 1..2880 minutes
        ["--soc-version=Ascend910X"],  # no such simulator
        [],  # neither --soc-version nor a simulator on LD_LIBRARY_PATH
    ],
    ids=lambda options: " ".join(options) or "no soc",
)
def test_simulator_stand_in_refuses_what_msprof_op_simulator_refuses(tmp_path, options):
    import json
    import os
    import subprocess
    import sys

    from helpers import ROOT

    env = {**os.environ, "NPU_DRYRUN_LOG": str(tmp_path / "calls.jsonl"), "LD_LIBRARY_PATH": ""}
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tests" / "npu_dryrun" / "tools.py"),
            "msprof",
            "op",
            "simulator",
            f"--output={tmp_path}",
            *options,
            "true",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode != 0 and proc.stderr.startswith("[ERROR] msprof op simulator"), proc.stderr
    calls = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert [c["call"] for c in calls] == ["collect"] and calls[0]["refused"]
