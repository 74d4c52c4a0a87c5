"""What the tests share: the repo root, the fixtures, running the lab as a user does, loading a lesson file."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


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


def msprof_output(root: Path) -> Path:
    """The single mindstudio_profiler_output/ folder under ``root``."""
    (found,) = list(root.glob("PROF_*/mindstudio_profiler_output"))
    return found


def load_lesson(relative: str) -> ModuleType:
    """Import a mode's lesson file (e.g. ``02_api_AscendC/src/add_profile.py``) once, by its file name.

    The module's folder goes on ``sys.path`` so the files beside it import as they do under run.sh.
    """
    path = ROOT / relative
    name = path.stem
    if name in sys.modules and getattr(sys.modules[name], "__file__", None) == str(path):
        return sys.modules[name]
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module
