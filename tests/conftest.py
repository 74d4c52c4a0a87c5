"""Fixtures shared by tests/unit and tests/modes (helpers that are not fixtures live in helpers.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import FIXTURES

from common.backend import BACKEND_VAR, detect


@pytest.fixture
def npu_fixtures(tmp_path: Path) -> Path:
    """A writable copy of the real NPU captures (the report writes report.md beside them)."""
    target = tmp_path / "npu"
    shutil.copytree(FIXTURES / "npu", target)
    for path in target.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return target


@pytest.fixture
def portable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """The portable backend, detected afresh, in an empty working folder (a PWNED file would land here)."""
    monkeypatch.setenv(BACKEND_VAR, "portable")
    monkeypatch.chdir(tmp_path)
    detect.cache_clear()
    yield tmp_path
    detect.cache_clear()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Everything under tests/modes runs the lab end to end: mark it e2e, so ``-m "not e2e"`` is the fast part."""
    modes = Path(__file__).resolve().parent / "modes"
    for item in items:
        if modes in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.e2e)
