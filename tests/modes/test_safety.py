"""Hostile input: the lab deletes only its own folders and passes nothing user-supplied to a shell.

Every hostile value below is one test case (marker ``hostile``); the README's testing figures
count them with ``pytest -m hostile --collect-only -q``. Each case asserts that the value is
refused with one ``Error:`` line (or passed on inert, as a single argv item) and that a
snapshot of a sandbox full of planted markers and precious files is unchanged afterwards.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, error_lines, lab_env

from common.backend import BACKEND_VAR, Backend, detect, soc_version
from common.collect import launcher
from common.errors import LabError, run_cli
from common.formats import rundir

hostile = pytest.mark.hostile

# Values a user (or a script that builds a command line) could pass where the lab expects a
# device id, a variant name, a timeout: shell syntax, option injection, path tricks, odd digits.
SHELLISH = ["0;rm -rf /", "$(touch PWNED)", "`touch PWNED`", "0\nrm -rf /", "0 && touch PWNED", "0|touch PWNED"]
HOSTILE_DEVICE_IDS = [*SHELLISH, "--output=/", "../0", "0x1", "1e1", "\u0663", "-1", "64", "", " "]
HOSTILE_VARIANTS = ["default;rm -rf /", "$(id)", "`id`", "fp32\nfp16-io", "../fp32", "--output=/", "ALL", "fp32 x", "*"]
HOSTILE_RUN_MODES = ["portable;rm -rf /", "$(id)", "`id`", "npu -DCMAKE_CXX_COMPILER=/bin/sh", "../npu", "gpu"]
HOSTILE_SOCS = ["910B3; rm -rf /", "Ascend910B3 --framework=0", "Ascend$(id)", "Ascend910B3\n--output=/", "`id`"]
HOSTILE_TIMEOUTS = ["nan", "inf", "-1", "0", "1e400", "$(sleep 100)", "10;rm -rf /", "`id`", "0x10", "--output=/"]
HOSTILE_PROGRAMS = ["python3; touch PWNED", "$(touch PWNED)", "`touch PWNED`", "/bin/sh -c id", "no-such-tool-xyz"]
# Arguments for the profiled program: they must reach it exactly as given, one argv item each.
INERT_APP_ARGS = ["$(touch PWNED)", "`touch PWNED`", "; touch PWNED", "| touch PWNED", "&& touch PWNED", "a\nb",
                  "--output=/", "'\"", "*", "~"]


# ----- a sandbox with planted markers ---------------------------------------------------------------
def tree_state(root: Path) -> dict[str, str]:
    """Every path under ``root`` with what it is: file content hash, symlink target, or dir."""
    state = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            state[rel] = "link -> " + os.readlink(path)
        elif path.is_dir():
            state[rel] = "dir"
        else:
            state[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return state


def plant(folder: Path, *, marker: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if marker:
        (folder / rundir.MARKER).write_text("planted")
    (folder / "precious.txt").write_text(f"do not delete {folder.name}")
    return folder


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """home/, a repository lab/ with mode folders, outside/: markers planted where the lab must never delete."""
    home, repo, outside = plant(tmp_path / "home"), plant(tmp_path / "lab"), plant(tmp_path / "outside")
    mode = plant(repo / "01_cmdline")  # even the mode folder itself carries a (planted) marker
    (mode / "run.sh").write_text("#!/bin/sh\n")
    old = plant(mode / "prof_out")  # the lab's own output from an earlier run
    (old / "escape").symlink_to(outside)  # a symlink inside it that leads out
    os.link(outside / "precious.txt", old / "hardlink.txt")  # and a second name of an outside file
    plant(mode / "foreign", marker=False)
    (mode / "link_out").symlink_to(outside)
    (mode / "link_parent").symlink_to(outside)
    plant(repo / "04_pyTorch" / "prof_out")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(rundir, "REPO_ROOT", repo)
    monkeypatch.chdir(repo)
    return tmp_path


def outputs(sandbox: Path) -> list[tuple[str, str]]:
    """(id, value) of every hostile --output: each must be refused before anything is deleted."""
    home, repo, mode = sandbox / "home", sandbox / "lab", sandbox / "lab" / "01_cmdline"
    return [
        ("root", "/"), ("home", str(home)), ("repo root", str(repo)), ("repo parent", str(sandbox)),
        ("dotdot", ".."), ("dot", "."), ("mode folder", "01_cmdline"), ("mode/..", "01_cmdline/.."),
        ("unmarked", "01_cmdline/foreign"), ("symlink", "01_cmdline/link_out"),
        ("through symlink", "01_cmdline/link_parent/sub"), ("other mode", "04_pyTorch/prof_out"),
        ("outside", str(sandbox / "outside")), ("climb", "01_cmdline/prof_out/../../04_pyTorch/prof_out"),
        ("tmp", "/tmp"), ("a file", "01_cmdline/run.sh"), ("the marker", "01_cmdline/prof_out/.msprof_lab"),
        ("option", "--output=/"), ("tilde", "~"), ("env var", "$HOME"), ("absolute mode", str(mode)),
    ]


OUTPUT_IDS = [name for name, _ in outputs(Path("/x"))]


@hostile
@pytest.mark.parametrize("name", OUTPUT_IDS)
def test_hostile_output_is_refused_and_nothing_changes(sandbox: Path, name: str) -> None:
    given = dict(outputs(sandbox))[name]
    mode = sandbox / "lab" / "01_cmdline"
    before = tree_state(sandbox)
    with pytest.raises(LabError) as err:
        rundir.prepare_output_dir(rundir.output_path(mode, given))
    assert str(err.value).strip() and "\n" not in err.value.what
    assert tree_state(sandbox) == before


@hostile
@pytest.mark.parametrize("name", ["root", "home", "repo root", "repo parent", "cwd"])
def test_protected_folders_are_refused_even_with_a_planted_marker(sandbox: Path, name: str) -> None:
    target = {"root": Path("/"), "home": sandbox / "home", "repo root": sandbox / "lab", "repo parent": sandbox,
              "cwd": sandbox / "lab"}[name]
    if name == "cwd":
        os.chdir(plant(sandbox / "lab" / "01_cmdline" / "prof_out" / "deep"))
        target = sandbox / "lab" / "01_cmdline" / "prof_out"  # a folder above the current one
    before = tree_state(sandbox)
    with pytest.raises(LabError, match="the home folder, the repository or a folder above"):
        rundir.prepare_output_dir(target)
    assert tree_state(sandbox) == before


@hostile
@pytest.mark.parametrize("kind", ["symlink", "directory"])
def test_a_fake_marker_is_not_a_marker(sandbox: Path, kind: str) -> None:
    target = plant(sandbox / "lab" / "01_cmdline" / "fake", marker=False)
    if kind == "symlink":
        (target / rundir.MARKER).symlink_to(sandbox / "outside" / rundir.MARKER)
    else:
        (target / rundir.MARKER).mkdir()
    before = tree_state(sandbox)
    with pytest.raises(LabError, match="was not made by msprof lab"):
        rundir.prepare_output_dir(target)
    assert tree_state(sandbox) == before


def test_own_output_is_recreated_and_links_inside_it_are_not_followed(sandbox: Path) -> None:
    mode = sandbox / "lab" / "01_cmdline"
    before = tree_state(sandbox)
    out = rundir.prepare_output_dir(rundir.output_path(mode, "01_cmdline/prof_out"))
    assert sorted(p.name for p in out.iterdir()) == [rundir.MARKER]
    fresh = rundir.prepare_output_dir(rundir.output_path(mode, "01_cmdline/new_out"))
    after = tree_state(sandbox)
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    assert all(k.startswith(("lab/01_cmdline/prof_out", "lab/01_cmdline/new_out")) for k in changed), changed
    assert (sandbox / "outside" / "precious.txt").read_text() == "do not delete outside"
    assert fresh.is_dir() and (fresh / rundir.MARKER).is_file()


# ----- the same refusals through the real entry points --------------------------------------------------
def copy_lab(target: Path) -> Path:
    """A private copy of the lab's code (no outputs, builds or models) to run as a user would."""
    ignore = shutil.ignore_patterns("__pycache__", "prof_out*", "build", "model", rundir.LOCK_FILE)
    shutil.copytree(ROOT / "common", target / "common", ignore=ignore)
    for mode in ("01_cmdline", "02_api_AscendC", "03_api_pyAcl", "04_pyTorch"):
        shutil.copytree(ROOT / mode, target / mode, ignore=ignore)
    return target


def run_script(lab: Path, script: str, *args: str, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(lab / script), *args], cwd=lab, env=lab_env(**extra), capture_output=True,
                          text=True, timeout=300, check=False)


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


# ----- allow-lists: device ids, variants, RUN_MODE, SOC_VERSION, timeouts, programs -----------------------
@functools.cache
def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


sys.path.insert(0, str(ROOT / "03_api_pyAcl" / "src"))
DRIVERS = {
    "01": lambda: _load(ROOT / "01_cmdline/src/profile_app.py", "safety_profile_app"),
    "02": lambda: _load(ROOT / "02_api_AscendC/src/add_profile.py", "safety_add_profile"),
    "03": lambda: __import__("infer"),
    "04": lambda: _load(ROOT / "04_pyTorch/src/model_with_profiler.py", "safety_model_with_profiler"),
}
DEVICE_ARGV = {"01": lambda d: [d], "02": lambda d: ["run", "--device", d], "03": lambda d: [d], "04": lambda d: [d]}


def run_cli_in_process(main, argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        run_cli(lambda: main(argv))
    return exit_info.value.code, capsys.readouterr().err


@pytest.fixture
def portable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv(BACKEND_VAR, "portable")
    monkeypatch.chdir(tmp_path)  # a PWNED file, were anything run through a shell, would land here
    detect.cache_clear()
    yield tmp_path
    detect.cache_clear()


def assert_nothing_ran(where: Path) -> None:
    assert not list(where.rglob("PWNED*")) and not list(ROOT.glob("PWNED*"))


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
@pytest.mark.parametrize("script", ["infer", "build_model"])
@pytest.mark.parametrize("variant", HOSTILE_VARIANTS, ids=[repr(v) for v in HOSTILE_VARIANTS])
def test_pyacl_refuses_hostile_variants(script: str, variant: str, portable: Path, capsys) -> None:
    module = __import__(script)
    argv = ["0", variant] if script == "infer" else [variant]
    code, stderr = run_cli_in_process(module.main, argv, capsys)
    assert code == 2 and len(error_lines(stderr)) == 1 and "Traceback" not in stderr, stderr
    assert_nothing_ran(portable)


@hostile
@pytest.mark.parametrize("run_mode", HOSTILE_RUN_MODES, ids=[repr(v) for v in HOSTILE_RUN_MODES])
def test_ascendc_refuses_hostile_run_modes(run_mode: str) -> None:
    with pytest.raises(LabError, match="is not one of portable, npu, cpu"):
        DRIVERS["02"]().choose_run_mode(Backend("portable", "test"), run_mode)


@hostile
@pytest.mark.parametrize("soc", HOSTILE_SOCS, ids=[repr(v) for v in HOSTILE_SOCS])
def test_hostile_soc_version_is_refused(soc: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOC_VERSION", soc)
    with pytest.raises(LabError, match="does not look like Ascend"):
        soc_version(Backend("npu", "test"))


@hostile
@pytest.mark.parametrize("timeout", HOSTILE_TIMEOUTS, ids=[repr(v) for v in HOSTILE_TIMEOUTS])
def test_hostile_timeouts_are_refused(timeout: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(LabError, match="not a positive number of seconds"):
        rundir.parse_timeout(timeout)
    monkeypatch.setenv(rundir.TIMEOUT_VAR, timeout)
    with pytest.raises(LabError, match="not a positive number of seconds"):
        rundir.parse_timeout(None)


@hostile
@pytest.mark.parametrize("mode", ["01", "02"])
def test_timeout_option_is_validated_before_anything_runs(mode: str, portable: Path, capsys) -> None:
    argv = {"01": ["0", "--timeout", "$(sleep 100)"], "02": ["run", "--timeout", "$(sleep 100)"]}[mode]
    code, stderr = run_cli_in_process(DRIVERS[mode]().main, argv, capsys)
    assert code == 2 and error_lines(stderr) == [
        ("Error: timeout '$(sleep 100)' is not a positive number of seconds — pass e.g. --timeout 600 "
         f"(or set {rundir.TIMEOUT_VAR}); leave it out for no limit")]
    assert_nothing_ran(portable)


def test_timeout_values_and_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(rundir.TIMEOUT_VAR, raising=False)
    assert rundir.parse_timeout(None) is None and rundir.parse_timeout("2.5") == 2.5
    monkeypatch.setenv(rundir.TIMEOUT_VAR, "600")
    assert rundir.parse_timeout(None) == 600.0 and rundir.parse_timeout("5") == 5.0  # the option wins


@hostile
@pytest.mark.parametrize("program", HOSTILE_PROGRAMS, ids=[repr(v) for v in HOSTILE_PROGRAMS])
def test_hostile_program_names_are_refused(program: str, portable: Path) -> None:
    with pytest.raises(LabError, match="is not on PATH|does not exist"):
        launcher.resolve_app([program])
    assert_nothing_ran(portable)


@hostile
def test_program_arguments_reach_the_program_inert(tmp_path: Path) -> None:
    """Through 01's run.sh, as a user runs it: every argument arrives as one argv item, none is run."""
    lab = copy_lab(tmp_path / "lab")
    app = tmp_path / "record_argv.py"
    app.write_text("import json, sys, torch\ntorch.ones(2).sum()\n"
                   "open(sys.argv[1], 'w').write(json.dumps(sys.argv[2:]))\n")
    record = tmp_path / "argv.json"
    result = run_script(lab, "01_cmdline/run.sh", "0", "--", "python3", str(app), str(record), *INERT_APP_ARGS)
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(record.read_text()) == INERT_APP_ARGS
    assert_nothing_ran(tmp_path)


@pytest.mark.parametrize("bad", ["echo hi; touch PWNED", b"echo", [], ["echo", None], ("echo", 3)])
def test_commands_must_be_argv_lists(bad) -> None:
    with pytest.raises(TypeError, match="argv list"):
        launcher.run_command(bad)


def test_run_command_passes_shell_syntax_as_data(tmp_path: Path) -> None:
    run = launcher.run_command([sys.executable, "-c", "import sys; print(repr(sys.argv[1:]))", *SHELLISH],
                               capture=True)
    assert run.ok and run.output.strip() == repr(SHELLISH)


# ----- no shell anywhere in the lab's code ---------------------------------------------------------------
SHELL_CALLS = re.compile(r"shell\s*=\s*True|os\.system\(|os\.popen\(|getoutput\(|getstatusoutput\(|os\.exec\w*p\w*\(")


def lab_sources() -> list[Path]:
    files = [ROOT / "noxfile.py", *(ROOT / "common").rglob("*.py")]
    for mode in ("01_cmdline", "02_api_AscendC", "03_api_pyAcl", "04_pyTorch"):
        files += (ROOT / mode / "src").rglob("*.py")
    return sorted(files)


def test_no_shell_in_the_lab_code() -> None:
    offenders = [f"{p.relative_to(ROOT)}:{n}" for p in lab_sources()
                 for n, line in enumerate(p.read_text().splitlines(), 1) if SHELL_CALLS.search(line)]
    assert len(lab_sources()) > 20 and offenders == []


def test_shell_scripts_pass_arguments_quoted() -> None:
    scripts = sorted(ROOT.glob("0*/*.sh")) + [ROOT / ".ci" / "run"]
    assert len(scripts) >= 6
    for script in scripts:
        for n, line in enumerate(script.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            assert "eval" not in code.split(), f"{script}:{n}"
            for match in re.finditer(r"\$\{?[@*1-9]", code):
                assert code[match.start() - 1] == '"', f"{script}:{n}: unquoted {match.group()}"
