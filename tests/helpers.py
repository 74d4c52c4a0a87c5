"""What the tests share: the repo root, the fixtures, running the lab as a user does, loading a lesson file,
and the planted sandboxes of the safety and fault tests."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
MODES = ("01_cmdline", "02_api_AscendC", "03_api_pyAcl", "04_pyTorch")
# Shell syntax a user (or a script that builds a command line) could pass where the lab expects a
# device id or a program argument: it must be refused, or passed on inert, never run.
SHELLISH = ["0;rm -rf /", "$(touch PWNED)", "`touch PWNED`", "0\nrm -rf /", "0 && touch PWNED", "0|touch PWNED"]


def lab_env(**extra: str) -> dict[str, str]:
    """Environment for running the lab's scripts: this interpreter, the portable backend."""
    env = dict(os.environ)
    env.update(PYTHON=sys.executable, MSPROF_LAB_BACKEND="portable", PYTHONPATH=str(ROOT), KINETO_LOG_LEVEL="5")
    env.update(extra)
    return env


def run(args: list[str], timeout: float = 300, **extra: str) -> subprocess.CompletedProcess:
    """Run a command from the repo root, as a user would, capturing its output."""
    return subprocess.run(args, cwd=ROOT, env=lab_env(**extra), capture_output=True, text=True, timeout=timeout,
                          check=False)


def error_lines(stderr: str) -> list[str]:
    """The ``Error:`` lines of a run's stderr (user mistakes must give exactly one)."""
    return [line for line in stderr.splitlines() if line.startswith("Error:")]


def msprof_output(root: Path) -> Path:
    """The single mindstudio_profiler_output/ folder under ``root``."""
    (found,) = list(root.glob("PROF_*/mindstudio_profiler_output"))
    return found


def remove_lab_output(path: Path) -> None:
    """Delete an output folder a test had the lab write, only if the lab made it (it carries the marker)."""
    from common.formats import rundir

    if (path / rundir.MARKER).is_file():
        shutil.rmtree(path)


def assert_workload_checks(stdout: str, key: str, workload: str, families: set[str]) -> None:
    """A shipped workload's run of mode ``key``: every forward (step) records the same ops, of these families
    among others, TinyMLP's lesson check [N/A], the output matched, nothing failed."""
    (same,) = [line for line in stdout.splitlines() if re.match(rf"\[PASS\] every (forward|step) records the same "
                                                               rf"ops \({key}", line)]
    listed = re.search(r"each \d+ ops \(([^)]*)\) as the first", same)[1]
    assert families <= {part.split()[0] for part in listed.split(", ")}, same
    assert f"[N/A] top family ({key}): not applicable: {workload} declares no EXPECT['top_family']" in stdout
    assert f"[PASS] output matches fp32 reference ({key})" in stdout and "[FAIL]" not in stdout


def load_lesson(relative: str) -> ModuleType:
    """Import a mode's lesson file (e.g. ``04_pyTorch/src/model_with_profiler.py``) once, by its file name.

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


# ----- sandboxes with planted markers (safety and fault tests) ------------------------------------------
def tree_state(root: Path) -> dict[str, str]:
    """Every path under ``root`` with what it is: file content hash, symlink target, or dir."""
    state = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            state[rel] = "link -> " + os.readlink(path)
        elif path.is_dir():
            state[rel] = "dir"
        else:
            state[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return state


def plant(folder: Path, *, marker: bool = True) -> Path:
    """A folder with a precious file and (unless ``marker=False``) the lab's marker: where the lab must not delete."""
    from common.formats import rundir

    folder.mkdir(parents=True, exist_ok=True)
    if marker:
        (folder / rundir.MARKER).write_text("planted")
    (folder / "precious.txt").write_text(f"do not delete {folder.name}")
    return folder


# What a private copy of the lab leaves behind: every output, build, model and lock a run makes in the checkout.
NOT_COPIED = ("prof_out*", "prof_runs", "prof_sweep", "agree_out", "precision_out", "build", "model", "npu_dryrun",
              ".msprof_lab.lock", ".lab_cache", ".nox")


def copy_lab(target: Path) -> Path:
    """A private copy of the lab as a user clones it (common/, workloads/, the four modes, pyproject.toml), without
    the outputs, builds, models or locks of runs in the checkout: the one way the tests copy the lab.

    Its bytecode comes along: still valid, since the copy keeps each source file's time and size."""
    ignore = shutil.ignore_patterns(*NOT_COPIED)
    for folder in ("common", "workloads", *MODES):
        shutil.copytree(ROOT / folder, target / folder, ignore=ignore)
    shutil.copy2(ROOT / "pyproject.toml", target / "pyproject.toml")
    return target


def assert_nothing_ran(where: Path) -> None:
    """No ``PWNED`` file appeared: nothing user-supplied was run through a shell."""
    assert not list(where.rglob("PWNED*")) and not list(ROOT.glob("PWNED*"))
