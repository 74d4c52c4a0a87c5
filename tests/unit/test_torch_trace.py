"""torch.profiler's own trace file read back: the same op tree, steps and allocator calls as the profiler
object in memory, so the portable ``*_ascend_pt`` folder is the same whichever of the two it is written from."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch

from common.collect import torch_ops
from common.collect.torch_npu_layout import OUTPUT_SUBDIR, Allocation, portable_profiler_info, write_op_tree
from common.collect.torch_trace import concrete_value, find_trace, read_trace, write_ascend_pt_from_trace
from common.errors import LabError

WAIT, WARMUP, ACTIVE = 1, 1, 3


class _Net(torch.nn.Module):
    """Convolution (concrete inputs: stride, padding), a user range, and a training step's backward."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.fc = torch.nn.Conv1d(4, 8, 3, stride=2, padding=1), torch.nn.Linear(64, 16)

    def forward(self, x):
        with torch.profiler.record_function("head"):
            return self.fc(torch.nn.functional.gelu(self.conv(x)).flatten(1))


def _profile(folder: Path):
    torch.manual_seed(0)
    net, x = _Net(), torch.randn(2, 4, 16)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
    schedule = torch.profiler.schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1)
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        schedule=schedule,
        on_trace_ready=torch.profiler.tensorboard_trace_handler(str(folder)),
        record_shapes=True,
        profile_memory=True,
    ) as prof:
        for _ in range(WAIT + WARMUP + ACTIVE):
            optimizer.zero_grad()
            net(x).square().mean().backward()
            optimizer.step()
            prof.step()
    return prof


def _in_memory(prof) -> tuple[list[torch_ops.OpNode], float, list[Allocation]]:
    """The other way: the profiler object's own events and event tree."""
    start = prof.profiler.kineto_results.trace_start_ns() / 1000.0
    allocations, stack = [], list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if hasattr(node.extra_fields, "alloc_size"):
            f = node.extra_fields
            allocations.append(
                Allocation(
                    node.start_time_ns / 1000.0,
                    int(f.ptr),
                    int(f.alloc_size),
                    int(f.total_allocated),
                    None,
                    "CPU",
                    node.parent.name if node.parent else None,
                )
            )
    return torch_ops.nodes_from_events(prof.events()), start, sorted(allocations, key=lambda a: a.ts_us)


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("trace")
    prof = _profile(folder)
    return find_trace(folder), _in_memory(prof)


def _tasks(roots, start):
    tasks = torch_ops.tasks_from_nodes(roots, start)
    torch_ops.assign_steps(tasks, torch_ops.step_ranges(roots, start, first_step=WAIT + WARMUP))
    return tasks


def test_the_trace_gives_the_same_op_tree_as_the_profiler_object(captured) -> None:
    trace, (roots, start, _) = captured
    read = read_trace(trace)
    mine, theirs = _tasks(read.roots, read.trace_start_us), _tasks(roots, start)
    assert len(mine) == len(theirs) > 0
    assert [(t.op_type, t.input_shapes, t.input_dtypes, t.output_shapes, t.step_id) for t in mine] == [
        (t.op_type, t.input_shapes, t.input_dtypes, t.output_shapes, t.step_id) for t in theirs
    ]
    assert any(t.output_shapes for t in mine)  # the convolution's, from its concrete inputs (stride, padding)
    assert [t.start_us for t in mine] == pytest.approx([t.start_us for t in theirs], abs=1.0)
    assert [t.duration_us for t in mine] == pytest.approx([t.duration_us for t in theirs], abs=0.01)
    ranges = torch_ops.step_ranges(read.roots, read.trace_start_us, first_step=WAIT + WARMUP)
    assert [r.step for r in ranges] == [2, 3, 4]
    annotations = [r.message for r in torch_ops.user_ranges(read.roots, 0.0)]
    assert annotations == [r.message for r in torch_ops.user_ranges(roots, 0.0)] and annotations.count("head") == ACTIVE
    assert torch_ops.api_calls(read.roots).keys() == torch_ops.api_calls(roots).keys()


def test_the_trace_gives_the_same_allocator_calls(captured) -> None:
    trace, (_, _, allocations) = captured
    read = read_trace(trace).allocations
    assert len(read) == len(allocations) > 0
    # The same calls at the same times; calls at one instant (an op freeing two blocks) have no order of their own.
    assert sorted((a.nbytes, a.op, a.device) for a in read) == sorted((a.nbytes, a.op, a.device) for a in allocations)
    assert [a.ts_us for a in read] == pytest.approx([a.ts_us for a in allocations], abs=1.0)


def _table(path: Path) -> list[list[str]]:
    with path.open(newline="") as f:
        return list(csv.reader(f))


def test_both_ways_write_the_same_folder(captured, tmp_path: Path) -> None:
    trace, (roots, start, allocations) = captured
    info = portable_profiler_info(WAIT, WARMUP, ACTIVE)
    from_trace = write_ascend_pt_from_trace(trace, tmp_path / "a", WAIT + WARMUP, info) / OUTPUT_SUBDIR
    in_memory = write_op_tree(roots, start, allocations, tmp_path / "b", WAIT + WARMUP, info) / OUTPUT_SUBDIR
    names = sorted(p.name for p in in_memory.iterdir())
    assert sorted(p.name for p in from_trace.iterdir()) == names and "operator_memory.csv" in names
    for name in (n for n in names if n.endswith(".csv")):
        a, b = _table(from_trace / name), _table(in_memory / name)
        assert a[0] == b[0] and len(a) == len(b), name  # the same columns, the same number of rows
    op_count = {r[1]: r[3] for r in _table(from_trace / "op_statistic.csv")[1:]}
    assert op_count == {r[1]: r[3] for r in _table(in_memory / "op_statistic.csv")[1:]}  # OP Type -> Count
    assert [r[1] for r in _table(from_trace / "step_trace_time.csv")[1:]] == ["2", "3", "4"]  # Device_id, Step


@pytest.mark.parametrize(
    ("cell", "value"),
    [
        ("", None),
        ("1", 1),
        ("[2, 1]", [2, 1]),
        ("False", False),
        ("1e-05", 1e-05),
        ("[False, True]", [False, True]),
        ("tanh", "tanh"),
    ],
)
def test_concrete_inputs_as_the_profiler_object_gives_them(cell: str, value) -> None:
    assert concrete_value(cell) == value


def test_a_file_that_is_not_a_trace_is_one_error(tmp_path: Path) -> None:
    bad = tmp_path / "x.pt.trace.json"
    bad.write_text("{not json")
    with pytest.raises(LabError, match="is not a torch.profiler chrome trace"):
        read_trace(bad)
    with pytest.raises(LabError, match="holds 0 torch.profiler traces"):
        find_trace(tmp_path / "empty")
