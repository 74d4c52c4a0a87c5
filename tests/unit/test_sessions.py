"""common/cli/sessions.py: which of a nox session's arguments reach which script, --repeat, and the record a
mode leaves when a script stops before its run began (what agree then repeats)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

from common.errors import LabError
from common.formats import rundir
from common.cli import sessions


def argv_of(session: str, args: list[str]) -> list[list[str]]:
    parsed = sessions.mode_parser(session).parse_args(args)
    return [
        [
            Path(a).relative_to(ROOT).as_posix() if a.startswith(str(ROOT)) else a
            for a in sessions.step_argv(step, parsed)[1:]
        ]
        for step in sessions.MODE_STEPS[session]
    ]


def test_each_script_gets_the_options_it_takes_and_only_those() -> None:
    given = ["1", "--workload", "my_model.py", "--threads", "2", "--train", "--kernel", "pyasc"]
    assert argv_of("cmdline", given) == [["01_cmdline/run.sh", "1", "--workload", "my_model.py", "--threads", "2"]]
    assert argv_of("ascendc", given) == [
        ["02_api_AscendC/build.sh", "--device", "1"],
        ["02_api_AscendC/run.sh", "1", "--workload", "my_model.py", "--kernel", "pyasc"],
    ]
    assert argv_of("pyacl", given) == [
        ["03_api_pyAcl/build_model.sh", "--device", "1", "--workload", "my_model.py"],
        ["03_api_pyAcl/run.sh", "1", "--workload", "my_model.py", "--threads", "2"],
    ]
    assert argv_of("pytorch", given) == [
        ["04_pyTorch/run.sh", "1", "--workload", "my_model.py", "--threads", "2", "--train"]
    ]
    # nothing given: device 0 to the run, nothing else; the values are the scripts' to check
    assert argv_of("pyacl", []) == [["03_api_pyAcl/build_model.sh"], ["03_api_pyAcl/run.sh", "0"]]
    assert argv_of("pytorch", ["0;rm -rf /"]) == [["04_pyTorch/run.sh", "0;rm -rf /"]]  # an argv item, never a shell


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["0", "1"], "unrecognized arguments: 1"),
        (["0", "--trains"], "unrecognized arguments: --trains"),
        (["0", "--workload"], "--workload: expected one argument"),
        (["--repeat", "0"], "--repeat takes 1..20, got '0'"),
        (["--repeat", "x"], "--repeat takes 1..20, got 'x'"),
    ],
)
def test_a_mode_session_refuses_what_no_script_takes_in_one_line(args, why) -> None:
    with pytest.raises(LabError, match=why):
        sessions.run_mode("pytorch", args)


def test_a_script_that_stops_before_its_run_replaces_the_older_output_with_its_reason(tmp_path, monkeypatch) -> None:
    mode = tmp_path / "03_api_pyAcl"
    old = rundir.prepare_output_dir(mode / "prof_out")
    rundir.start_run(old, mode="pyacl", backend="portable", device=0, command=["old"])
    (old / "report.md").write_text("an older run's passing report")
    monkeypatch.setenv(rundir.RUN_ID_VAR, "this-run")
    sessions.record_failure(
        "pyacl", mode, "03_api_pyAcl/build_model.sh", 2, "Error: torch.onnx.export failed: aten::diff"
    )
    info = rundir.read_run_info(mode / "prof_out")
    assert info["run_id"] == "this-run" and info["mode"] == "pyacl" and not info["completed"]
    assert info["failure"] == "build_model.sh exited 2: torch.onnx.export failed: aten::diff"
    assert not (mode / "prof_out" / "report.md").exists()
    from common.analyze.cross_mode import mode_problem

    assert mode_problem(info) == "it stopped: build_model.sh exited 2: torch.onnx.export failed: aten::diff"


def test_a_run_that_began_keeps_its_output_and_gains_the_reason(tmp_path, monkeypatch) -> None:
    mode = tmp_path / "04_pyTorch"
    out = rundir.prepare_output_dir(mode / "prof_out")
    monkeypatch.setenv(rundir.RUN_ID_VAR, "this-run")
    rundir.start_run(out, mode="pytorch", backend="portable", device=0, command=["run.sh"])
    (out / "trace.json").write_text("{}")
    sessions.record_failure("pytorch", mode, "04_pyTorch/run.sh", 1, "RuntimeError: boom")
    info = rundir.read_run_info(out)
    assert info["failure"] == "run.sh exited 1: RuntimeError: boom" and (out / "trace.json").is_file()


def test_a_folder_the_lab_did_not_make_is_left_alone(tmp_path, monkeypatch) -> None:
    mode = tmp_path / "01_cmdline"
    (mode / "prof_out").mkdir(parents=True)
    (mode / "prof_out" / "mine.txt").write_text("a user's file")
    monkeypatch.setenv(rundir.RUN_ID_VAR, "this-run")
    sessions.record_failure("cmdline", mode, "01_cmdline/run.sh", 2, "Error: x")
    assert sorted(p.name for p in (mode / "prof_out").iterdir()) == ["mine.txt"]


def test_agree_with_a_run_id_runs_only_when_all_four_modes_ran_in_it(tmp_path) -> None:
    from common.cli.agree import modes_not_in_run

    dirs = []
    for folder, mode, run in (
        ("01_cmdline", "cmdline", "a"),
        ("02_api_AscendC", "ascendc", "a"),
        ("03_api_pyAcl", "pyacl", "old"),
        ("04_pyTorch", "pytorch", "a"),
    ):
        out = rundir.prepare_output_dir(tmp_path / folder / "prof_out")
        (out / "run_info.json").write_text(
            json.dumps({"backend": "portable", "mode": mode, "completed": True, "run_id": run})
        )
        dirs.append(out)
    assert modes_not_in_run(dirs, "a") == ["03"]
    assert modes_not_in_run(dirs, "b") == ["01", "02", "03", "04"]
    done = subprocess.run(
        [sys.executable, "-m", "common", "agree", "--run-id", "a", *map(str, dirs)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0 and done.stdout.startswith("agree: not run — mode 03 did not run in this invocation")


def test_an_unknown_session_is_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "common.cli.sessions", "lint"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 2 and done.stderr.startswith("Error: no session 'lint' — name one of cmdline, ")


def test_the_kernel_choice_is_checked_by_the_script_that_takes_it() -> None:
    done = subprocess.run(
        ["bash", "02_api_AscendC/run.sh", "0", "--kernel", "rust"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHON": sys.executable},
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "invalid choice: 'rust'" in done.stderr


def test_a_workload_with_requires_runs_every_script_under_its_environment(tmp_path, monkeypatch) -> None:
    """The mode session builds (or finds) the environment of the file's REQUIRES and starts each script with it as
    PYTHON; a file without REQUIRES leaves the lab's own."""
    from common.collect import workload_env

    model = tmp_path / "m.py"
    model.write_text('REQUIRES = ["timm"]\nimport timm\n')
    env_python = tmp_path / "workload-x" / "bin" / "python"
    monkeypatch.setattr(
        workload_env, "ensure", lambda file, **kw: env_python if "REQUIRES" in file.read_text() else None
    )
    seen = []
    monkeypatch.setattr(sessions, "run_step", lambda argv: (seen.append(os.environ.get("PYTHON")), (0, ""))[1])
    monkeypatch.setenv("PYTHON", "lab-python")
    assert sessions.run_mode("pyacl", ["0", "--workload", str(model)]) == 0
    assert seen == [str(env_python), str(env_python)]  # build_model.sh and run.sh
    seen.clear()
    model.write_text("import torch\n")
    monkeypatch.setenv("PYTHON", "lab-python")
    assert sessions.run_mode("pytorch", ["0", "--workload", str(model)]) == 0
    assert seen == ["lab-python"]


def test_agree_runs_under_the_environment_of_the_workload_the_modes_profiled(tmp_path, monkeypatch) -> None:
    model = tmp_path / "m.py"
    model.write_text('REQUIRES = ["timm"]\n')
    venv = tmp_path / "workload-x"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    monkeypatch.setattr(sessions, "environment_dir", lambda requirements: venv)
    out = tmp_path / "prof_out"
    out.mkdir()
    (out / rundir.RUN_INFO).write_text(
        json.dumps({"backend": "portable", "mode": "04", "completed": True, "workload": {"path": str(model)}})
    )
    ran = []
    monkeypatch.setattr(
        sessions.subprocess, "run", lambda argv, **kw: ran.append(argv) or subprocess.CompletedProcess(argv, 0)
    )
    assert sessions.run_agree(["--run-id", "r1", str(out)]) == 0
    assert ran == [[str(venv / "bin" / "python"), "-m", "common", "agree", "--run-id", "r1", str(out)]]


def test_repeat_names_each_runs_folder_and_the_spread_and_a_disturbed_run(tmp_path, monkeypatch) -> None:
    from common.formats import run_ops

    totals = {"1": 3000.0, "2": 3100.0, "3": 6200.0}
    monkeypatch.setattr(
        run_ops,
        "load_run",
        lambda folder: run_ops.RunOps(
            folder, {}, "forward", {("", "aten::addmm", "32,1024"): totals[folder.name], ("", "aten::randn", ""): 9e9}
        ),
    )
    text = sessions.repeat_summary(tmp_path / "prof_runs", 3)
    lines = text.splitlines()
    assert lines[0] == f"run 1: {tmp_path / 'prof_runs' / '1'}: op time 3,000.0 us per forward (init excluded)"
    assert lines[3] == (
        "3 runs: op time per forward median 3,100.0 us (IQR 3,050.0-4,650.0, n 3), min 3,000.0, max "
        "6,200.0 us; disturbed: run 3 more than 25% off the median"
    )
