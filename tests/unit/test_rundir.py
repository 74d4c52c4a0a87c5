"""Output directories: only the lab's own are ever deleted."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.errors import LabError
from common.formats import rundir


def test_unmarked_directory_is_refused_and_kept(tmp_path: Path) -> None:
    target = tmp_path / "prof_out"
    target.mkdir()
    (target / "precious.txt").write_text("keep me")
    with pytest.raises(LabError, match="was not made by msprof lab"):
        rundir.prepare_output_dir(target)
    assert (target / "precious.txt").read_text() == "keep me"


def test_marked_directory_is_recreated_empty(tmp_path: Path) -> None:
    target = rundir.prepare_output_dir(tmp_path / "prof_out")
    (target / "old.csv").write_text("old")
    again = rundir.prepare_output_dir(target)
    assert sorted(p.name for p in again.iterdir()) == [rundir.MARKER]


def test_symlink_and_file_are_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(LabError, match="symlink"):
        rundir.prepare_output_dir(tmp_path / "link")
    (tmp_path / "file").write_text("x")
    with pytest.raises(LabError, match="not a directory"):
        rundir.prepare_output_dir(tmp_path / "file")


@pytest.mark.parametrize("given", ["/", "/tmp/elsewhere", "..", "../04_pyTorch/prof_out", "."])
def test_output_outside_the_mode_folder_is_refused(tmp_path: Path, given: str, monkeypatch: pytest.MonkeyPatch) -> None:
    mode = tmp_path / "01_cmdline"
    mode.mkdir()
    monkeypatch.chdir(mode)
    with pytest.raises(LabError, match="is not inside"):
        rundir.output_path(mode, given)


def test_output_default_and_inside(tmp_path: Path) -> None:
    assert rundir.output_path(tmp_path, None) == tmp_path.resolve() / "prof_out"
    assert rundir.output_path(tmp_path, str(tmp_path / "mine")) == tmp_path.resolve() / "mine"


def test_run_info_start_and_finish(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rundir, "_git_commit", lambda: "0" * 40)  # unit tests start no process (git rev-parse)
    out = rundir.prepare_output_dir(tmp_path / "out")
    info = rundir.start_run(out, mode="cmdline", backend="portable", device=0, command=["x"])
    assert rundir.read_run_info(out)["completed"] is False
    rundir.finish_run(out, info, exit_code=0, completed=True)
    saved = rundir.read_run_info(out)
    assert saved["completed"] is True and saved["versions"]["python"] and saved["end"]
