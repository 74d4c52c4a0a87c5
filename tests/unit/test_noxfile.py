"""noxfile.py's own logic, without running nox: the mode arguments, when agree follows, the environment builder."""

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
    """The attributes of a nox session that mode_args and ddp_args use."""

    def __init__(self, posargs: list[str], name: str = "pytorch", invoked_from: str | None = None) -> None:
        self.posargs = posargs
        self.name = name
        self.invoked_from = invoked_from or str(ROOT)

    def error(self, message: str) -> None:
        raise SystemExit(message)

    def skip(self, message: str) -> None:
        raise SystemExit(f"skipped: {message}")


def test_nox_mode_args_device_and_repeat(noxfile, monkeypatch) -> None:
    monkeypatch.delenv(noxfile.WORKLOAD_VAR, raising=False)
    assert noxfile.mode_args(_Session([])) == ("0", 1, None, None, False)
    assert noxfile.mode_args(_Session(["3", "--repeat", "5"])) == ("3", 5, None, None, False)
    assert noxfile.mode_args(_Session(["--repeat", "2"])) == ("0", 2, None, None, False)
    assert noxfile.mode_args(_Session(["1", "--threads", "2"])) == ("1", 1, None, 2, False)
    assert noxfile.mode_args(_Session(["--threads", "0"])).threads == 0  # 0: torch's default
    assert noxfile.mode_args(_Session(["0", "--train"])).train  # mode 04's training steps
    for bad, why in ((["--repeat"], "got ''"), (["0", "--repeat", "0"], "got '0'"), (["0", "1"], "not understood: 1"),
                     (["0", "--trains"], "not understood: --trains"), (["0", "--threads", "x"], "--threads takes 0..1024"),
                     (["0;rm -rf /"], "is not an integer in 0..63")):
        with pytest.raises(SystemExit, match=re.escape(why)):
            noxfile.mode_args(_Session(bad))


def test_nox_mode_args_workload_flag_and_variable(noxfile, monkeypatch, tmp_path: Path) -> None:
    monkeypatch.delenv(noxfile.WORKLOAD_VAR, raising=False)
    cnn = str((noxfile.ROOT / "workloads" / "cnn.py").resolve())
    # relative to the directory nox was started in, handed on as an absolute path; any position
    assert noxfile.mode_args(_Session(["1", "--workload", "workloads/cnn.py", "--repeat", "2"])) == \
        ("1", 2, cnn, None, False)
    assert noxfile.mode_args(_Session(["--workload=workloads/cnn.py"])) == ("0", 1, cnn, None, False)
    assert noxfile.mode_args(_Session(["--workload", "cnn.py"], invoked_from=str(ROOT / "workloads"))).workload == cnn
    mine = tmp_path / "my_model.py"
    mine.write_text("")
    assert noxfile.mode_args(_Session(["--workload", str(mine), "2"])).workload == str(mine.resolve())
    # the variable when no flag is given; the flag wins over it
    monkeypatch.setenv(noxfile.WORKLOAD_VAR, "workloads/transformer.py")
    assert noxfile.mode_args(_Session(["0"])).workload == str((noxfile.ROOT / "workloads/transformer.py").resolve())
    assert noxfile.mode_args(_Session(["0", "--workload", str(mine)])).workload == str(mine.resolve())
    assert noxfile.workload_args(None) == [] and noxfile.workload_args(cnn) == ["--workload", cnn]


@pytest.mark.parametrize(("args", "env", "why"), [
    (["0", "--workload"], None, "(--workload takes a file, got '')"),
    (["--workload", "--repeat", "2"], None, "(--workload takes a file, got '--repeat')"),
    (["--workload", "no_such_model.py"], None,
     f"workload file no_such_model.py (--workload, looked for {ROOT / 'no_such_model.py'}) does not exist — give "
     "the path of a Python file"),
    (["--workload", "workloads"], None, "workload file workloads (--workload, looked for"),
    (["0"], "gone.py", f"workload file gone.py (from $MSPROF_LAB_WORKLOAD, looked for {ROOT / 'gone.py'}) does not "
                       "exist"),
    (["0", "--workload", "workloads/cnn.py", "1"], None, "[--repeat N] [--workload FILE]"),
])
def test_nox_mode_args_refuse_a_bad_workload_with_one_line(noxfile, monkeypatch, args, env, why) -> None:
    monkeypatch.setattr(noxfile, "WORKLOAD_CHECKED", {})
    if env is None:
        monkeypatch.delenv(noxfile.WORKLOAD_VAR, raising=False)
    else:
        monkeypatch.setenv(noxfile.WORKLOAD_VAR, env)
    with pytest.raises(SystemExit) as stop:
        noxfile.mode_args(_Session(args))
    message = str(stop.value)
    assert why in message and "\n" not in message, message


def test_nox_ddp_args_take_a_workload(noxfile, monkeypatch) -> None:
    monkeypatch.delenv(noxfile.WORKLOAD_VAR, raising=False)
    cnn = str((noxfile.ROOT / "workloads" / "cnn.py").resolve())
    assert noxfile.ddp_args(_Session([], "ddp")) == ("2", None)
    assert noxfile.ddp_args(_Session(["4", "--workload", "workloads/cnn.py"], "ddp")) == ("4", cnn)
    for bad, why in ((["9"], "(nproc takes 1..8, got '9')"), (["2", "3"], "(not understood: 3)"),
                     (["2", "--workload", "nope.py"], "nope.py (--workload, looked for")):
        with pytest.raises(SystemExit, match=re.escape(why)):
            noxfile.ddp_args(_Session(bad, "ddp"))


class _Recorder(_Session):
    """A session that records the commands it would run instead of running them."""

    def __init__(self, posargs: list[str], name: str) -> None:
        super().__init__(posargs, name)
        self.ran: list[tuple[str, ...]] = []

    def run(self, *args: str, **kwargs) -> None:
        self.ran.append(args)

    def log(self, *args) -> None:
        pass


def test_every_mode_script_gets_the_workload_as_an_absolute_path(noxfile, monkeypatch) -> None:
    monkeypatch.delenv(noxfile.WORKLOAD_VAR, raising=False)
    monkeypatch.setattr(noxfile, "lab_python", lambda session: "lab-python")
    monkeypatch.setattr(noxfile, "check_workload", lambda *args: None)  # the workload check runs the model
    monkeypatch.setattr(noxfile, "queue_agree", lambda session: None)  # agree is not queued here
    cnn = str((noxfile.ROOT / "workloads" / "cnn.py").resolve())
    want = {
        "cmdline": [("bash", "01_cmdline/run.sh", "1", "--workload", cnn)],
        "ascendc": [("bash", "02_api_AscendC/build.sh"), ("bash", "02_api_AscendC/run.sh", "1", "--workload", cnn)],
        "pyacl": [("bash", "03_api_pyAcl/build_model.sh", "--workload", cnn),
                  ("bash", "03_api_pyAcl/run.sh", "1", "--workload", cnn)],
        "pytorch": [("bash", "04_pyTorch/run.sh", "1", "--workload", cnn)],
        "sweep": [("lab-python", "-m", "common.modes.pytorch.sweep", "--batch", "1,2", "--workload", cnn)],
        "ddp": [("bash", "04_pyTorch/run_ddp.sh", "1", "--cross-check", "--workload", cnn)],
    }
    args = {"sweep": ["--batch", "1,2", "--workload", "workloads/cnn.py"], "ddp": ["1", "--workload", "workloads/cnn.py"]}
    for name, commands in want.items():
        session = _Recorder(args.get(name, ["1", "--workload", "workloads/cnn.py"]), name)
        getattr(noxfile, name)(session)
        assert session.ran == commands, name
    # ecosystem: a fresh 04 run of the workload first, then msprof-analyze with the remaining arguments
    session = _Recorder(["--workload", "workloads/cnn.py", "--output", "x"], "ecosystem")
    noxfile.ecosystem(session)
    assert session.ran == [("bash", "04_pyTorch/run.sh", "0", "--workload", cnn),
                           ("lab-python", "-m", "common.cli.ecosystem", "--output", "x")]
    # without a flag, the variable's file; without either, nothing is added (TinyMLP)
    monkeypatch.setenv(noxfile.WORKLOAD_VAR, "workloads/transformer.py")
    session = _Recorder(["0"], "pytorch")
    noxfile.pytorch(session)
    assert session.ran == [("bash", "04_pyTorch/run.sh", "0", "--workload",
                            str((noxfile.ROOT / "workloads" / "transformer.py").resolve()))]
    monkeypatch.delenv(noxfile.WORKLOAD_VAR)
    session = _Recorder(["0", "--repeat", "1"], "pytorch")
    noxfile.pytorch(session)
    assert session.ran == [("bash", "04_pyTorch/run.sh", "0")]


def test_agree_follows_once_all_four_modes_started_passed_or_failed(noxfile, monkeypatch) -> None:
    queued = []

    class _Notifying(_Recorder):
        def notify(self, name: str, posargs=None) -> None:
            queued.append(name)

        def run(self, *args: str, **kwargs) -> None:
            if self.name == "pyacl" and args[1].endswith("run.sh"):
                raise RuntimeError("mode 03 failed")  # as nox's session.run raises for a failed command

    monkeypatch.delenv(noxfile.WORKLOAD_VAR, raising=False)
    monkeypatch.setattr(noxfile, "lab_python", lambda session: "lab-python")
    monkeypatch.setattr(noxfile, "check_workload", lambda *args: None)
    monkeypatch.setattr(noxfile, "MODES_STARTED", set())
    for name in ("cmdline", "ascendc", "pyacl", "pytorch"):
        assert not queued  # not before the last mode has started
        try:
            getattr(noxfile, name)(_Notifying(["0"], name))
        except RuntimeError:
            assert name == "pyacl"
    assert queued == ["agree"]


def test_a_refused_workload_stops_the_first_mode_and_skips_the_others(noxfile, monkeypatch, tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\ndef build_model():\n    return torch.nn.Linear(4, 4)\n"
                   "def make_input():\n    return torch.zeros(2, 5)\n")
    import sys

    monkeypatch.setattr(noxfile, "WORKLOAD_CHECKED", {})
    with pytest.raises(SystemExit) as first:
        noxfile.check_workload(_Session(["0"], "cmdline"), sys.executable, str(bad), False)
    assert str(first.value).startswith(f"workload file {bad}: the model rejects the input") and "\n" not in str(first.value)
    with pytest.raises(SystemExit, match="skipped: not run: the workload was refused above"):
        noxfile.check_workload(_Session(["0"], "pytorch"), sys.executable, str(bad), False)


def test_a_missing_workload_file_is_said_once_and_the_other_modes_skipped(noxfile, monkeypatch) -> None:
    monkeypatch.setattr(noxfile, "WORKLOAD_CHECKED", {})
    with pytest.raises(SystemExit) as first:
        noxfile.mode_args(_Session(["0", "--workload", "my_model.py"], "cmdline"))
    assert "workload file my_model.py (--workload, looked for" in str(first.value)
    with pytest.raises(SystemExit, match="skipped: not run: the workload was refused above"):
        noxfile.mode_args(_Session(["0", "--workload", "my_model.py"], "pytorch"))


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


def test_the_isolated_modules_exist_and_the_rest_share_one_group() -> None:
    """nox -s tests runs the suite on two xdist workers: each ISOLATED entry must be a test module here (a stale name
    would quietly move nothing), and every other module runs in the one "checkout" group, one test after the other."""
    import conftest

    tests = Path(conftest.__file__).resolve().parent
    assert all((tests / name).is_file() for name in conftest.ISOLATED), sorted(
        n for n in conftest.ISOLATED if not (tests / n).is_file())
    groups = {conftest.xdist_group_of(m) for m in sorted(tests.glob("*/test_*.py"))}
    assert conftest.CHECKOUT_GROUP in groups and len(groups) == len(conftest.ISOLATED) + 1
    assert conftest.xdist_group_of(tests / "modes" / "test_agree.py") == "checkout"  # runs every mode in the checkout
    assert conftest.xdist_group_of(tests / "modes" / "test_npu_dryrun.py") == "modes/test_npu_dryrun.py"
