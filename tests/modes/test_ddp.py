"""Mode 04 on two ranks, end to end: bash 04_pyTorch/run_ddp.sh, the per-rank layout, the
cluster view and its refusals, the slow-rank demo, and the failure drills (crash, hang; the
kill drill's diagnosis is covered in test_ddp_units.py)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from helpers import ROOT, error_lines, remove_lab_output, run

from common.formats import readers, schema

MODE = ROOT / "04_pyTorch"


@pytest.fixture(scope="module")
def slow_run():
    """One real run of a workload that is not the default (the shipped CNN, trained with its own loss): 2 ranks,
    rank 1 with 8x its local batch (so it stands clear of this host's noise)."""
    out = MODE / f"prof_out_ddp_test_{os.getpid()}"  # own folder: other test sessions may run at the same time
    # --cross-check installs msprof-analyze (into .nox/ecosystem, once) and checks the view against it
    proc = run(
        [
            "bash",
            "04_pyTorch/run_ddp.sh",
            "2",
            "--workload",
            str(ROOT / "workloads" / "cnn.py"),
            "--slow-rank",
            "1",
            "--slow-factor",
            "8",
            "--cross-check",
            "--output",
            str(out),
        ],
        timeout=900,
    )
    yield proc, out
    remove_lab_output(out)


def _rank_dirs(out: Path) -> dict[int, Path]:
    found = {}
    for info in out.glob("*_ascend_pt/profiler_info_*.json"):
        found[int(info.stem.rsplit("_", 1)[1])] = info.parent
    return found


def cluster(path: Path, *args: str, **env: str):
    return run([sys.executable, "-m", "common", "cluster", str(path), *args], **env)


def test_run_passes_its_checks_and_names_the_slow_rank(slow_run) -> None:
    proc, out = slow_run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.startswith("=== msprof lab backend: PORTABLE")
    for check in (
        "files present",
        "every training step records the same ops (rank 0, 5 training steps)",
        "every training step records the same ops (rank 1, 5 training steps)",
        "every rank records the same ops (2 ranks, the first active step of each)",
        "same collectives on every rank",
        "step table adds up",
        "weights identical on every rank",
        "the cluster view names the slow rank",
    ):
        assert f"[PASS] {check}" in proc.stdout
    assert "[FAIL]" not in proc.stdout
    assert "slowest rank: 1 — longest compute" in proc.stdout
    assert "one process averaging the ranks' gradients" in proc.stdout
    assert json.loads((out / "run_info.json").read_text())["workload"]["name"] == "cnn"


def test_per_rank_layout_is_torch_npus(slow_run) -> None:
    _, out = slow_run
    ranks = _rank_dirs(out)
    assert sorted(ranks) == [0, 1] and len(list(out.glob("*_ascend_pt"))) == 2
    for rank, folder in ranks.items():
        info = json.loads((folder / f"profiler_info_{rank}.json").read_text())
        assert info["rank_id"] == str(rank) and info["world_size"] == 2  # a string, as torch_npu writes it
        assert not (folder / "profiler_info.json").exists()
        output = folder / "ASCEND_PROFILER_OUTPUT"
        header = (output / "step_trace_time.csv").read_text().splitlines()[0].split(",")
        assert header == schema.STEP_TRACE_TIME
        for s in readers.read_step_trace_time(output / "step_trace_time.csv"):
            assert s.communication_us > 0 and s.bubble_us == 0
            assert s.overlapped_us == pytest.approx(s.communication_us - s.communication_not_overlapped_us, abs=0.002)
            assert s.free_us == pytest.approx(
                s.stage_us - s.computing_us - s.communication_not_overlapped_us, abs=0.005
            )
        tasks = readers.read_kernel_details(output / "kernel_details.csv")
        comm = [t for t in tasks if t.task_type == "COMMUNICATION"]
        # the gradients' all_reduce; DDP also broadcasts a model's buffers (the CNN's BatchNorm statistics)
        assert "gloo:all_reduce" in {t.op_type for t in comm} <= {"gloo:all_reduce", "gloo:broadcast"}
        assert not any(t.op_type.startswith("c10d::") for t in tasks)
        events = readers.read_trace(output / "trace_view.json")
        overlap = {e.args.get("name") for e in events if e.name == "thread_name"}
        assert {"Computing", "Communication", "Communication(Not Overlapped)", "Free"} <= overlap
        data = json.loads((output / "communication.json").read_text())
        assert sorted(data) == [f"step{n}" for n in range(4, 9)]
        for step in data.values():
            total = step["collective"].pop("Total Op Info")  # torch_npu's per-step sum, not a collective
            for op in step["collective"].values():
                assert set(op["Communication Time Info"]) == {"Start Timestamp(us)", "Elapse Time(ms)"}
            assert total["Communication Time Info"]["Elapse Time(ms)"] == pytest.approx(
                sum(op["Communication Time Info"]["Elapse Time(ms)"] for op in step["collective"].values()), abs=1e-5
            )


def test_slow_rank_computes_more_and_the_other_waits(slow_run) -> None:
    _, out = slow_run
    steps = {
        r: readers.read_step_trace_time(d / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv")
        for r, d in _rank_dirs(out).items()
    }
    mean = {
        r: {
            k: sum(getattr(s, k) for s in rows) / len(rows) for k in ("computing_us", "communication_not_overlapped_us")
        }
        for r, rows in steps.items()
    }
    assert mean[1]["computing_us"] > 1.5 * mean[0]["computing_us"]
    assert mean[0]["communication_not_overlapped_us"] > mean[1]["communication_not_overlapped_us"]


def test_the_run_is_cross_checked_with_msprof_analyze(slow_run) -> None:
    proc, out = slow_run
    assert proc.returncode == 0, proc.stderr
    assert "[PASS] agrees with msprof-analyze cluster (cluster_step_trace_time.csv)" in proc.stdout
    assert (out / "cluster_analysis_output" / "cluster_step_trace_time.csv").is_file()


def test_cluster_cli_on_the_run(slow_run) -> None:
    _, out = slow_run
    proc = cluster(out)  # msprof-analyze is installed (the run above cross-checked): run only when asked
    assert proc.returncode == 0, proc.stderr
    assert "slowest rank: 1 — longest compute" in proc.stdout and "[PASS] step table adds up" in proc.stdout
    assert "cross-check with msprof-analyze: not run (add --cross-check" in proc.stdout
    assert "agrees with msprof-analyze" not in proc.stdout
    # the lab's own portable capture: no complaint about its communication files, and the slow rank's remedy
    assert "communication analysis: none on the portable backend" in proc.stdout
    assert "communication analysis not read" not in proc.stdout
    assert "try (slow rank 1): it computes longest" in proc.stdout


@pytest.fixture
def copy_of(slow_run, tmp_path: Path) -> Path:
    _, out = slow_run
    target = tmp_path / "run"
    shutil.copytree(out, target, ignore=shutil.ignore_patterns("cluster_analysis_output"))
    return target


@pytest.mark.hostile
@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("missing", "rank(s) 1 missing (found 0; world size 2)"),
        ("doubled", "rank 0 has 2 profiles"),
        ("other_run", "ranks come from different runs"),
        ("incomplete", "the run is INCOMPLETE"),
        ("steps", "rank 1 recorded steps"),
    ],
)
def test_cluster_refuses_mismatched_ranks(copy_of: Path, damage: str, message: str) -> None:
    ranks = _rank_dirs(copy_of)
    if damage == "missing":
        shutil.rmtree(ranks[1])
    elif damage == "doubled":
        shutil.copytree(ranks[0], copy_of / "elsewhere_1_20261201000000000_ascend_pt")
    elif damage == "other_run":
        info_path = ranks[1] / "profiler_info_1.json"
        info = json.loads(info_path.read_text())
        info["launch_id"] = "0" * 32
        info_path.write_text(json.dumps(info))
    elif damage == "incomplete":
        info = json.loads((copy_of / "run_info.json").read_text())
        info.update(completed=False, failure={"reason": "rank 1 failed at step 4"})
        (copy_of / "run_info.json").write_text(json.dumps(info))
    else:
        table = ranks[1] / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
        lines = table.read_text().splitlines()
        table.write_text("\n".join(lines[:-1]) + "\n")
    proc = cluster(copy_of)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (line,) = error_lines(proc.stderr)
    assert message in line


def test_cluster_refuses_a_single_device_profile(tmp_path: Path) -> None:
    proc = cluster(tmp_path)
    assert proc.returncode == 2 and "no per-rank profiles" in proc.stderr and len(error_lines(proc.stderr)) == 1


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return status.is_file() and "State:\tZ" not in status.read_text()


@pytest.mark.fault
@pytest.mark.parametrize(
    ("fault", "rank", "message"),
    [
        ("crash:1", 1, "rank 1 failed at step 4: RuntimeError: fault drill"),
        ("hang:1", 1, "rank 1 stopped making progress at step 4 outside any collective; rank 0 waited for it"),
    ],
)
def test_a_failing_rank_ends_the_run_named_and_leaves_nothing_running(fault: str, rank: int, message: str) -> None:
    out = MODE / f"prof_out_ddp_fault_test_{os.getpid()}"
    try:
        proc = run(
            # a hang is detected by the timeout (20 s: the test's cost); a crash must end the run long before it
            [
                "bash",
                "04_pyTorch/run_ddp.sh",
                "2",
                "--fault",
                fault,
                "--timeout",
                "20" if fault.startswith("hang") else "90",
                "--output",
                str(out),
            ],
            timeout=120,
        )
        assert proc.returncode == 1 and "Traceback" not in proc.stderr
        (line,) = error_lines(proc.stderr)
        assert message in line and "profile marked incomplete" in line
        info = json.loads((out / "run_info.json").read_text())
        assert info["completed"] is False and info["failure"]["rank"] == rank
        assert info["timed_out"] is fault.startswith("hang")
        pids = [json.loads(p.read_text())["pid"] for p in (out / "rank_status").glob("rank_*.json")]
        assert len(pids) == 2 and not any(_alive(pid) for pid in pids)
        refused = cluster(out)
        assert refused.returncode == 2 and "INCOMPLETE" in refused.stderr
    finally:
        remove_lab_output(out)


BAD_INPUT = [
    ["0"],
    ["9"],
    ["2;touch /tmp/x"],
    ["2", "0,0"],
    ["2", "0"],
    ["2", "0,99"],
    ["2", "--slow-rank", "2"],
    ["2", "--slow-factor", "1"],
    ["2", "--fault", "crash:7"],
    ["2", "--timeout", "0"],
    ["2", "--bogus"],
]


@pytest.mark.hostile
@pytest.mark.parametrize("args", BAD_INPUT)
def test_bad_input_is_a_lab_error_before_anything_runs(args: list[str]) -> None:
    """In this process: the driver's main refuses with a LabError (which the command turns into one line, exit 2)
    before it launches anything."""
    from common.errors import LabError
    from common.modes.pytorch import ddp

    with pytest.raises(LabError):
        ddp.main(args)


@pytest.mark.hostile
@pytest.mark.parametrize("args", [BAD_INPUT[0], BAD_INPUT[2], BAD_INPUT[-1]])
def test_bad_input_is_refused_before_anything_runs(args: list[str]) -> None:
    """Through run_ddp.sh, as a user types it: one Error line, exit 2, nothing launched."""
    proc = run(["bash", "04_pyTorch/run_ddp.sh", *args], timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and len(error_lines(proc.stderr)) == 1
    assert "launching" not in proc.stdout
