"""``nox -s ascendc -- <dev> --kernel pyasc``: the choice reaches mode 02's run.sh, and only that session takes it."""

from __future__ import annotations

import pytest


class _Session:
    def __init__(self, posargs: list[str], name: str = "ascendc") -> None:
        self.posargs, self.name, self.invoked_from = posargs, name, None

    def error(self, message: str) -> None:
        raise SystemExit(message)


@pytest.fixture(scope="module")
def noxfile():
    pytest.importorskip("nox")
    import noxfile

    return noxfile


def test_kernel_choice_for_ascendc(noxfile):
    session = _Session(["1", "--kernel", "pyasc"])
    assert noxfile.kernel_args(session) == ["--kernel", "pyasc"]
    assert noxfile.mode_args(session).device == "1"
    assert noxfile.kernel_args(_Session(["0"])) == []


@pytest.mark.parametrize("posargs, name", [(["0", "--kernel", "rust"], "ascendc"), (["0", "--kernel"], "ascendc"),
                                           (["0", "--kernel", "pyasc"], "pytorch")])
def test_kernel_choice_refused_in_one_line(noxfile, posargs, name):
    with pytest.raises(SystemExit, match="Usage: nox -s"):
        session = _Session(posargs, name)
        noxfile.kernel_args(session) if name == "ascendc" else noxfile.mode_args(session)
