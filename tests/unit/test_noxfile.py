"""noxfile.py's own logic, without running nox: what each session hands on, when agree follows, the tests' private lab
(the environment builder it calls: test_environments.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import ROOT


@pytest.fixture(scope="module")
def noxfile():
    import noxfile

    return noxfile


class _Session:
    """What noxfile.py's sessions use of a nox session, recording the commands instead of running them."""

    def __init__(
        self, posargs: list[str], name: str = "pytorch", invoked_from: str | None = None, fail: bool = False
    ) -> None:
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
    assert session.ran == [(("lab-python", "-m", "common.cli.sessions", name, *args), "/home/me/project")]


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
    want = {
        "agree": ("-m", "common.cli.sessions", "agree"),
        "sweep": ("-m", "common.modes.pytorch.sweep"),
        "precision": ("-m", "common", "precision"),
        "corpus": ("-m", "tests.corpus"),
        "zoo": ("-m", "tests.zoo"),
        "npu_dryrun": ("-m", "tests.npu_dryrun"),
        "fix": ("-m", "common.modes.fix"),
    }
    for name, command in want.items():
        session = _Session(["3", "--workload", "x.py"], name)
        getattr(noxfile, name)(session)
        assert session.ran == [(("lab-python", *command, "3", "--workload", "x.py"), str(ROOT))], name


def test_the_noxfile_keeps_no_state_between_sessions(noxfile) -> None:
    """Module-level names are sessions, helpers and constants: no container a session could fill for a later one."""
    state = [n for n, v in vars(noxfile).items() if isinstance(v, (dict, set)) and not n.startswith("__")]
    assert state == [], state
    assert "global " not in Path(noxfile.__file__).read_text()


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
    for name in ("common/cli/sessions.py", "04_pyTorch/src/model_with_profiler.py", "noxfile.py", "README.md"):
        assert (ROOT / name).read_bytes() == (helpers.CHECKOUT / name).read_bytes(), name
    from common.analyze.cross_mode import MODES

    assert helpers.MODES == tuple(spec.folder for spec in MODES)  # the copy's list of mode folders is the lab's


def test_no_test_module_runs_the_checkout_its_file_sits_in() -> None:
    """A test module that takes the repository from its own path would run (and write into) the checkout, beside
    the other worker's tests: the lab a test runs is helpers.ROOT."""
    import helpers

    pattern = re.compile(r"Path\(__file__\)\.resolve\(\)\.(parents\[2\]|parent\.parent\.parent)")
    offenders = [
        p.name
        for folder in ("unit", "modes")
        for p in sorted((helpers.CHECKOUT / "tests" / folder).glob("test_*.py"))
        if pattern.search(p.read_text())
    ]
    assert offenders == [], offenders
