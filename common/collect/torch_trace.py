"""torch.profiler's own chrome trace (``*.pt.trace.json``) read into what the portable writer needs.

A lesson profiles with ``torch.profiler`` and lets ``tensorboard_trace_handler(DIR)`` write the
trace, as a user's own script does; the lab reads that file afterwards, in another process, and
writes torch_npu's ``*_ascend_pt`` layout from it (:func:`write_ascend_pt_from_trace`).

What the trace holds, and how it becomes the op tree of :mod:`common.collect.torch_ops`:
- ``"ph": "X"`` events of category ``cpu_op`` (ops) and ``user_annotation`` (``ProfilerStep#N``,
  ``record_function`` ranges), ``ts``/``dur`` in µs from ``baseTimeNanoseconds``. The file has no
  parent links: an event is the child of the innermost event of the same thread it starts in.
- ``args``: ``Input Dims``, ``Input type`` and ``Concrete Inputs`` (written as strings: ``''`` for
  a tensor, ``'1'``, ``'[2]'``, ``'False'``), turned back into the values ``prof.events()`` gives.
- ``"[memory]"`` instant events (``profile_memory=True``): the allocator's calls, each with its
  size, address and totals; the op that made it is the innermost op of its thread at that time.
"""

from __future__ import annotations

import ast
import bisect
import json
import re
from pathlib import Path
from typing import NamedTuple

from common.collect.torch_npu_layout import Allocation, write_op_tree
from common.collect.torch_ops import OpNode
from common.errors import LabError

SPAN_CATEGORIES = ("cpu_op", "user_annotation")  # what prof.events() lists; python_function, Trace ... are not
MEMORY_EVENT = "[memory]"
# c10::DeviceType of a [memory] event -> torch_npu's Device Type column ("CPU", "NPU:0" ...)
_DEVICE_TYPES = {0: "CPU", 1: "CUDA", 20: "NPU"}  # 20: PrivateUse1, the type torch_npu registers


class TorchTrace(NamedTuple):
    """One trace, read: the op tree (times in µs from ``trace_start_us``), the trace's zero, the allocator calls."""

    roots: list[OpNode]
    trace_start_us: float
    allocations: list[Allocation]
    distributed: dict | None = None  # the trace's distributedInfo (rank, world_size ...) under torch.distributed


def concrete_value(text):
    """One ``Concrete Inputs`` cell as ``prof.events()`` gives it: ``''`` -> None, ``'[2]'`` -> [2], ``'False'`` -> False."""
    if not isinstance(text, str):
        return text
    if text == "":
        return None
    try:
        return ast.literal_eval(text)  # written with Python's repr: 1, 1e-05, [2], False, [False, True, True]
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text  # a string argument (an enum's name ...): kept as written


def _node(event: dict) -> OpNode:
    args = event.get("args") or {}
    start = float(event["ts"])
    return OpNode(
        name=event["name"],
        start_us=start,
        end_us=start + float(event.get("dur", 0.0)),
        input_shapes=list(args.get("Input Dims") or []),
        input_dtypes=list(args.get("Input type") or []),
        is_range=event.get("cat") == "user_annotation" or event["name"].startswith("ProfilerStep"),
        concrete_inputs=[concrete_value(v) for v in args.get("Concrete Inputs") or []],
    )


def _nest(spans: list[tuple[OpNode, int]]) -> tuple[list[OpNode], list[OpNode]]:
    """One thread's spans as a tree: (roots, every node in start order). Ties: the longer span is the parent."""
    roots, ordered, stack = [], [], []
    for node, _ in sorted(spans, key=lambda s: (s[0].start_us, -s[0].end_us, s[1])):
        while stack and node.start_us >= stack[-1].end_us:
            stack.pop()
        (stack[-1].children if stack else roots).append(node)
        stack.append(node)
        ordered.append(node)
    return roots, ordered


def _innermost(ordered: list[OpNode], starts: list[float], ts: float) -> str | None:
    """The innermost span of one thread that holds ``ts`` (a [memory] event's op), or None. Spans nest, so
    of those that started by ``ts`` the last one still open is the innermost."""
    for i in range(bisect.bisect_right(starts, ts) - 1, -1, -1):
        if ordered[i].end_us >= ts:
            return ordered[i].name
    return None


def _allocation(args: dict, ts_us: float, op: str | None) -> Allocation:
    kind = int(args.get("Device Type", 0))
    cpu = kind == 0
    device = "CPU" if cpu else f"{_DEVICE_TYPES.get(kind, f'DEVICE{kind}')}:{int(args.get('Device Id', 0))}"
    return Allocation(
        ts_us=ts_us,
        ptr=int(args.get("Addr", 0)),
        nbytes=int(args["Bytes"]),
        total_allocated=int(args.get("Total Allocated", 0)),
        total_reserved=None if cpu else int(args.get("Total Reserved", 0)),
        device=device,
        op=op,
    )


def read_trace(path: Path) -> TorchTrace:
    """Read one ``*.pt.trace.json``; a file that is not torch.profiler's chrome trace is a LabError."""
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
        events = document["traceEvents"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise LabError(
            f"{path} is not a torch.profiler chrome trace ({err})",
            "give the *.pt.trace.json that tensorboard_trace_handler wrote",
        ) from err
    trace_start_us = float(document.get("baseTimeNanoseconds", 0)) / 1000.0
    spans: dict[tuple, list[tuple[OpNode, int]]] = {}
    memory: list[tuple[float, int, tuple, dict]] = []
    for index, event in enumerate(events):
        if not isinstance(event, dict) or "ts" not in event:
            continue
        thread = (event.get("pid"), event.get("tid"))
        if event.get("ph") == "X" and event.get("cat") in SPAN_CATEGORIES:
            spans.setdefault(thread, []).append((_node(event), index))
        elif event.get("name") == MEMORY_EVENT and "Bytes" in (event.get("args") or {}):
            memory.append((float(event["ts"]), index, thread, event["args"]))
    roots, threads = [], {}
    for thread, items in spans.items():
        thread_roots, ordered = _nest(items)
        roots += thread_roots
        threads[thread] = (ordered, [n.start_us for n in ordered])
    allocations = [
        _allocation(args, trace_start_us + ts, _innermost(*threads.get(thread, ([], [])), ts))
        for ts, _, thread, args in sorted(memory, key=lambda m: (m[0], m[1]))
    ]
    distributed = document.get("distributedInfo")
    return TorchTrace(
        sorted(roots, key=lambda n: n.start_us),
        trace_start_us,
        allocations,
        distributed if isinstance(distributed, dict) else None,
    )


def find_trace(folder: Path) -> Path:
    """The one ``*.pt.trace.json`` a profile wrote into ``folder``; none, or several, is a LabError."""
    found = sorted(Path(folder).glob("*.pt.trace.json"))
    if len(found) != 1:
        raise LabError(
            f"{folder} holds {len(found)} torch.profiler traces (*.pt.trace.json), expected 1",
            "profile into an empty folder: one run, one trace",
        )
    return found[0]


def write_ascend_pt_from_trace(
    trace: Path, parent: Path, first_step: int, profiler_info: dict, rank: int | None = None
) -> Path:
    """torch.profiler's trace -> a portable ``*_ascend_pt`` folder under ``parent`` (one rank's, when
    ``rank`` is given); returns it. ``first_step``: the first active step (wait + warmup of the schedule)."""
    return _write(read_trace(trace), parent, first_step, profiler_info, rank)


def _write(
    found: TorchTrace, parent: Path, first_step: int | None, profiler_info: dict, rank: int | None = None
) -> Path:
    """A read trace -> its ``*_ascend_pt`` under ``parent``; ``first_step`` None: the trace's own first
    ``ProfilerStep#N``."""
    first = _first_step(found) if first_step is None else first_step
    return write_op_tree(found.roots, found.trace_start_us, found.allocations, parent, first, profiler_info, rank)


PROFILER_STEP = re.compile(r"^ProfilerStep#(\d+)$")


def raw_traces(folder: Path) -> list[Path]:
    """The torch.profiler traces of a folder a profiler wrote outside the lab (a copied 04 lesson, the copied DDP
    lesson's ranks, any PyTorch user's ``tensorboard_trace_handler``): ``*.pt.trace.json`` in it or one level down,
    and no export of torch_npu's or msprof's layout beside it, nor a lab run's run_info.json (a lab run is read as
    it is, an incomplete one refused as such). Empty otherwise."""
    folder = Path(folder)
    if (
        not folder.is_dir()
        or any(folder.glob("*_ascend_pt"))
        or any(folder.glob("PROF_*"))
        or (folder / "ASCEND_PROFILER_OUTPUT").is_dir()
        or (folder / "run_info.json").is_file()
    ):
        return []
    return sorted(folder.glob("*.pt.trace.json")) or sorted(folder.glob("*/*.pt.trace.json"))


def raw_trace(folder: Path) -> Path | None:
    """The one trace of :func:`raw_traces`; None when there is none; several are a LabError (one run, one trace)."""
    found = raw_traces(folder)
    if len(found) > 1:
        raise LabError(
            f"{folder} holds {len(found)} torch.profiler traces (*.pt.trace.json): "
            f"{', '.join(p.name for p in found[:3])}",
            "give the folder of one run (one trace)",
        )
    return found[0] if found else None


_RANK_IN_NAME = re.compile(r"_rank(\d+)\.")  # the DDP lesson's worker name: <host>_rank<r>.<ns>.pt.trace.json


def distributed_rank(trace: Path, distributed: dict | None) -> tuple[int, int | None] | None:
    """(rank, world size) of a trace written under torch.distributed: its ``distributedInfo`` (torch.profiler
    writes it whenever a process group is up), else a ``_rank<r>.`` in its name; None when neither says."""
    if distributed and isinstance(distributed.get("rank"), int):
        world = distributed.get("world_size")
        return distributed["rank"], world if isinstance(world, int) else None
    found = _RANK_IN_NAME.search(Path(trace).name)
    return (int(found[1]), None) if found else None


def _profiler_info(trace: Path) -> dict:
    return {
        "config": {"common_config": {"activities": ["ProfilerActivity.CPU"], "schedule": None}},
        "start_info": None,
        "end_info": None,
        "torch_npu_version": None,
        "cann_version": None,
        "backend": f"portable (a torch.profiler trace made outside the lab: {trace.name})",
    }


def _first_step(found: TorchTrace) -> int:
    return min((int(m[1]) for n in found.roots if (m := PROFILER_STEP.match(n.name))), default=0)


def convert_raw_trace(trace: Path, into: Path) -> Path:
    """A torch.profiler trace made outside the lab -> a portable ``*_ascend_pt`` folder under ``into`` (the lab's
    readers then read it as any capture); its steps are numbered as the trace's ``ProfilerStep#N`` are."""
    return _write(read_trace(trace), into, None, _profiler_info(trace))


def convert_rank_traces(traces: list[Path], into: Path) -> list[Path]:
    """Every rank's torch.profiler trace of one multi-rank job (the copied DDP lesson's, any torch.distributed
    user's) -> one ``*_ascend_pt`` per rank under ``into``, named by ``profiler_info_<rank>.json`` as torch_npu's
    are, so ``cluster``, ``report`` and ``compare`` read them as a multi-rank capture. A trace that names no rank,
    or two traces of one rank, is a LabError: they are not the ranks of one run."""
    seen: dict[int, Path] = {}
    worlds: set[int] = set()
    written = []
    for trace in traces:
        found = read_trace(trace)
        rank = distributed_rank(trace, found.distributed)
        if rank is None:
            raise LabError(
                f"{trace.parent} holds {len(traces)} torch.profiler traces and {trace.name} names no rank "
                "(no distributedInfo, no _rank<r> in its name)",
                "give the folder of one run: one trace, or one trace per rank of one torch.distributed job",
            )
        if rank[0] in seen:
            raise LabError(
                f"{trace.parent}: rank {rank[0]} has two traces ({seen[rank[0]].name}, {trace.name}): "
                "outputs of different runs are mixed",
                "keep exactly one trace per rank, all from one run",
            )
        seen[rank[0]] = trace
        worlds |= {rank[1]} - {None}
        written.append(_write(found, into, None, _profiler_info(trace), rank[0]))
    missing = sorted(set(range(max(worlds, default=0))) - set(seen))
    if len(worlds) > 1 or missing:
        what = (
            f"the traces name world sizes {sorted(worlds)}"
            if len(worlds) > 1
            else f"rank(s) {', '.join(map(str, missing))} of {max(worlds)} have no trace"
        )
        raise LabError(f"{traces[0].parent}: {what}", "every rank of one run must be present, and only those")
    return written
