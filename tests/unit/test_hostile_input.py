"""Hostile input, in process: output folders, allow-lists, argv-only commands, no shell in the lab's code.

Every hostile value below is one test case (marker ``hostile``); the README's testing figures
count them with ``pytest -m hostile --collect-only -q``, together with those of
tests/modes/test_safety.py (the same refusals through the modes' entry points). Each output
case asserts that the value is refused with one error and that a snapshot of a sandbox full of
planted markers and precious files is unchanged afterwards.
"""

from __future__ import annotations

import os
import re
from importlib import import_module
from pathlib import Path

import pytest
from helpers import MODES, ROOT, assert_nothing_ran, plant, tree_state

from common.backend import Backend, soc_version
from common.collect import launcher
from common.errors import LabError
from common.formats import rundir

hostile = pytest.mark.hostile

HOSTILE_RUN_MODES = ["portable;rm -rf /", "$(id)", "`id`", "npu -DCMAKE_CXX_COMPILER=/bin/sh", "../npu", "gpu"]
HOSTILE_SOCS = ["910B3; rm -rf /", "Ascend910B3 --framework=0", "Ascend$(id)", "Ascend910B3\n--output=/", "`id`"]
HOSTILE_TIMEOUTS = ["nan", "inf", "-1", "0", "1e400", "$(sleep 100)", "10;rm -rf /", "`id`", "0x10", "--output=/"]
HOSTILE_PROGRAMS = ["python3; touch PWNED", "$(touch PWNED)", "`touch PWNED`", "/bin/sh -c id", "no-such-tool-xyz"]


# ----- a sandbox with planted markers ---------------------------------------------------------------
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
        ("root", "/"),
        ("home", str(home)),
        ("repo root", str(repo)),
        ("repo parent", str(sandbox)),
        ("dotdot", ".."),
        ("dot", "."),
        ("mode folder", "01_cmdline"),
        ("mode/..", "01_cmdline/.."),
        ("unmarked", "01_cmdline/foreign"),
        ("symlink", "01_cmdline/link_out"),
        ("through symlink", "01_cmdline/link_parent/sub"),
        ("other mode", "04_pyTorch/prof_out"),
        ("outside", str(sandbox / "outside")),
        ("climb", "01_cmdline/prof_out/../../04_pyTorch/prof_out"),
        ("tmp", "/tmp"),
        ("a file", "01_cmdline/run.sh"),
        ("the marker", "01_cmdline/prof_out/.msprof_lab"),
        ("option", "--output=/"),
        ("tilde", "~"),
        ("env var", "$HOME"),
        ("absolute mode", str(mode)),
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
    target = {
        "root": Path("/"),
        "home": sandbox / "home",
        "repo root": sandbox / "lab",
        "repo parent": sandbox,
        "cwd": sandbox / "lab",
    }[name]
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


# ----- allow-lists: RUN_MODE, SOC_VERSION, timeouts, programs -------------------------------------------
@hostile
@pytest.mark.parametrize("run_mode", HOSTILE_RUN_MODES, ids=[repr(v) for v in HOSTILE_RUN_MODES])
def test_ascendc_refuses_hostile_run_modes(run_mode: str) -> None:
    with pytest.raises(LabError, match="is not one of portable, npu"):
        import_module("common.modes.ascendc.build_kernel").choose_run_mode(Backend("portable", "test"), run_mode)


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


@pytest.mark.parametrize("bad", ["echo hi; touch PWNED", b"echo", [], ["echo", None], ("echo", 3)])
def test_commands_must_be_argv_lists(bad) -> None:
    with pytest.raises(TypeError, match="argv list"):
        launcher.run_command(bad)


# ----- no shell anywhere in the lab's code ---------------------------------------------------------------
SHELL_CALLS = re.compile(r"shell\s*=\s*True|os\.system\(|os\.popen\(|getoutput\(|getstatusoutput\(|os\.exec\w*p\w*\(")


def lab_sources() -> list[Path]:
    files = [ROOT / "noxfile.py", *(ROOT / "common").rglob("*.py")]
    for mode in MODES:
        files += (ROOT / mode / "src").rglob("*.py")
    return sorted(files)


def test_no_shell_in_the_lab_code() -> None:
    offenders = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in lab_sources()
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if SHELL_CALLS.search(line)
    ]
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
