"""noxfile.py's own logic, without running nox: the mode arguments, when agree follows, the environment builder."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from common import environments
from common.errors import LabError


@pytest.fixture(scope="module")
def noxfile():
    import noxfile

    return noxfile


class _Session:
    """The two attributes of a nox session that mode_args uses."""

    name = "pytorch"

    def __init__(self, posargs: list[str]) -> None:
        self.posargs = posargs

    def error(self, message: str) -> None:
        raise SystemExit(message)


def test_nox_mode_args_device_and_repeat(noxfile) -> None:
    assert noxfile.mode_args(_Session([])) == ("0", 1)
    assert noxfile.mode_args(_Session(["3", "--repeat", "5"])) == ("3", 5)
    assert noxfile.mode_args(_Session(["--repeat", "2"])) == ("0", 2)
    for bad, why in ((["--repeat"], "got ''"), (["0", "--repeat", "0"], "got '0'"), (["0", "1"], "[--repeat N]"),
                     (["0;rm -rf /"], "is not an integer in 0..63")):
        with pytest.raises(SystemExit, match=re.escape(why)):
            noxfile.mode_args(_Session(bad))


def test_agree_follows_only_when_all_four_modes_ran_in_this_invocation(noxfile, tmp_path: Path) -> None:
    def write(folder: str, run_id: str, completed: bool = True) -> None:
        out = tmp_path / folder / "prof_out"
        out.mkdir(parents=True, exist_ok=True)
        (out / "run_info.json").write_text(json.dumps(
            {"backend": "portable", "mode": folder, "completed": completed, "run_id": run_id}))

    assert noxfile.modes_of_this_run(tmp_path, "this") == set()
    for folder in noxfile.MODE_DIRS.values():
        write(folder, "this")
    assert noxfile.modes_of_this_run(tmp_path, "this") == set(noxfile.MODE_DIRS)
    write("01_cmdline", "an-older-run")
    assert noxfile.modes_of_this_run(tmp_path, "this") == {"ascendc", "pyacl", "pytorch"}
    write("01_cmdline", "this", completed=False)
    assert "cmdline" not in noxfile.modes_of_this_run(tmp_path, "this")


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
