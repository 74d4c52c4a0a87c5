"""Turn torch.profiler's CPU events into msprof-style tasks and steps (portable backend).

On an NPU every op launches a kernel, and msprof's op_summary lists those kernels. On the
CPU there are no kernels, so a *task* is defined here as the outermost op that does work:
- user ranges (``ProfilerStep#N``, ``record_function``) are transparent: look inside them;
- composite ops that only call other ops (``aten::linear`` -> ``aten::t`` + ``aten::addmm``)
  are transparent too, so a Linear shows up as ``aten::addmm`` the way it shows up as
  ``MatMulV2`` on the NPU;
- view/metadata ops (``aten::t``, ``aten::view``, ``aten::empty`` ...) launch nothing on an
  NPU either and are dropped;
- everything below a task (``aten::addmm`` -> ``aten::copy_`` for the bias) is part of it;
- in training, the autograd wrappers (``autograd::engine::evaluate_function: AddmmBackward0``,
  ``AddmmBackward0``, ``torch::autograd::AccumulateGrad``) are transparent: the backward
  ``aten::mm`` below them is the task, as the backward MatMul kernel is on the NPU.

Collectives (torch.distributed) are not compute. ``c10d::allreduce_`` on the calling thread
only hands the work to the process group: a host-side launch, dropped like a view op. The
process group then runs it on its own thread, recorded as ``gloo:all_reduce`` (``nccl:``,
``hccl:`` ...): from the moment that thread starts the collective until every peer has
contributed and the result is in place, so the interval holds the transfer *and* the wait
for the slowest peer, like an HCCL task on the NPU's communication stream. Those intervals
become ``COMMUNICATION`` tasks (:func:`communication_tasks`), msprof's task type for HCCL.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from dataclasses import dataclass, field

from common.analyze.families import op_family
from common.collect import dispatch_facts
from common.collect.output_shapes import json_safe, output_shapes
from common.formats.intervals import gaps, merge, union_us
from common.formats.records import ApiStat, StepTime, Task, TxRange

COMPOSITE_OPS = frozenset(
    {
        "aten::linear",
        "aten::matmul",
        "aten::einsum",
        "aten::dropout",
        "aten::feature_dropout",
        "aten::conv1d",
        "aten::conv2d",
        "aten::conv3d",
        "aten::convolution",
        "aten::_convolution",
        "aten::layer_norm",
        "aten::group_norm",
        "aten::batch_norm",
        "aten::instance_norm",
        "aten::contiguous",
        "aten::to",
        "aten::type_as",
        "aten::flatten",
        "aten::split",
        "aten::chunk",
        "aten::scaled_dot_product_attention",
    }
)
VIEW_OPS = frozenset(
    {
        "aten::t",
        "aten::transpose",
        "aten::as_strided",
        "aten::view",
        "aten::reshape",
        "aten::_reshape_alias",
        "aten::expand",
        "aten::expand_as",
        "aten::permute",
        "aten::squeeze",
        "aten::unsqueeze",
        "aten::slice",
        "aten::select",
        "aten::narrow",
        "aten::detach",
        "detach",
        "aten::detach_",
        "aten::alias",
        "aten::resolve_conj",
        "aten::resolve_neg",
        "aten::empty",
        "aten::empty_strided",
        "aten::empty_like",
        "aten::resize_",
        "aten::lift_fresh",
        "aten::unbind",
        "aten::numpy_T",
        "aten::result_type",
        "aten::_unsafe_view",
        "aten::set_",
        "aten::requires_grad_",
        "aten::_has_compatible_shallow_copy_type",
    }
)
# Questions about a tensor or the build, not kernels: never a task themselves, but what they call is
# (``aten::is_nonzero`` — ``if tensor:`` — and ``aten::item`` read the value back with
# ``aten::_local_scalar_dense``, a device-to-host copy on an NPU).
QUERY_OPS = frozenset(
    {
        "aten::is_nonzero",
        "aten::item",
        "aten::_nnpack_available",
        "aten::cudnn_is_acceptable",
        "aten::size",
        "aten::stride",
        "aten::sym_size",
        "aten::sym_stride",
        "aten::numel",
        "aten::sym_numel",
        "aten::dim",
        "aten::is_floating_point",
        "aten::is_complex",
        "aten::is_same_size",
        "aten::_has_compatible_shallow_copy_type",
        "aten::is_contiguous",
        "aten::_use_cudnn_ctc_loss",
        "aten::_use_cudnn_rnn_flatten_weight",
        "aten::_debug_has_internal_overlap",
        "aten::_assert_async",
        "aten::_is_all_true",
        "aten::is_nonzero_",
    }
)
# Composite ops of these families are looked through only when an op of their own family runs below
# them: on the CPU, aten::_convolution runs a transposed convolution in its own body (its children
# are copies), so it is the task there, not the copies below it.
_OWN_WORK_FAMILIES = frozenset({"matmul", "conv", "attention", "recurrent", "norm"})

# Autograd's bookkeeping around each backward function: looked through, like COMPOSITE_OPS.
AUTOGRAD_PREFIXES = ("autograd::engine::evaluate_function: ", "torch::autograd::")
# A process group's own execution of a collective (on its worker thread): the communication interval.
COMMUNICATION_PREFIXES = ("gloo:", "nccl:", "hccl:", "mpi:", "ucc:")
# The calling thread's launch of a collective: host-side only.
COLLECTIVE_LAUNCH_PREFIX = "c10d::"
COMMUNICATION = "COMMUNICATION"  # msprof's Task Type for collective-communication tasks

_DTYPES = {
    "float": "FLOAT",
    "c10::Half": "FLOAT16",
    "c10::BFloat16": "DT_BF16",
    "double": "DOUBLE",
    "long int": "INT64",
    "int": "INT32",
    "bool": "BOOL",
    "signed char": "INT8",
    "unsigned char": "UINT8",
}


@dataclass
class OpNode:
    """One profiled op (or user range) with its children; times in µs from the trace start."""

    name: str
    start_us: float
    end_us: float
    input_shapes: list = field(default_factory=list)
    input_dtypes: list = field(default_factory=list)
    is_range: bool = False
    children: list[OpNode] = field(default_factory=list)
    concrete_inputs: list = field(default_factory=list)  # the scalar arguments' values (stride, padding ...)


def nodes_from_events(events) -> list[OpNode]:
    """The op tree (roots) of ``prof.events()``."""
    made: dict[int, OpNode] = {}
    roots: list[OpNode] = []
    for event in events:
        node = OpNode(
            name=event.name,
            start_us=event.time_range.start,
            end_us=event.time_range.end,
            input_shapes=list(event.input_shapes or []),
            input_dtypes=list(event.input_dtypes or []),
            is_range=event.name.startswith("ProfilerStep") or bool(getattr(event, "is_user_annotation", False)),
            concrete_inputs=json_safe(getattr(event, "concrete_inputs", None)),
        )
        made[id(event)] = node
    for event in events:
        parent = event.cpu_parent
        if parent is not None and id(parent) in made:
            made[id(parent)].children.append(made[id(event)])
        else:
            roots.append(made[id(event)])
    return roots


def nodes_to_json(roots: list[OpNode]) -> list[dict]:
    """A flat, parent-indexed form of the tree, for a profiled child process to hand back."""
    flat: list[dict] = []

    def add(node: OpNode, parent: int) -> None:
        flat.append(
            {
                "name": node.name,
                "start": node.start_us,
                "end": node.end_us,
                "parent": parent,
                "shapes": node.input_shapes,
                "dtypes": node.input_dtypes,
                "range": node.is_range,
                "concrete": node.concrete_inputs,
            }
        )
        me = len(flat) - 1
        for child in node.children:
            add(child, me)

    for root in roots:
        add(root, -1)
    return flat


def nodes_from_json(flat: list[dict]) -> list[OpNode]:
    """The inverse of :func:`nodes_to_json`."""
    nodes = [
        OpNode(
            d["name"],
            float(d["start"]),
            float(d["end"]),
            d.get("shapes") or [],
            d.get("dtypes") or [],
            bool(d.get("range")),
            concrete_inputs=d.get("concrete") or [],
        )
        for d in flat
    ]
    roots = []
    for d, node in zip(flat, nodes):
        parent = int(d["parent"])
        (nodes[parent].children if 0 <= parent < len(nodes) else roots).append(node)
    return roots


def _shapes_and_types(node: OpNode) -> tuple[str | None, str | None]:
    shapes, types = [], []
    for shape, dtype in zip(node.input_shapes, node.input_dtypes):
        if not dtype or dtype == "Scalar":
            continue
        shapes.append(",".join(str(d) for d in shape))
        types.append(_DTYPES.get(dtype, dtype.upper()))
    return (";".join(shapes) or None, ";".join(types) or None)


def _is_autograd_wrapper(name: str) -> bool:
    return name.startswith(AUTOGRAD_PREFIXES) or (name.isidentifier() and "Backward" in name)


def is_communication(name: str) -> bool:
    """A process group's execution of a collective (``gloo:all_reduce`` ...)."""
    return name.startswith(COMMUNICATION_PREFIXES)


_FROM_TRACES: dict[str, bool] = {}  # what the profiled programs' torch said (dispatch_facts, via the hook)


def learn_decompositions(answers: dict[str, bool]) -> None:
    """Keep what a profiled program's torch said about its op names (its trace's ``decomposes`` table)."""
    _FROM_TRACES.update({str(k): bool(v) for k, v in answers.items()})


@functools.cache
def decomposes(name: str) -> bool:
    """See ``dispatch_facts.decomposes``: from the trace's own answers, else from torch in this process."""
    if name in _FROM_TRACES:
        return _FROM_TRACES[name]
    if not name.startswith("aten::"):
        return False
    import torch

    return dispatch_facts.decomposes(torch, name)


def _has_family(node: OpNode, family: str) -> bool:
    return any(op_family(c.name) == family or _has_family(c, family) for c in node.children)


def _looked_through(node: OpNode) -> bool:
    """A composite op whose work its children do (see the module docstring)."""
    if not (node.name in COMPOSITE_OPS or (node.children and decomposes(node.name))):
        return False
    family = op_family(node.name)
    return family not in _OWN_WORK_FAMILIES or _has_family(node, family)


def _walk(node: OpNode, out: list[OpNode]) -> None:
    if node.name in VIEW_OPS or is_communication(node.name) or node.name.startswith(COLLECTIVE_LAUNCH_PREFIX):
        return
    if node.is_range or node.name in QUERY_OPS or _looked_through(node) or _is_autograd_wrapper(node.name):
        for child in node.children:
            _walk(child, out)
        return
    out.append(node)


def _task(node: OpNode, trace_start_us: float, task_type: str) -> Task:
    shapes, dtypes = _shapes_and_types(node)
    # torch records no outputs; where a work model needs them (convolution, pooling ...), from the inputs
    outputs = output_shapes(node.name, node.input_shapes, node.input_dtypes, node.concrete_inputs)
    return Task(
        op_name=node.name,
        op_type=node.name,
        task_type=task_type,
        start_us=trace_start_us + node.start_us,
        duration_us=node.end_us - node.start_us,
        device_id="host",
        input_shapes=shapes,
        input_dtypes=dtypes,
        output_shapes=outputs[0] if outputs else None,
        output_dtypes=outputs[1] if outputs else None,
        pmu={},
    )


def tasks_from_nodes(roots: list[OpNode], trace_start_us: float) -> list[Task]:
    """Compute tasks (see the module docstring); times become absolute µs."""
    selected: list[OpNode] = []
    for root in roots:
        _walk(root, selected)
    return sorted((_task(node, trace_start_us, "CPU") for node in selected), key=lambda t: t.start_us)


def user_ranges(roots: list[OpNode], trace_start_us: float) -> list[TxRange]:
    """The program's own ranges (``record_function``), as msprof_tx rows: host times only, a CPU has no stream."""
    found: list[TxRange] = []

    def visit(node: OpNode) -> None:
        if node.is_range and not node.name.startswith("ProfilerStep"):
            found.append(TxRange(node.name, trace_start_us + node.start_us, trace_start_us + node.end_us))
        for child in node.children:
            visit(child)

    for root in roots:
        visit(root)
    return sorted(found, key=lambda r: r.start_us)


def communication_tasks(roots: list[OpNode], trace_start_us: float) -> list[Task]:
    """The collectives' execution intervals as ``COMMUNICATION`` tasks (outermost ones, any thread)."""
    found: list[OpNode] = []

    def visit(node: OpNode) -> None:
        if is_communication(node.name):
            found.append(node)
            return
        for child in node.children:
            visit(child)

    for root in roots:
        visit(root)
    return sorted((_task(node, trace_start_us, COMMUNICATION) for node in found), key=lambda t: t.start_us)


def api_calls(roots: list[OpNode]) -> dict[str, list[float]]:
    """Durations (µs) of the ops the program called directly: the host-side API it used."""
    calls: dict[str, list[float]] = defaultdict(list)

    def visit(node: OpNode) -> None:
        if is_communication(node.name):  # the process group's own thread, not a call of the program
            return
        if node.is_range:
            for child in node.children:
                visit(child)
            return
        calls[node.name].append(node.end_us - node.start_us)

    for root in roots:
        visit(root)
    return dict(calls)


def api_statistic(calls: dict[str, list[float]], level: str = "aten") -> list[ApiStat]:
    """api_statistic rows from call durations (population variance, as msprof computes it)."""
    rows = []
    for name, durations in calls.items():
        n = len(durations)
        mean = sum(durations) / n
        rows.append(
            ApiStat(
                level=level,
                api_name=name,
                time_us=sum(durations),
                count=n,
                avg_us=mean,
                min_us=min(durations),
                max_us=max(durations),
                variance=sum((d - mean) ** 2 for d in durations) / n,
            )
        )
    return sorted(rows, key=lambda r: r.time_us, reverse=True)


@dataclass(frozen=True)
class StepRange:
    step: int
    start_us: float
    end_us: float


def step_ranges(roots: list[OpNode], trace_start_us: float, first_step: int) -> list[StepRange]:
    """The recorded ``ProfilerStep`` ranges in absolute µs, numbered from ``first_step``.

    torch.profiler names every step event ``ProfilerStep*`` in ``events()``; the k-th recorded
    one is step ``first_step + k`` (the first active step of the schedule). A step lasts from
    one ``prof.step()`` to the next: the profiler's own bookkeeping inside ``step()``, between
    closing one ``ProfilerStep`` and opening the next, belongs to the step it closes (the device
    idles through it on an NPU too), so the steps tile the active part of the run and their
    Computing + Free add up to its wall time. The last step ends where it was recorded to end.
    """
    steps = sorted((n for n in roots if n.name.startswith("ProfilerStep")), key=lambda n: n.start_us)
    ends = [nxt.start_us for nxt in steps[1:]] + [n.end_us for n in steps[-1:]]
    return [
        StepRange(first_step + k, trace_start_us + n.start_us, trace_start_us + max(n.end_us, end))
        for k, (n, end) in enumerate(zip(steps, ends))
    ]


def assign_steps(tasks: list[Task], ranges: list[StepRange]) -> None:
    """Set each task's ``step_id`` from the step range its start falls in (outside any: None)."""
    for task in tasks:
        task.step_id = next((r.step for r in ranges if r.start_us <= task.start_us < r.end_us), None)


def step_times(tasks: list[Task], ranges: list[StepRange], device_id: str = "host") -> list[StepTime]:
    """step_trace_time rows, with the portable definitions:

    Computing = busy time (interval union) of the step's compute tasks; Communication = busy
    time of its ``COMMUNICATION`` tasks (clipped to the step); Communication(Not Overlapped) =
    communication time with no compute running; Overlapped = Communication - Not Overlapped;
    Free = step - Computing - Communication(Not Overlapped); Bubble = 0 (no receive-wait
    events on the portable backend); Stage = the step's length; Preparing = first task start
    - step start. Without collectives (one process) every communication column is 0.
    """
    rows = []
    for r in ranges:
        inside = [t for t in tasks if t.step_id == r.step]
        compute = merge([(t.start_us, t.end_us) for t in inside if t.task_type != COMMUNICATION])
        comm = merge(
            [(max(t.start_us, r.start_us), min(t.end_us, r.end_us)) for t in inside if t.task_type == COMMUNICATION]
        )
        computing, communication = union_us(compute), union_us(comm)
        not_overlapped = sum(union_us(gaps(compute, s, e)) for s, e in comm)
        length = r.end_us - r.start_us
        first = min((t.start_us for t in inside), default=r.start_us)
        rows.append(
            StepTime(
                step=r.step,
                computing_us=computing,
                communication_not_overlapped_us=not_overlapped,
                overlapped_us=communication - not_overlapped,
                communication_us=communication,
                free_us=max(0.0, length - computing - not_overlapped),
                stage_us=length,
                bubble_us=0.0,
                preparing_us=first - r.start_us,
                device_id=device_id,
            )
        )
    return rows
