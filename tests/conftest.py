"""Shared test helpers: the repo root, fixture copies, and running the lab as a user does."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(ROOT))


def lab_env(**extra: str) -> dict[str, str]:
    """Environment for running the lab's scripts: this interpreter, the portable backend."""
    env = dict(os.environ)
    env.update(PYTHON=sys.executable, MSPROF_LAB_BACKEND="portable", PYTHONPATH=str(ROOT), KINETO_LOG_LEVEL="5")
    env.update(extra)
    return env


def run(args: list[str], timeout: float = 300, **extra: str) -> subprocess.CompletedProcess:
    """Run a command from the repo root, as a user would, capturing its output."""
    return subprocess.run(args, cwd=ROOT, env=lab_env(**extra), capture_output=True, text=True, timeout=timeout)


def error_lines(stderr: str) -> list[str]:
    """The ``Error:`` lines of a run's stderr (user mistakes must give exactly one)."""
    return [line for line in stderr.splitlines() if line.startswith("Error:")]


@pytest.fixture
def npu_fixtures(tmp_path: Path) -> Path:
    """A writable copy of the real NPU captures (the report writes report.md beside them)."""
    target = tmp_path / "npu"
    shutil.copytree(FIXTURES / "npu", target)
    for path in target.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return target


def msprof_output(root: Path) -> Path:
    """The single mindstudio_profiler_output/ folder under ``root``."""
    (found,) = list(root.glob("PROF_*/mindstudio_profiler_output"))
    return found


def pytest_configure(config: pytest.Config) -> None:
    # Counted for the README's testing figures: pytest -m hostile --collect-only -q (and -m fault).
    config.addinivalue_line("markers", "hostile: one hostile input the lab must refuse, or pass on inert")
    config.addinivalue_line("markers", "fault: one fault injected while the lab collects or releases")
