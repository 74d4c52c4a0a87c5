"""Multi-rank pieces without launching anything: communication columns, the HCCL-schema file,
the slow-rank rule, the driver's validation and its reading of a failed run, the rank program
around the lesson, and the lesson's own device selection."""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import time
import types
from pathlib import Path

import pytest
from helpers import load_lesson

from common.backend import Backend
from common.analyze.slow_rank import RankSummary, collective_arrivals, find_slow_rank
from common.collect import torch_ops
from common.collect.torch_npu_layout import communication_json, trace_view
from common.collect.torch_ops import COMMUNICATION, StepRange
from common.errors import LabError
from common.formats.cluster import ClusterView, RankProfile
from common.formats.communication import collectives_of
from common.formats.records import Task
from common.modes.pytorch import ddp_rank
from common.modes.pytorch import ddp_torchrun as ranks


def _task(name: str, start: float, end: float, kind: str = "CPU", step: int = 4) -> Task:
    return Task(op_name=name, op_type=name, task_type=kind, start_us=start, duration_us=end - start, step_id=step)


def test_communication_columns_from_intervals() -> None:
    # compute [0,10) and [20,30); one all-reduce [5,25) partly hidden behind them; step [0,40)
    tasks = [_task("aten::mm", 0, 10), _task("aten::mm", 20, 30), _task("gloo:all_reduce", 5, 25, COMMUNICATION)]
    (row,) = torch_ops.step_times(tasks, [StepRange(4, 0.0, 40.0)])
    assert row.computing_us == 20 and row.communication_us == 20
    assert row.communication_not_overlapped_us == 10  # [10,20): no compute running
    assert row.overlapped_us == 10 and row.free_us == 10 and row.bubble_us == 0 and row.stage_us == 40


def test_communication_is_clipped_to_its_step_and_two_collectives_count_once() -> None:
    tasks = [_task("gloo:all_reduce", 30, 50, COMMUNICATION), _task("gloo:all_reduce", 35, 45, COMMUNICATION)]
    (row,) = torch_ops.step_times(tasks, [StepRange(4, 0.0, 40.0)])
    assert row.communication_us == 10 and row.communication_not_overlapped_us == 10 and row.free_us == 30


def test_collective_launch_and_execution_are_not_compute() -> None:
    launch = torch_ops.OpNode("c10d::allreduce_", 10, 12)
    wrapper = torch_ops.OpNode(
        "autograd::engine::evaluate_function: AddmmBackward0",
        0,
        9,
        children=[
            torch_ops.OpNode(
                "AddmmBackward0", 0, 9, children=[torch_ops.OpNode("aten::t", 0, 1), torch_ops.OpNode("aten::mm", 1, 9)]
            )
        ],
    )
    execution = torch_ops.OpNode("gloo:all_reduce", 11, 30)
    roots = [wrapper, launch, execution]
    assert [t.op_type for t in torch_ops.tasks_from_nodes(roots, 0.0)] == ["aten::mm"]
    (comm,) = torch_ops.communication_tasks(roots, 100.0)
    assert (comm.task_type, comm.start_us, comm.duration_us) == (COMMUNICATION, 111.0, 19.0)
    assert "gloo:all_reduce" not in torch_ops.api_calls(roots)


def test_communication_json_names_collectives_per_step_in_order() -> None:
    tasks = [
        _task("gloo:all_reduce", 5, 25, COMMUNICATION),
        _task("gloo:all_reduce", 1, 3, COMMUNICATION),
        _task("gloo:all_reduce", 50, 60, COMMUNICATION, step=5),
        _task("aten::mm", 0, 10),
    ]
    data = communication_json(tasks)
    assert sorted(data) == ["step4", "step5"] and data["step4"]["p2p"] == {}
    first = data["step4"]["collective"]["gloo_all_reduce_4_0@world"]["Communication Time Info"]
    assert first == {"Start Timestamp(us)": 1.0, "Elapse Time(ms)": 0.002}
    # torch_npu's compute_total_info: each step's collectives summed into "Total Op Info" (no start timestamp)
    assert list(data["step5"]["collective"]) == ["gloo_all_reduce_5_0@world", "Total Op Info"]
    total = data["step4"]["collective"]["Total Op Info"]
    assert total == {"Communication Time Info": {"Elapse Time(ms)": 0.022}, "Communication Bandwidth Info": {}}
    assert collectives_of(data["step4"]) == {k: v for k, v in data["step4"]["collective"].items() if "@" in k}


def test_total_op_info_is_not_counted_as_a_collective(tmp_path) -> None:
    from common.analyze.checks import check_collectives
    from common.formats.communication import rank_collectives

    profiles = []
    for rank in (0, 1):
        folder = tmp_path / f"r{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
        folder.mkdir(parents=True)
        tasks = [_task("gloo:all_reduce", 10 + rank, 20, COMMUNICATION, step=s) for s in (4, 5)]
        (folder / "communication.json").write_text(json.dumps(communication_json(tasks)))
        profiles.append(RankProfile(rank, folder.parent, {}))
    verdict = check_collectives(rank_collectives(profiles))
    assert verdict.ok and "2 steps x 1 collective(s) per step" in verdict.detail
    arrivals = collective_arrivals(ClusterView(tmp_path, profiles, None, {}))
    assert arrivals.collectives == 2 and arrivals.last == {0: 0, 1: 2}


def test_profiler_info_carries_torch_npus_keys_and_a_string_rank_id(tmp_path) -> None:
    from common.collect.torch_npu_layout import portable_profiler_info, write_ascend_pt

    info = portable_profiler_info(1, 3, 5)
    for key in ("start_info", "end_info", "torch_npu_version", "cann_version"):
        assert key in info and info[key] is None  # only an NPU run knows them: null, never made up
    # no torch_npu configuration exists on the portable backend; a null there breaks msprof-analyze's summary
    assert "experimental_config" not in info["config"]
    run = write_ascend_pt(tmp_path, [], [], [], [], info, rank=1)
    written = json.loads((run / "profiler_info_1.json").read_text())
    assert written["rank_id"] == "1"


def test_trace_has_the_four_overlap_tracks() -> None:
    tasks = [_task("aten::mm", 0, 10), _task("aten::mm", 20, 30), _task("gloo:all_reduce", 5, 25, COMMUNICATION)]
    events = trace_view(tasks, [StepRange(4, 0.0, 40.0)], host_pid=7)
    sums = {}
    for e in events:
        if e.get("ph") == "X" and e["pid"] == 702:
            sums[e["name"]] = sums.get(e["name"], 0) + e["dur"]
    assert sums == {"Computing": 20, "Communication": 20, "Communication(Not Overlapped)": 10, "Free": 10}


def _summary(rank: int, computing: float, wait: float, free: float) -> RankSummary:
    return RankSummary(rank, computing, wait, wait, free, computing + wait + free)


def test_slow_rank_by_compute_and_by_free() -> None:
    slow = find_slow_rank([_summary(0, 100, 400, 20), _summary(1, 450, 50, 20), _summary(2, 110, 390, 20)])
    assert (slow.rank, slow.reason) == (1, "computing") and "slowest rank: 1" in slow.text
    slow = find_slow_rank([_summary(0, 100, 50, 400), _summary(1, 100, 400, 50)])
    assert (slow.rank, slow.reason) == (0, "free")


def test_balanced_ranks_have_no_slow_rank() -> None:
    slow = find_slow_rank([_summary(0, 100, 50, 20), _summary(1, 105, 45, 20)])
    assert slow.rank is None and slow.text.startswith("no slow rank")
    assert find_slow_rank([_summary(0, 100, 0, 20)]).rank is None


@pytest.mark.hostile
@pytest.mark.parametrize("text", ["0", "9", "-1", "2;rm -rf /", "x", "", "1 2", "٢"])
def test_nproc_allow_list(text: str) -> None:
    with pytest.raises(LabError, match="nproc"):
        ranks.parse_nproc(text)


@pytest.mark.hostile
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0,x", "device id"),
        ("0,64", "device id"),
        ("0,0", "twice"),
        ("0", "1 ids for 2 ranks"),
        ("0,1,2", "3 ids"),
        ("0;reboot", "device id"),
        ("$(id)", "device id"),
    ],
)
def test_device_lists(text: str, message: str) -> None:
    with pytest.raises(LabError, match=message):
        ranks.parse_device_list(text, 2)


def test_device_list_default_and_order() -> None:
    assert ranks.parse_device_list(None, 3) == [0, 1, 2]
    assert ranks.parse_device_list("7,3", 2) == [3, 7]  # sorted: LOCAL_RANK r gets the r-th smallest id


NPU8 = Backend("npu", "test", "/cann", {"msprof": "/cann/bin/msprof"}, tuple(range(8)))


def test_rank_env_selects_no_card_by_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every rank calls torch.npu.set_device itself: the driver sets no ASCEND_RT_VISIBLE_DEVICES."""
    monkeypatch.delenv("ASCEND_RT_VISIBLE_DEVICES", raising=False)
    env = ranks.rank_env(NPU8, [3, 7], Path("/repo"))
    assert "ASCEND_RT_VISIBLE_DEVICES" not in env and env["MASTER_ADDR"] == "127.0.0.1"
    assert env["PYTHONPATH"].split(os.pathsep)[0] == "/repo" and "GLOO_SOCKET_IFNAME" not in env
    with pytest.raises(LabError, match=r"device 9 is not a logical device id here \(valid: 0..7\)"):
        ranks.rank_env(NPU8, [3, 9], Path("/repo"))
    monkeypatch.setenv("ASCEND_RT_VISIBLE_DEVICES", "0,1")
    with pytest.raises(LabError, match="not support it while profiling"):
        ranks.rank_env(NPU8, [0, 1], Path("/repo"))
    assert ranks.rank_env(Backend("portable", "test"), [0, 1], Path("/repo"))["GLOO_SOCKET_IFNAME"] == "lo"


def test_rank_selects_its_device_before_hccl(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lesson on an NPU: the rank with LOCAL_RANK r calls torch.npu.set_device(<r-th smallest id>), then
    init_process_group("hccl"); --devices cpu (what the driver passes on the portable backend) is gloo."""
    import torch
    import torch.distributed as dist

    lesson = load_lesson("04_pyTorch/src/ddp_with_profiler.py")
    calls = []
    monkeypatch.setitem(sys.modules, "torch_npu", types.ModuleType("torch_npu"))
    monkeypatch.setattr(
        torch, "npu", types.SimpleNamespace(set_device=lambda d: calls.append(("set_device", d))), raising=False
    )
    monkeypatch.setattr(dist, "init_process_group", lambda backend, timeout: calls.append(("init", backend)))
    monkeypatch.setattr(torch, "device", lambda text: ("device", text))  # CPU-only torch has no "npu" type
    devices = lesson.parse_args(["--devices", "7,3"]).devices
    assert devices == [3, 7] and lesson.join(devices, 1, 10.0) == ("device", "npu:7")
    assert calls == [("set_device", 7), ("init", "hccl")]
    assert lesson.parse_args(["--devices", "cpu"]).devices is None
    assert lesson.join(None, 1, 10.0) == ("device", "cpu") and calls[-1] == ("init", "gloo")


def test_torchrun_argv_is_loopback_and_an_argv_list() -> None:
    argv = ranks.torchrun_argv(4, 29555, Path("/w/ddp_rank.py"), ["--status-dir", "/x y", "/w/lesson.py"])
    assert argv[:3] == [sys.executable, "-m", "torch.distributed.run"]
    assert argv[argv.index("/w/ddp_rank.py") + 1 :] == ["--status-dir", "/x y", "/w/lesson.py"]
    assert argv[argv.index("--nproc-per-node") + 1] == "4"
    assert argv[argv.index("--rdzv-endpoint") + 1] == "127.0.0.1:29555"
    assert argv[argv.index("--max-restarts") + 1] == "0"


TORCHRUN_FAILURE = """
Root Cause (first observed failure):
[0]:
  time      : 2026-12-01_08:20:05
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 27893)
"""


def test_diagnose_uses_torchrun_root_cause_and_rank_reports() -> None:
    statuses = {
        0: {"rank": 0, "state": "failed", "step": 4, "time": 2.0, "error": "RuntimeError: Connection closed by peer"},
        1: {"rank": 1, "state": "running", "step": 4, "time": 1.0},
    }
    rank, why = ranks.diagnose(2, statuses, {}, False, 60, TORCHRUN_FAILURE)
    assert rank == 1 and "killed by signal SIGKILL at step 4" in why
    statuses[1].update(state="failed", error="ValueError: bad batch")
    assert ranks.diagnose(2, statuses, {}, False, 60, "") == (1, "rank 1 failed at step 4: ValueError: bad batch")


def test_diagnose_blames_the_rank_that_failed_on_its_own_not_the_peer_whose_collective_broke_first() -> None:
    # rank 0's all-reduce noticed the lost peer before rank 1 wrote its report, and torchrun names rank 0
    statuses = {
        0: {
            "rank": 0,
            "state": "failed",
            "step": 4,
            "time": 1.0,
            "error": "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer",
        },
        1: {"rank": 1, "state": "failed", "step": 4, "time": 2.0, "error": "RuntimeError: fault drill"},
    }
    log = TORCHRUN_FAILURE.replace("rank      : 1 (local_rank: 1)", "rank      : 0 (local_rank: 0)")
    assert ranks.diagnose(2, statuses, {}, False, 60, log) == (1, "rank 1 failed at step 4: RuntimeError: fault drill")


def test_diagnose_a_hang_from_the_ranks_stacks() -> None:
    statuses = {r: {"rank": r, "state": "running", "step": 4, "time": 1.0} for r in range(3)}
    stacks = {
        0: 'File "/x/torch/autograd/graph.py", line 9 in _engine_run_backward',
        1: 'File "/x/data.py", line 3 in load',
        2: 'File "/x/torch/autograd/__init__.py" in backward',
    }
    rank, why = ranks.diagnose(3, statuses, stacks, True, 30, "")
    assert rank == 1 and "rank 1 stopped making progress at step 4" in why and "ranks 0, 2 waited" in why
    stacks[2] = 'File "/x/data.py", line 3 in load'
    assert ranks.diagnose(3, statuses, stacks, True, 30, "")[0] is None


def test_arrivals_name_the_rank_that_reaches_the_collective_last(tmp_path) -> None:
    ranks = []
    for rank, starts in ((0, (100.0, 300.0)), (1, (160.0, 320.0))):
        folder = tmp_path / f"r{rank}_ascend_pt"
        (folder / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
        tasks = [_task("gloo:all_reduce", s, s + 10, COMMUNICATION) for s in starts]
        (folder / "ASCEND_PROFILER_OUTPUT" / "communication.json").write_text(json.dumps(communication_json(tasks)))
        ranks.append(RankProfile(rank, folder, {}))
    arrivals = collective_arrivals(ClusterView(tmp_path, ranks, None, {}))
    assert arrivals.collectives == 2 and arrivals.last == {0: 0, 1: 2}
    assert arrivals.wait_us == {0: 40.0, 1: 0.0}  # (60 + 20) / 2 collectives
    assert "which rank 1 started 60.0 us after the first rank" in arrivals.text()
    assert "started last (of 2): rank 0 0, rank 1 2" in arrivals.text()
    assert arrivals.held_us == {0: 0.0, 1: 80.0} and arrivals.holder() == 1
    assert arrivals.text().endswith("; the others waited longest for rank 1: 80.0 us in all")


def test_the_ddp_lesson_profiles_with_mode_04s_schedule() -> None:
    """The lesson's schedule is the one the driver checks against (and mode 04's on one device)."""
    from common.modes.pytorch import ddp

    lesson = load_lesson("04_pyTorch/src/ddp_with_profiler.py")
    assert (lesson.WAIT, lesson.WARMUP, lesson.ACTIVE, lesson.STEPS) == (ddp.WAIT, ddp.WARMUP, ddp.ACTIVE, 9)
    assert ddp.LESSON.name == "ddp_with_profiler.py" and ddp.LESSON.is_file()


def test_a_rank_error_is_recorded_for_the_driver(tmp_path) -> None:
    (tmp_path / ranks.STATUS_DIR).mkdir()
    with ddp_rank.RankStatus.start(tmp_path / ranks.STATUS_DIR, 1) as status:
        status.update(state="running", step=4)
        raise ValueError("bad batch")
    assert status.exit_code == 1
    assert ranks.read_statuses(tmp_path, 2)[1] | {"time": 0} == {
        "rank": 1,
        "pid": status.data["pid"],
        "state": "failed",
        "step": 4,
        "error": "ValueError: bad batch",
        "time": 0,
    }
    with ddp_rank.RankStatus.start(tmp_path / ranks.STATUS_DIR, 0) as ok:
        ok.update(state="done")
    assert ok.exit_code == 0 and sorted(ranks.read_statuses(tmp_path, 2)) == [0, 1]
    faulthandler.unregister(signal.SIGUSR1)  # start() asked for stacks on SIGUSR1: not in the test process


def test_the_rank_program_runs_the_lesson_as_main_and_passes_its_exit_code_on(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(sys, "argv", list(sys.argv))  # run_lesson sets both, as `python lesson.py` would
    monkeypatch.setattr(sys, "path", list(sys.path))
    lesson = tmp_path / "lesson.py"
    lesson.write_text("import sys\nif __name__ == '__main__':\n    sys.exit(int(sys.argv[1]))\n")
    assert ddp_rank.run_lesson(str(lesson), ["0"]) == 0 and ddp_rank.run_lesson(str(lesson), ["3"]) == 3
    assert sys.argv == [str(lesson), "3"] and sys.path[0] == str(tmp_path)


def test_the_slow_rank_demo_on_a_model_too_small_to_show_it() -> None:
    """The demo's extra batch may stay under the view's threshold on a small model: [N/A], not a failure
    (which rank arrives last is then noise); another rank blamed fails."""
    from common.analyze.checks import check_slow_rank
    from common.analyze.slow_rank import Arrivals, SlowRank

    quiet = SlowRank(None, None, "no slow rank: ranks differ by 40 us, under 20% of the 3,181.1 us median step")
    rank1_held = Arrivals(10, {0: 1, 1: 9}, {0: 900.0, 1: 1.0}, held_us={0: 10.0, 1: 9000.0})
    rank0_held = Arrivals(10, {0: 9, 1: 1}, {0: 1.0, 1: 900.0}, held_us={0: 9000.0, 1: 10.0})
    small = check_slow_rank(quiet, rank1_held, 1, 4)
    assert small.ok and not small.applicable and "too little work on this model" in small.detail
    assert "None" not in small.detail
    noise = check_slow_rank(quiet, rank0_held, 1, 4)
    assert (
        noise.ok
        and not noise.applicable
        and "waited for longest at the collectives: 0 (9,000.0 us in all, last at 9 of 10)" in noise.detail
    )
    blamed = check_slow_rank(SlowRank(0, "computing", "rank 0"), rank0_held, 1, 4)
    assert not blamed.ok and "the view names rank 0 (computing)" in blamed.detail
    found = check_slow_rank(SlowRank(1, "computing", "rank 1"), rank1_held, 1, 4)
    assert found.ok and found.applicable
    # A model with buffers: DDP broadcasts them at each forward, where the fast rank may start last by a few µs;
    # the slow rank is last at the all_reduce, where the others wait for it. Waiting time decides, not counts.
    buffers = Arrivals(10, {0: 6, 1: 4}, {0: 2000.0, 1: 3.0}, held_us={0: 30.0, 1: 20000.0})
    assert check_slow_rank(SlowRank(1, "computing", "rank 1"), buffers, 1, 4).ok


def test_nodes_are_torchrun_agents_of_one_rendezvous(tmp_path: Path) -> None:
    """--nodes N: N agents (--nnodes N --node-rank i) of one c10d rendezvous on loopback, node 0 its host;
    the ranks, the slow rank and the devices count over every node."""
    agents = [ranks.torchrun_argv(2, 29555, Path("/w/ddp_rank.py"), [], 2, node, "job") for node in (0, 1)]
    for node, argv in enumerate(agents):
        assert argv[argv.index("--nnodes") + 1] == "2" and argv[argv.index("--node-rank") + 1] == str(node)
        assert argv[argv.index("--rdzv-id") + 1] == "job" and argv[argv.index("--rdzv-backend") + 1] == "c10d"
        assert argv[argv.index("--rdzv-endpoint") + 1] == "127.0.0.1:29555"
    assert [a[a.index("--rdzv-conf") + 1] for a in agents] == ["is_host=true", "is_host=false"]
    assert "--node-rank" not in ranks.torchrun_argv(2, 29555, Path("/w/ddp_rank.py"), [])
    lesson = ranks.ddp_lesson(None, "run_ddp.sh", tmp_path)
    args = lesson.parse(["2", "--nodes", "2", "--slow-rank", "3"])
    plan = ranks.validate(args)
    assert (plan.world, plan.slow_rank, plan.devices, plan.node_devices(1)) == (4, 3, [0, 1, 2, 3], [2, 3])
    for bad, what in (
        (["2", "--nodes", "5"], "--nodes '5' is not an integer in 1..4"),
        (["2", "--nodes", "x"], "--nodes 'x'"),
        (["2", "--nodes", "2", "--slow-rank", "4"], "--slow-rank '4' is not a rank in 0..3"),
    ):
        with pytest.raises(LabError, match=what):
            ranks.validate(lesson.parse(bad))


def test_the_nodes_program_stops_every_agent_when_one_fails(tmp_path: Path) -> None:
    from common.modes.pytorch import ddp_nodes

    agents = tmp_path / "agents.json"
    agents.write_text(
        json.dumps(
            [[sys.executable, "-c", "import time; time.sleep(60)"], [sys.executable, "-c", "raise SystemExit(3)"]]
        )
    )
    start = time.monotonic()
    assert ddp_nodes.main([str(agents)]) == 3
    assert time.monotonic() - start < 30  # at once, not after the sleeping agent's minute
    agents.write_text(json.dumps([[sys.executable, "-c", "pass"]] * 2))
    assert ddp_nodes.main([str(agents)]) == 0
