"""Fixtures shared by tests/unit and tests/modes (helpers that are not fixtures live in helpers.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import FIXTURES

from common.backend import BACKEND_VAR, detect
from common.cache import CACHE_VAR
from common.workload import ENV_VAR as WORKLOAD_VAR


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


# Modules that neither run a mode in the checkout nor read what such runs write there (prof_out/, builds, models,
# the modes' locks): they read fixtures and write only under tmp_path, or run the lab in a private copy of it.
# `nox -s tests` runs the suite once on two pytest-xdist workers (`-n 2 --dist loadscope`), scheduled in groups
# (pytest_xdist_make_scheduler below): every other module is in the group "checkout", whose tests run one after the
# other on one worker, as always; each module listed here is a group of its own, spread over the workers beside it.
ISOLATED = {
    "modes/test_copy_ascendc.py", "modes/test_copy_cmdline.py", "modes/test_copy_ddp.py", "modes/test_copy_pyacl.py",
    "modes/test_copy_pytorch.py", "modes/test_npu_dryrun.py", "modes/test_pages_in_browser.py", "modes/test_report_cli.py",
    "modes/test_cli_pipe.py", "unit/test_lessons.py", "unit/test_torch_trace.py",
    "unit/test_advisories.py", "unit/test_analysis.py", "unit/test_bounds.py", "unit/test_cluster_layout.py",
    "unit/test_communication.py", "unit/test_db.py", "unit/test_families.py", "unit/test_formats_scale.py",
    "unit/test_integrity.py", "unit/test_real_captures.py", "unit/test_report_page.py", "unit/test_step_verdicts.py",
    "unit/test_bench_cli.py", "unit/test_capture_hygiene.py", "unit/test_cli_errors.py", "unit/test_cluster_fixes.py",
    "unit/test_compare_levels.py", "unit/test_env.py", "unit/test_fast_paths.py", "unit/test_layers.py",
    "unit/test_torch_ops.py", "unit/test_work_models.py", "unit/test_output_range.py",
}
CHECKOUT_GROUP = "checkout"


def xdist_group_of(path: Path) -> str:
    """The group a test module runs in: "checkout" unless ISOLATED lists it, else the module's own path."""
    tests = Path(__file__).resolve().parent
    where = path.relative_to(tests).as_posix() if tests in path.parents else path.name
    return where if where in ISOLATED else CHECKOUT_GROUP


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Under ``--dist loadscope``: xdist's scope scheduler, its scopes the groups above (a worker takes a whole
    group, the next when it is done), so no two tests that run modes in the checkout ever run at once."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group_of(Path(str(config.rootpath)) / nodeid.split("::", 1)[0])

    return ByGroup(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Everything under tests/modes runs the lab end to end: mark it e2e, so ``-m "not e2e"`` is the fast part."""
    modes = Path(__file__).resolve().parent / "modes"
    for item in items:
        if modes in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.e2e)
