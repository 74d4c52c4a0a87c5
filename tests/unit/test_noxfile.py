"""noxfile.py's own logic, without running nox: what each session hands on, when agree follows, the environment builder."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

from common import environments
from common.errors import LabError


@pytest.fixture(scope="module")
def noxfile():
    import noxfile

    return noxfile


class _Session:
    """What noxfile.py's sessions use of a nox session, recording the commands instead of running them."""

    def __init__(self, posargs: list[str], name: str = "pytorch", invoked_from: str | None = None,
                 fail: bool = False) -> None:
        self.posargs, self.name = posargs, name
        self.invoked_from = invoked_from or str(ROOT)
        self.ran: list[tuple[tuple[str, ...], str]] = []
        self.queued: list[tuple[str, list[str]]] = []
        self.fail, self.cwd = fail, None

    def chdir(self, folder: str):
        import contextlib

        @contextlib.contextmanager
        def inside():
            self.cwd = folder
            yield
            self.cwd = None
        return inside()

    def run(self, *args: str, **kwargs) -> None:
        self.ran.append((args, self.cwd))
        if self.fail:
            raise RuntimeError("the command failed")  # as nox's session.run raises for a failed command

    def notify(self, name: str, posargs=None) -> None:
        self.queued.append((name, posargs))

    def log(self, *args) -> None:
        pass


@pytest.mark.parametrize("name", ["cmdline", "ascendc", "pyacl", "pytorch", "ddp", "ecosystem", "workload"])
def test_a_session_hands_its_arguments_on_unchanged_from_where_nox_started(noxfile, monkeypatch, name) -> None:
    monkeypatch.setattr(noxfile, "lab_python", lambda session: "lab-python")
    args = ["1", "--workload", "my_model.py", "--repeat", "2"]
    session = _Session(args, name, invoked_from="/home/me/project")
    getattr(noxfile, name)(session)
    assert session.ran == [(("lab-python", "-m", "common.modes.sessions", name, *args), "/home/me/project")]


def test_the_mode_sessions_require_the_workload_check_and_queue_agree_passed_or_failed(noxfile, monkeypatch) -> None:
    import nox

    monkeypatch.setattr(noxfile, "lab_python", lambda session: "lab-python")
    registry = nox.registry.get()
    for name in ("cmdline", "ascendc", "pyacl", "pytorch"):
        assert registry[name].requires == ["workload"], name
        session = _Session(["0"], name, fail=name == "pyacl")
        try:
            getattr(noxfile, name)(session)
        except RuntimeError:
            assert name == "pyacl"
        assert session.queued == [("agree", ["--run-id", noxfile.RUN_ID])], name
    assert not registry["agree"].requires and not registry["workload"].requires  # `nox -s agree` alone runs no mode


def test_the_other_sessions_pass_their_arguments_through(noxfile, monkeypatch) -> None:
    monkeypatch.setattr(noxfile, "lab_python", lambda session: "lab-python")
    want = {"agree": ("-m", "common.modes.sessions", "agree"), "sweep": ("-m", "common.modes.pytorch.sweep"),
            "precision": ("-m", "common", "precision"), "corpus": ("-m", "tests.corpus"), "zoo": ("-m", "tests.zoo"),
            "npu_dryrun": ("-m", "tests.npu_dryrun")}
    for name, command in want.items():
        session = _Session(["3", "--workload", "x.py"], name)
        getattr(noxfile, name)(session)
        assert session.ran == [(("lab-python", *command, "3", "--workload", "x.py"), str(ROOT))], name


def test_the_noxfile_keeps_no_state_between_sessions(noxfile) -> None:
    """Module-level names are sessions, helpers and constants: no container a session could fill for a later one."""
    state = [n for n, v in vars(noxfile).items() if isinstance(v, (dict, set)) and not n.startswith("__")]
    assert state == [], state
    assert "global " not in Path(noxfile.__file__).read_text()


def test_group_requirements_resolve_included_groups(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\n\n[dependency-groups]\nlab = ["numpy>=1.24"]\n'
                         'portable = [{ include-group = "lab" }, "torch==2.13.0"]\ndev = ["pytest>=8"]\n')
    got = environments.group_requirements(["portable", "dev"], pyproject)
    assert got == ["numpy>=1.24", "torch==2.13.0", "pytest>=8"]
    with pytest.raises(LabError, match="no dependency group 'ecosystem'"):
        environments.group_requirements(["ecosystem"], pyproject)
    assert environments.group_requirements(["ecosystem"]) == ["msprof-analyze==26.2.0"]  # the repository's own


def test_an_environment_is_rebuilt_only_when_its_groups_change(tmp_path: Path, monkeypatch) -> None:
    venv = tmp_path / "env"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    (venv / "bin" / "tool").write_text("")
    (venv / environments.STAMP).write_text(environments.stamp_of(["ecosystem"]))
    built = []
    monkeypatch.setattr(environments.subprocess, "run", lambda argv, **kw: built.append(argv))
    assert environments.ensure_environment(venv, ["ecosystem"], expect=("tool",)) == venv / "bin" / "python"
    assert built == []  # up to date: nothing ran
    assert environments.stamp_of(["ecosystem"]) != environments.stamp_of(["ecosystem"], system_site_packages=True)
    assert environments.stamp_of(["ecosystem"]) != environments.stamp_of(["bench"])


def test_a_build_byte_compiles_on_every_core_and_only_pip_failures_stop_it(tmp_path: Path, monkeypatch) -> None:
    venv = tmp_path / "env"
    ran, fail = [], {"byte-compile"}

    def fake_run(argv, **kw):
        ran.append(argv)
        (venv / "bin").mkdir(parents=True, exist_ok=True)
        (venv / "bin" / "python").write_text("")
        step = "byte-compile" if "compileall" in argv else "pip install" if "--group" in argv else "other"
        return subprocess.CompletedProcess(argv, 1 if step in fail else 0, "", "Error: x")

    monkeypatch.setattr(environments.subprocess, "run", fake_run)
    environments.ensure_environment(venv, ["ecosystem"], log=lambda *_: None)  # compileall's errors: no failure
    make, pip, install, compile_ = ran
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
    fail.add("pip install")
    with pytest.raises(LabError, match="pip install exited 1"):
        environments.ensure_environment(venv, ["ecosystem"], log=lambda *_: None)


def test_without_ensurepips_wheel_the_venv_brings_pip_and_upgrades_it(tmp_path: Path, monkeypatch) -> None:
    """Some distributions take ensurepip's wheel out: then venv installs its pip, which is upgraded."""
    venv, ran = tmp_path / "env", []

    def fake_run(argv, **kw):
        ran.append(argv)
        (venv / "bin").mkdir(parents=True, exist_ok=True)
        (venv / "bin" / "python").write_text("")
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(environments.subprocess, "run", fake_run)
    monkeypatch.setattr(environments, "bundled_pip", lambda: None)
    environments.ensure_environment(venv, ["ecosystem"], log=lambda *_: None)
    assert "--without-pip" not in ran[0]
    assert ran[1][1:] == ["-m", "pip", "install", "--quiet", "--upgrade", environments.PIP]
    assert [argv[1:3] for argv in ran[2:]] == [["-m", "pip"], ["-m", "compileall"]]


@pytest.mark.parametrize(("path", "left_out"), [
    ("pandas/tests/frame/test_api.py", True), ("numpy/_core/tests/test_umath.py", True), ("sympy/core/tests/x.py", True),
    ("torch/testing/_internal/common_utils.py", False), ("torch/nn/modules/linear.py", False),
    ("_pytest/python.py", False), ("torch/utils/data/test.py", False),
])
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


def test_tests_run_on_tiny_mlp_unless_they_set_the_workload(monkeypatch) -> None:
    """tests/conftest.py clears $MSPROF_LAB_WORKLOAD for the session: `MSPROF_LAB_WORKLOAD=... nox -s tests` passes."""
    import os

    from common.workload import ENV_VAR, load_workload, tiny_mlp

    assert ENV_VAR not in os.environ
    assert load_workload() is tiny_mlp()
    monkeypatch.setenv(ENV_VAR, str(ROOT / "workloads" / "cnn.py"))
    assert load_workload().name == "cnn"


def test_the_tests_run_a_private_copy_of_the_lab() -> None:
    """tests/conftest.py: this process runs the lab from its own copy, with the code of the checkout, never in it."""
    import helpers

    import common

    assert helpers.ROOT != helpers.CHECKOUT and ROOT == helpers.ROOT
    assert Path(common.__file__).resolve().parent == ROOT / "common"
    for name in ("common/modes/sessions.py", "04_pyTorch/src/model_with_profiler.py", "noxfile.py", "README.md"):
        assert (ROOT / name).read_bytes() == (helpers.CHECKOUT / name).read_bytes(), name
    from common.analyze.cross_mode import MODES

    assert helpers.MODES == tuple(spec.folder for spec in MODES)  # the copy's list of mode folders is the lab's


def test_two_processes_wanting_one_environment_build_it_once(tmp_path: Path, monkeypatch) -> None:
    """Two test workers (or two nox sessions) needing .nox/ecosystem at once: the second waits for the first's build."""
    import threading
    import time

    venv, builds = tmp_path / "env", []

    def fake_run(argv, **kw):
        if "venv" in argv:
            builds.append(argv)
            time.sleep(0.3)  # long enough for the other one to arrive while this one builds
        (venv / "bin").mkdir(parents=True, exist_ok=True)
        (venv / "bin" / "python").write_text("")
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(environments.subprocess, "run", fake_run)
    pythons = []
    threads = [threading.Thread(target=lambda: pythons.append(
        environments.ensure_environment(venv, ["ecosystem"], log=lambda *_: None))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(builds) == 1 and pythons == [venv / "bin" / "python"] * 2


def test_an_environment_whose_scripts_name_a_gone_interpreter_is_rebuilt_where_it_really_is(tmp_path: Path,
                                                                                              monkeypatch) -> None:
    """pip writes a script's #! as the path it was given: an environment reached through a symlink that later went
    (a test's private copy of the lab) would be left with scripts that cannot start."""
    real = tmp_path / "checkout" / ".nox"
    real.mkdir(parents=True)
    (tmp_path / "copy").mkdir()
    (tmp_path / "copy" / ".nox").symlink_to(real, target_is_directory=True)
    venv = tmp_path / "copy" / ".nox" / "env"
    (real / "env" / "bin").mkdir(parents=True)
    (real / "env" / "bin" / "python").write_text("")
    (real / "env" / "bin" / "tool").write_text("#!/gone/away/bin/python\nimport sys\n")
    (real / "env" / environments.STAMP).write_text(environments.stamp_of(["ecosystem"]))
    built = []

    def fake_run(argv, **kw):
        built.append(argv)
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(environments.subprocess, "run", fake_run)
    python = environments.ensure_environment(venv, ["ecosystem"], expect=("tool",), log=lambda *_: None)
    assert built and python == real.resolve() / "env" / "bin" / "python"
    assert str(real.resolve() / "env") in built[0]  # venv is made at the real path, never through the link


def test_no_test_module_runs_the_checkout_its_file_sits_in() -> None:
    """A test module that takes the repository from its own path would run (and write into) the checkout, beside
    the other worker's tests: the lab a test runs is helpers.ROOT."""
    import helpers

    pattern = re.compile(r"Path\(__file__\)\.resolve\(\)\.(parents\[2\]|parent\.parent\.parent)")
    offenders = [p.name for folder in ("unit", "modes") for p in sorted((helpers.CHECKOUT / "tests" / folder).glob(
        "test_*.py")) if pattern.search(p.read_text())]
    assert offenders == [], offenders
