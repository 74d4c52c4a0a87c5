"""Hostile input through the lab's entry points: the modes' main() and run.sh, as a user runs them.

Every hostile value below is one test case (marker ``hostile``); the README's testing figures
count them with ``pytest -m hostile --collect-only -q``, together with those of
tests/unit/test_hostile_input.py (output folders, allow-lists and the no-shell rule, in
process). Each case asserts that the value is refused with one ``Error:`` line (or passed on
inert, as a single argv item) and, where it could delete, that a snapshot of a sandbox full of
planted markers and precious files is unchanged afterwards.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import SHELLISH, assert_nothing_ran, copy_lab, error_lines, lab_env, plant, tree_state

from common.collect import launcher
from common.errors import run_cli
from common.formats import rundir

hostile = pytest.mark.hostile

# Values a user (or a script that builds a command line) could pass where the lab expects a
# device id or a variant name: shell syntax, option injection, path tricks, odd digits.
HOSTILE_DEVICE_IDS = [*SHELLISH, "--output=/", "../0", "0x1", "1e1", "\u0663", "-1", "64", "", " "]
HOSTILE_VARIANTS = ["default;rm -rf /", "$(id)", "`id`", "fp32\nfp16-io", "../fp32", "--output=/", "ALL", "fp32 x", "*"]
# Arguments for the profiled program: they must reach it exactly as given, one argv item each.
INERT_APP_ARGS = [
    "$(touch PWNED)",
    "`touch PWNED`",
    "; touch PWNED",
    "| touch PWNED",
    "&& touch PWNED",
    "a\nb",
    "--output=/",
    "'\"",
    "*",
    "~",
]


# ----- --output through run.sh ----------------------------------------------------------------------
def run_script(lab: Path, script: str, *args: str, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(lab / script), *args],
        cwd=lab,
        env=lab_env(**extra),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def assert_refused(result: subprocess.CompletedProcess, needle: str = "") -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    errors = error_lines(result.stderr)
    assert len(errors) == 1 and needle in errors[0], result.stderr


@hostile
@pytest.mark.parametrize("case", ["root", "planted home"])
def test_cli_refuses_hostile_outputs(tmp_path: Path, case: str) -> None:
    lab = copy_lab(tmp_path / "lab")
    home = plant(tmp_path / "home")
    given = {"root": ["--output", "/"], "planted home": ["--output", str(home)]}[case]
    before = tree_state(tmp_path)
    assert_refused(run_script(lab, "01_cmdline/run.sh", "0", *given, HOME=str(home)), "is not inside")
    assert tree_state(tmp_path) == before


# ----- device ids, variants and timeouts through every mode's main() -------------------------------------
DRIVERS = {
    "01": lambda: importlib.import_module("common.modes.cmdline"),
    "02": lambda: importlib.import_module("common.modes.ascendc.add_profile"),
    "03": lambda: importlib.import_module("common.modes.pyacl.run"),
    "04": lambda: importlib.import_module("common.modes.pytorch.model"),
}
DEVICE_ARGV = {"01": lambda d: [d], "02": lambda d: ["run", "--device", d], "03": lambda d: [d], "04": lambda d: [d]}


def run_cli_in_process(main, argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        run_cli(lambda: main(argv))
    return exit_info.value.code, capsys.readouterr().err


@hostile
@pytest.mark.parametrize("mode", sorted(DRIVERS))
@pytest.mark.parametrize("device", HOSTILE_DEVICE_IDS, ids=[repr(d) for d in HOSTILE_DEVICE_IDS])
def test_every_mode_refuses_hostile_device_ids(mode: str, device: str, portable: Path, capsys) -> None:
    module = DRIVERS[mode]()
    code, stderr = run_cli_in_process(module.main, DEVICE_ARGV[mode](device), capsys)
    assert code == 2 and "Traceback" not in stderr
    assert len(error_lines(stderr)) == 1, stderr
    assert_nothing_ran(portable)


@hostile
@pytest.mark.parametrize("mode", sorted(DRIVERS))
@pytest.mark.parametrize(
    ("device", "visible", "needle"),
    [
        ("2", None, "device 2 is not a logical device id here (valid: 0, 1)"),
        ("63", None, "device 63 is not a logical device id here (valid: 0, 1)"),
        ("0", "1", "ASCEND_RT_VISIBLE_DEVICES='1' is set; CANN does not support it while profiling"),
    ],
)
def test_every_mode_refuses_a_device_the_npu_runtime_does_not_have(
    mode: str, device: str, visible: str | None, needle: str, portable: Path, monkeypatch, capsys
) -> None:
    """On the npu backend the id is a logical one (0..N-1, N from `npu-smi info -l`), checked before anything runs."""
    import common.modes.lesson
    from common.backend import Backend

    npu = Backend(
        "npu", "test", "/cann", {"msprof": "/cann/bin/msprof", "atc": "/cann/bin/atc"}, (0, 1), ("torch_npu", "acl")
    )
    if visible is None:
        monkeypatch.delenv("ASCEND_RT_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("ASCEND_RT_VISIBLE_DEVICES", visible)
    module = DRIVERS[mode]()
    monkeypatch.setattr(common.modes.lesson, "detect", lambda *a: npu)
    if hasattr(module, "detect"):
        monkeypatch.setattr(module, "detect", lambda *a: npu)
    code, stderr = run_cli_in_process(module.main, DEVICE_ARGV[mode](device), capsys)
    assert code == 2 and "Traceback" not in stderr
    errors = error_lines(stderr)
    assert len(errors) == 1 and needle in errors[0], stderr


@hostile
@pytest.mark.parametrize("script", ["run", "build_model"])
@pytest.mark.parametrize("variant", HOSTILE_VARIANTS, ids=[repr(v) for v in HOSTILE_VARIANTS])
def test_pyacl_refuses_hostile_variants(script: str, variant: str, portable: Path, capsys) -> None:
    module = importlib.import_module(f"common.modes.pyacl.{script}")
    argv = ["0", variant] if script == "run" else [variant]
    code, stderr = run_cli_in_process(module.main, argv, capsys)
    assert code == 2 and len(error_lines(stderr)) == 1 and "Traceback" not in stderr, stderr
    assert_nothing_ran(portable)


@hostile
@pytest.mark.parametrize("mode", ["01", "02"])
def test_timeout_option_is_validated_before_anything_runs(mode: str, portable: Path, capsys) -> None:
    argv = {"01": ["0", "--timeout", "$(sleep 100)"], "02": ["run", "--timeout", "$(sleep 100)"]}[mode]
    code, stderr = run_cli_in_process(DRIVERS[mode]().main, argv, capsys)
    assert code == 2 and error_lines(stderr) == [
        (
            "Error: timeout '$(sleep 100)' is not a positive number of seconds — pass e.g. --timeout 600 "
            f"(or set {rundir.TIMEOUT_VAR}); leave it out for no limit"
        )
    ]
    assert_nothing_ran(portable)


# ----- the profiled program's arguments: data, never shell ----------------------------------------
@hostile
def test_program_arguments_reach_the_program_inert(tmp_path: Path) -> None:
    """Through 01's run.sh, as a user runs it: every argument arrives as one argv item, none is run."""
    lab = copy_lab(tmp_path / "lab")
    app = tmp_path / "record_argv.py"
    app.write_text(
        "import json, sys, torch\ntorch.ones(2).sum()\nopen(sys.argv[1], 'w').write(json.dumps(sys.argv[2:]))\n"
    )
    record = tmp_path / "argv.json"
    result = run_script(lab, "01_cmdline/run.sh", "0", "--", "python3", str(app), str(record), *INERT_APP_ARGS)
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(record.read_text()) == INERT_APP_ARGS
    assert_nothing_ran(tmp_path)


def test_run_command_passes_shell_syntax_as_data(tmp_path: Path) -> None:
    run = launcher.run_command([sys.executable, "-c", "import sys; print(repr(sys.argv[1:]))", *SHELLISH], capture=True)
    assert run.ok and run.output.strip() == repr(SHELLISH)
