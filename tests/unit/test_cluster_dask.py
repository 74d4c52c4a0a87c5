"""``python -m common cluster DIR --scheduler ADDRESS``: the ranks read on a Dask cluster's workers give the same
view, byte for byte, as the local path; a scheduler that does not answer is one Error line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from common.bench.cluster_capture import write_cluster
from common.cli.commands import main
from tests.helpers import run

RANKS = 24  # above the summary's threshold, below the local pool's: the local path reads them in one process


@pytest.fixture(scope="module")
def capture(tmp_path_factory) -> Path:
    return write_cluster(tmp_path_factory.mktemp("dask") / "cluster", RANKS, steps=4, tasks_per_step=8)


@pytest.fixture(scope="module")
def scheduler():
    from distributed import LocalCluster

    # worker processes, as on a real cluster: each imports the lab from its path and reads its ranks
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        yield cluster.scheduler_address


def cluster(*args: str, **env: str):
    return run([sys.executable, "-m", "common", "cluster", *map(str, args)], **env)


def _transitions(address: str) -> int:
    """How many task state changes the scheduler has made: it grows only when work was sent to it."""
    from distributed import Client

    with Client(address) as client:
        return client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.transition_counter)


def _view(capsys, *args: object) -> str:
    """``python -m common cluster ...`` in this process (the Dask client too; the workers are processes)."""
    capsys.readouterr()
    assert main(["cluster", *map(str, args)]) == 0
    return capsys.readouterr().out


def test_a_dask_cluster_gives_the_same_view_and_files(
    capture: Path, scheduler: str, tmp_path: Path, capsys, monkeypatch
) -> None:
    local = _view(capsys, capture, "--out", tmp_path / "local")
    before = _transitions(scheduler)
    dask = _view(capsys, capture, "--out", tmp_path / "dask", "--scheduler", scheduler)
    assert _transitions(scheduler) > before  # the ranks were read by the workers
    assert local.replace("local", "dask") == dask
    for name in ("cluster_report.txt", "cluster_steps.csv", "report.html"):
        assert (tmp_path / "local" / name).read_bytes() == (tmp_path / "dask" / name).read_bytes(), name
    plain = _view(capsys, capture)
    monkeypatch.setenv("MSPROF_LAB_DASK_SCHEDULER", scheduler)  # the environment variable is the same as the option
    before = _transitions(scheduler)
    assert _view(capsys, capture) == plain
    assert _transitions(scheduler) > before


def test_a_scheduler_that_does_not_answer_is_one_error_line(capture: Path) -> None:
    proc = cluster(capture, "--scheduler", "tcp://127.0.0.1:9")  # the discard port: nothing listens
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert "--scheduler tcp://127.0.0.1:9: no Dask scheduler answered" in proc.stderr


def test_without_dask_installed_the_option_says_how_to_get_it(monkeypatch) -> None:
    from common.cli.scheduler import dask_executor
    from common.errors import LabError

    monkeypatch.setitem(sys.modules, "distributed", None)  # as if not installed: its import fails
    with pytest.raises(LabError) as err, dask_executor("tcp://127.0.0.1:8786"):
        pass
    assert "Dask's distributed package is not installed" in err.value.what and "--group dask" in err.value.fix
    with dask_executor(None) as executor:  # no address: the local pool, Dask never imported
        assert executor is None
