"""Fixtures shared by tests/unit and tests/modes (helpers that are not fixtures live in helpers.py).

Every pytest process (each xdist worker, or the one process of ``-n 0``) runs the lab from a private copy of
the checkout, made here before any test module is imported: two workers never share an output folder, a build
or a mode's lock, and no test writes into the checkout. ``nox -s tests`` runs one pytest on two workers.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import helpers
import pytest

_PRIVATE = Path(tempfile.mkdtemp(prefix="msprof-lab-tests-"))
helpers.use_private_lab(_PRIVATE / "lab")

from helpers import FIXTURES  # noqa: E402

from common.backend import BACKEND_VAR, detect  # noqa: E402  (from the private copy)
from common.cache import CACHE_VAR  # noqa: E402
from common.workload import ENV_VAR as WORKLOAD_VAR  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _tiny_mlp_unless_a_test_says_otherwise():
    """$MSPROF_LAB_WORKLOAD from the caller's shell is cleared for the whole session (before any module
    fixture runs a mode): tests assume TinyMLP unless they set it themselves (monkeypatch.setenv, or the
    environment of the process they start)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(WORKLOAD_VAR, raising=False)
        yield


@pytest.fixture(scope="session", autouse=True)
def _records_of_this_session(tmp_path_factory):
    """One record folder (common.cache) for the whole session, shared by every run and every private copy of
    the lab, and never the checkout's own .lab_cache: tests neither read a user's records nor leave theirs.
    The first run of each kind computes (the cold path), later ones reuse (the warm path a learner sees)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_VAR, str(tmp_path_factory.mktemp("lab_cache")))
        yield


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


# The longest modules (seconds of test time, `--durations=0` on the 2-core VM, 2026-12-05), started first: pytest-xdist
# hands a module (--dist loadscope) to the next free worker in collection order, so a long one collected late would
# run alone at the end while the other worker idles. Order only: a module not named here runs after these.
LONGEST_FIRST = (
    "test_pyacl",
    "test_npu_dryrun",
    "test_workloads",
    "test_ddp",
    "test_agree",
    "test_copy_ddp",
    "test_fix",
    "test_dynamic_profile",
    "test_mode_cmdline",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Everything under tests/modes runs the lab end to end: mark it e2e, so ``-m "not e2e"`` is the fast part. The
    modules of :data:`LONGEST_FIRST` are collected first, in that order."""
    modes = Path(__file__).resolve().parent / "modes"
    for item in items:
        if modes in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.e2e)
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(Path(str(item.path)).stem, len(rank)))  # stable: the rest keep their order


def pytest_unconfigure(config: pytest.Config) -> None:
    """The private copy goes with the process that made it."""
    shutil.rmtree(_PRIVATE, ignore_errors=True)
