"""The portable op-to-task rule on a real torch.profiler capture of the shared workload."""

from __future__ import annotations

import torch

from common.collect import torch_ops
from common.workload import build_model, make_input


def _profile(steps: int = 4):
    model, x = build_model(), make_input()
    schedule = torch.profiler.schedule(wait=0, warmup=1, active=steps - 1, repeat=1)
    with (
        torch.no_grad(),
        torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU], schedule=schedule, record_shapes=True
        ) as prof,
    ):
        for _ in range(steps):
            model(x)
            prof.step()
    start = prof.profiler.kineto_results.trace_start_ns() / 1000.0
    return torch_ops.nodes_from_events(prof.events()), start


def test_linear_becomes_addmm_and_views_are_dropped() -> None:
    roots, start = _profile()
    tasks = torch_ops.tasks_from_nodes(roots, start)
    kinds = [t.op_type for t in tasks]
    assert kinds.count("aten::addmm") == 4 * 3 and kinds.count("aten::gelu") == 3 * 3
    assert set(kinds) == {"aten::addmm", "aten::gelu"}  # no aten::t, aten::linear, aten::copy_
    addmm = next(t for t in tasks if t.op_type == "aten::addmm")
    assert addmm.input_shapes == "1024;32,1024;1024,1024" and addmm.input_dtypes == "FLOAT;FLOAT;FLOAT"
    assert addmm.start_us > start and addmm.duration_us > 0


def test_steps_and_json_round_trip() -> None:
    roots, start = _profile()
    again = torch_ops.nodes_from_json(torch_ops.nodes_to_json(roots))
    tasks = torch_ops.tasks_from_nodes(again, start)
    assert [(t.op_type, t.start_us) for t in tasks] == [
        (t.op_type, t.start_us) for t in torch_ops.tasks_from_nodes(roots, start)
    ]
    ranges = torch_ops.step_ranges(again, start, first_step=1)
    assert [r.step for r in ranges] == [1, 2, 3]
    torch_ops.assign_steps(tasks, ranges)
    assert all(t.step_id in (1, 2, 3) for t in tasks)
    rows = torch_ops.step_times(tasks, ranges)
    for row, r in zip(rows, ranges):
        assert 0 < row.computing_us <= r.end_us - r.start_us
        assert abs(row.computing_us + row.free_us - (r.end_us - r.start_us)) < 1e-6
