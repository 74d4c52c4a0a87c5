"""common/environments.py, the one builder of the lab's environments (.nox/lab-portable, .nox/ecosystem, a
workload's REQUIRES): rebuilt only when what it holds changes, pip and byte-compiling as a build runs them, one
build for two processes, built at its real path, stamped only once it verifies. The commands are recorded by a
stand-in for subprocess.run, never run."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import ROOT

from common import environments
from common.errors import LabError


class FakeRun:
    """environments' subprocess.run: records each argv and exits 0, or 1 for a step in ``fail``; a venv step
    makes ``<venv>/bin/python`` (after ``venv_delay_s``, for a build another process arrives during)."""

    def __init__(self, venv: Path) -> None:
        self.venv, self.ran, self.fail, self.venv_delay_s = venv, [], set(), 0.0

    def __call__(self, argv, **kw) -> subprocess.CompletedProcess:
        self.ran.append(argv)
        if "venv" in argv:
            time.sleep(self.venv_delay_s)
            (self.venv / "bin").mkdir(parents=True, exist_ok=True)
            (self.venv / "bin" / "python").write_text("")
        step = "byte-compile" if "compileall" in argv else "pip install" if "--group" in argv else "other"
        return subprocess.CompletedProcess(argv, 1 if step in self.fail else 0, "", "Error: x")

    def venvs(self) -> list[list[str]]:
        return [argv for argv in self.ran if "venv" in argv]


@pytest.fixture
def fake_run(tmp_path: Path, monkeypatch) -> FakeRun:
    fake = FakeRun(tmp_path / "env")
    monkeypatch.setattr(environments.subprocess, "run", fake)
    return fake


def quiet(*_) -> None:
    """The builder's progress lines, not shown."""


def built_env(venv: Path, stamp: str, *scripts: tuple[str, str]) -> None:
    """An environment as a build leaves it: bin/python, the scripts (name, text), the stamp."""
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    for name, text in scripts:
        (venv / "bin" / name).write_text(text)
    (venv / environments.STAMP).write_text(stamp)


def test_group_requirements_resolve_included_groups(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[project]\nname = "x"\n\n[dependency-groups]\nlab = ["numpy>=1.24"]\n'
        'portable = [{ include-group = "lab" }, "torch==2.13.0"]\ndev = ["pytest>=8"]\n'
    )
    got = environments.group_requirements(["portable", "dev"], pyproject)
    assert got == ["numpy>=1.24", "torch==2.13.0", "pytest>=8"]
    with pytest.raises(LabError, match="no dependency group 'ecosystem'"):
        environments.group_requirements(["ecosystem"], pyproject)
    assert environments.group_requirements(["ecosystem"]) == ["msprof-analyze==26.2.0"]  # the repository's own


def test_an_environment_is_rebuilt_only_when_its_groups_change(fake_run: FakeRun) -> None:
    venv = fake_run.venv
    built_env(venv, environments.stamp_of(["ecosystem"]), ("tool", ""))
    assert environments.ensure_environment(venv, ["ecosystem"], expect=("tool",)) == venv / "bin" / "python"
    assert fake_run.ran == []  # up to date: nothing ran
    assert environments.stamp_of(["ecosystem"]) != environments.stamp_of(["ecosystem"], system_site_packages=True)
    assert environments.stamp_of(["ecosystem"]) != environments.stamp_of(["bench"])


def test_a_build_byte_compiles_on_every_core_and_only_pip_failures_stop_it(fake_run: FakeRun) -> None:
    venv = fake_run.venv
    fake_run.fail.add("byte-compile")
    environments.ensure_environment(venv, ["ecosystem"], log=quiet)  # compileall's errors: no failure
    make, pip, install, compile_ = fake_run.ran
    wheel = environments.bundled_pip()
    if wheel:  # pip installed once, from ensurepip's wheel, into a venv made without it
        assert "--without-pip" in make and pip[1:3] == [str(wheel / "pip"), "install"] and environments.PIP in pip
    else:
        assert "--without-pip" not in make
        assert pip[1:] == ["-m", "pip", "install", "--quiet", "--upgrade", environments.PIP]
    assert "--no-compile" in install
    assert compile_[-6:] == ["-qq", "-j", "0", "-x", environments.PACKAGE_TESTS, str(venv / "lib")]
    assert (venv / environments.STAMP).read_text() == environments.stamp_of(["ecosystem"])
    (venv / environments.STAMP).unlink()
    fake_run.fail.add("pip install")
    with pytest.raises(LabError, match="pip install exited 1"):
        environments.ensure_environment(venv, ["ecosystem"], log=quiet)


def test_without_ensurepips_wheel_the_venv_brings_pip_and_upgrades_it(fake_run: FakeRun, monkeypatch) -> None:
    """Some distributions take ensurepip's wheel out: then venv installs its pip, which is upgraded."""
    monkeypatch.setattr(environments, "bundled_pip", lambda: None)
    environments.ensure_environment(fake_run.venv, ["ecosystem"], log=quiet)
    ran = fake_run.ran
    assert "--without-pip" not in ran[0]
    assert ran[1][1:] == ["-m", "pip", "install", "--quiet", "--upgrade", environments.PIP]
    assert [argv[1:3] for argv in ran[2:]] == [["-m", "pip"], ["-m", "compileall"]]


@pytest.mark.parametrize(
    ("path", "left_out"),
    [
        ("pandas/tests/frame/test_api.py", True),
        ("numpy/_core/tests/test_umath.py", True),
        ("sympy/core/tests/x.py", True),
        ("torch/testing/_internal/common_utils.py", False),
        ("torch/nn/modules/linear.py", False),
        ("_pytest/python.py", False),
        ("torch/utils/data/test.py", False),
    ],
)
def test_the_build_leaves_out_only_the_packages_test_folders(path: str, left_out: bool) -> None:
    full = f"/x/.nox/lab-portable/lib/python3.11/site-packages/{path}"
    assert bool(re.search(environments.PACKAGE_TESTS, full)) is left_out


def test_the_labs_code_is_byte_compiled_even_where_python_writes_no_bytecode(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # as PYTHONDONTWRITEBYTECODE=1 does
    assert all((ROOT / folder).is_dir() for folder in environments.LAB_CODE)  # the list names real folders
    module = tmp_path / "common" / "some_lesson.py"
    module.parent.mkdir()
    module.write_text("X = 1\n")
    environments.compile_lab_code(tmp_path)
    cached = Path(importlib.util.cache_from_source(str(module)))
    assert cached.is_file()
    module.write_text("X = 2  # edited\n")
    stamp = cached.stat().st_mtime_ns
    os.utime(module, ns=(stamp + 10**9, stamp + 10**9))
    environments.compile_lab_code(tmp_path)
    assert cached.stat().st_mtime_ns > stamp  # an edited module is compiled again


def test_two_processes_wanting_one_environment_build_it_once(fake_run: FakeRun) -> None:
    """Two test workers (or two nox sessions) needing .nox/ecosystem at once: the second waits for the first's build."""
    fake_run.venv_delay_s = 0.3  # long enough for the other one to arrive while this one builds
    pythons = []
    threads = [
        threading.Thread(
            target=lambda: pythons.append(environments.ensure_environment(fake_run.venv, ["ecosystem"], log=quiet))
        )
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(fake_run.venvs()) == 1 and pythons == [fake_run.venv / "bin" / "python"] * 2


def test_an_environment_whose_scripts_name_a_gone_interpreter_is_rebuilt_where_it_really_is(
    tmp_path: Path, fake_run: FakeRun
) -> None:
    """pip writes a script's #! as the path it was given: an environment reached through a symlink that later went
    (a test's private copy of the lab) would be left with scripts that cannot start."""
    real = tmp_path / "checkout" / ".nox"
    real.mkdir(parents=True)
    (tmp_path / "copy").mkdir()
    (tmp_path / "copy" / ".nox").symlink_to(real, target_is_directory=True)
    built_env(real / "env", environments.stamp_of(["ecosystem"]), ("tool", "#!/gone/away/bin/python\nimport sys\n"))
    fake_run.venv = tmp_path / "copy" / ".nox" / "env"
    python = environments.ensure_environment(fake_run.venv, ["ecosystem"], expect=("tool",), log=quiet)
    assert fake_run.ran and python == real.resolve() / "env" / "bin" / "python"
    assert str(real.resolve() / "env") in fake_run.ran[0]  # venv is made at the real path, never through the link


def test_the_requirements_join_the_stamp_and_the_install(fake_run: FakeRun) -> None:
    plain = environments.stamp_of(["portable"])
    assert environments.stamp_of(["portable"], requirements=()) == plain  # older stamps still hold
    assert environments.stamp_of(["portable"], requirements=("timm",)) != plain
    assert environments.stamp_of(["portable"], requirements=("timm", "torch===2.13.0")) != environments.stamp_of(
        ["portable"], requirements=("timm", "torch===2.13.0+cpu")
    )
    venv, verified = fake_run.venv, []
    environments.ensure_environment(
        venv, ["ecosystem"], requirements=("timm", "torch===2.13.0+cpu"), verify=verified.append, log=quiet
    )
    install = next(a for a in fake_run.ran if "--group" in a)
    assert install[-4:] == ["--group", "ecosystem", "timm", "torch===2.13.0+cpu"]
    assert verified == [venv.resolve() / "bin" / "python"]
    assert environments.is_built(venv, ["ecosystem"], requirements=("timm", "torch===2.13.0+cpu"))
    assert not environments.is_built(venv, ["ecosystem"], requirements=("timm",))


def test_a_kept_environment_is_installed_into_not_cleared(fake_run: FakeRun) -> None:
    venv = fake_run.venv
    built_env(venv, "an older build")
    environments.ensure_environment(venv, ["ecosystem"], requirements=("timm",), keep=True, log=quiet)
    assert fake_run.venvs() == [] and any("--group" in a for a in fake_run.ran)
    fake_run.ran.clear()
    environments.ensure_environment(venv, ["ecosystem"], requirements=("six",), log=quiet)
    assert any("--clear" in a for a in fake_run.ran)


def test_a_failed_verify_leaves_the_environment_unstamped(fake_run: FakeRun) -> None:
    venv = fake_run.venv

    def refuse(python):
        raise LabError("no import")

    with pytest.raises(LabError, match="no import"):
        environments.ensure_environment(venv, ["ecosystem"], requirements=("timm",), verify=refuse, log=quiet)
    assert not (venv / environments.STAMP).exists()
    (venv / environments.STAMP).write_text(environments.stamp_of(["ecosystem"], requirements=("six",)))
    with pytest.raises(LabError, match="no import"):  # kept on top of a built one: that one's stamp goes first
        environments.ensure_environment(
            venv, ["ecosystem"], requirements=("timm",), verify=refuse, keep=True, log=quiet
        )
