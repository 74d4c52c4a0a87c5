"""The twin's machinery: blocks, Unified Buffer, global memory views, pipes, flags and timers.

One launch runs the kernel function once per block, one block after another, on the host. Each
block gets its own Unified Buffer (UB) of :data:`UB_BYTES`, filled with 0xFF bytes so that a value
read before it was written is an fp16 NaN. Global memory is the caller's numpy arrays.

What the twin checks, stopping with one line that names the call and its line in the kernel:
copies of whole 32-byte blocks, copies and vector ops that stay inside their tensors, LocalTensors
inside the UB, a pipe reading UB bytes another pipe wrote with no ``set_flag`` / ``wait_flag`` of
that pipe pair in between (read-after-write), a ``wait_flag`` with no ``set_flag`` before it (the
NPU would wait forever), flags left set at the end of a block, and a metrics region left open.

Timers, per block: the whole body (``kernel_ns``), the metrics region (``region_ns``), and the
three pipes: GM -> UB copies (MTE2), vector ops (V), UB -> GM copies (MTE3). The twin is its own
profiler: when ``$ASCENDC_TWIN_TIMINGS`` names a file, every launch's rows are written there as CSV
when the program exits, with the columns the C++ twin writes, so the lab reads both the same way.

The twin stands alone (numpy and the standard library): a kernel file run with ``site/`` on its path
needs nothing of the lab. A :class:`TwinError` the program does not catch is printed as one
``Error:`` line, without a traceback.
"""

from __future__ import annotations

import atexit
import csv
import enum
import os
import sys
import time
from dataclasses import dataclass, field

import numpy as np

# The Unified Buffer of an Atlas A2 AI Vector core, as pyasc's launcher checks it
# (runtime/launcher.py get_platform_info: ub_size=192 * 1024 for Ascend910B*).
UB_BYTES = 192 * 1024
COPY_GRANULE_BYTES = 32  # DataCopy moves whole 32-byte blocks; UB addresses are 32-byte aligned
UB_FILL = 0xFF  # unwritten UB reads as 0xFFFF: an fp16 NaN

TWIN_DIR = os.path.dirname(os.path.abspath(__file__))


class TwinError(Exception):
    """A kernel broke a rule the NPU enforces by hanging or by computing garbage: what, and what to do."""

    def __init__(self, what: str, fix: str = "") -> None:
        super().__init__(what)
        self.what, self.fix = what, fix

    def __str__(self) -> str:
        return f"{self.what} — {self.fix}" if self.fix else self.what


def _excepthook(kind, error, traceback) -> None:
    """An uncaught TwinError is one ``Error:`` line (exit 1); anything else goes to Python's own hook."""
    if isinstance(error, TwinError):
        print(f"Error: {error}", file=sys.stderr)
    else:
        sys.__excepthook__(kind, error, traceback)


sys.excepthook = _excepthook


def call_site() -> str:
    """``file:line`` of the innermost frame outside the twin: the kernel line that made the call."""
    frame = sys._getframe(1)
    while frame is not None and os.path.dirname(os.path.abspath(frame.f_code.co_filename)).startswith(TWIN_DIR):
        frame = frame.f_back
    if frame is None:
        return "?"
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"


def fail(call: str, what: str, fix: str) -> None:
    raise TwinError(f"{call} at {call_site()}: {what}", fix)


class Pipe(enum.Enum):
    S = "scalar"
    MTE2 = "MTE2"
    V = "V"
    MTE3 = "MTE3"


class HardEvent(enum.Enum):
    """``<producer>_<consumer>``: the consumer pipe waits until the producer pipe has finished."""

    MTE2_V = "MTE2_V"
    V_MTE2 = "V_MTE2"
    V_MTE3 = "V_MTE3"
    MTE3_V = "MTE3_V"
    MTE2_MTE3 = "MTE2_MTE3"
    MTE3_MTE2 = "MTE3_MTE2"
    S_V = "S_V"
    V_S = "V_S"
    S_MTE2 = "S_MTE2"
    MTE2_S = "MTE2_S"
    S_MTE3 = "S_MTE3"
    MTE3_S = "MTE3_S"

    @property
    def pipes(self) -> tuple[Pipe, Pipe]:
        producer, consumer = self.value.split("_")
        return Pipe[producer], Pipe[consumer]


class TPosition(enum.Enum):
    """Logical positions of a LocalTensor; on the vector core VECIN / VECOUT / VECCALC all live in UB."""

    GM = "GM"
    VECIN = "VECIN"
    VECOUT = "VECOUT"
    VECCALC = "VECCALC"


@dataclass
class Write:
    """UB bytes [lo, hi) written by ``pipe``; ``seen_by``: the pipes a flag has since made it visible to."""

    pipe: Pipe
    lo: int
    hi: int
    seen_by: set[Pipe] = field(default_factory=set)


@dataclass
class Block:
    """One block's state while it runs: its index, UB, pending writes, flags, region and timers (ns)."""

    index: int
    ub: bytearray
    writes: list[Write] = field(default_factory=list)
    flags: dict[tuple[HardEvent, int], list[list[Write]]] = field(default_factory=dict)
    region_start: int | None = None
    region_seen: bool = False
    times: dict[str, int] = field(
        default_factory=lambda: {"kernel_ns": 0, "region_ns": 0, "mte2_ns": 0, "vec_ns": 0, "mte3_ns": 0}
    )

    def check_read(self, pipe: Pipe, lo: int, hi: int, call: str) -> None:
        for w in self.writes:
            if w.pipe is not pipe and pipe not in w.seen_by and w.lo < hi and lo < w.hi:
                event = f"{w.pipe.name}_{pipe.name}"
                fail(
                    call,
                    f"{pipe.value} reads UB bytes [{max(lo, w.lo)}, {min(hi, w.hi)}) that {w.pipe.value} "
                    f"wrote, with no set_flag/wait_flag(HardEvent.{event}, id) in between; on the NPU the "
                    "pipes run in parallel and this read may see the old bytes",
                    f"add asc.set_flag(asc.HardEvent.{event}, id) and asc.wait_flag(asc.HardEvent.{event}, id) "
                    "between the write and this read",
                )

    def record_write(self, pipe: Pipe, lo: int, hi: int) -> None:
        # bytes written again replace what an older write left pending there
        self.writes = [w for w in self.writes if not (lo <= w.lo and w.hi <= hi)]
        self.writes.append(Write(pipe, lo, hi))

    def set_flag(self, event: HardEvent, event_id: int) -> None:
        producer, _ = event.pipes
        self.flags.setdefault((event, event_id), []).append([w for w in self.writes if w.pipe is producer])

    def wait_flag(self, event: HardEvent, event_id: int) -> None:
        pending = self.flags.get((event, event_id))
        if not pending:
            fail(
                "wait_flag",
                f"HardEvent.{event.name} id {event_id} was never set (or its set_flag was already "
                "waited for): on the NPU this pipe would wait forever",
                f"call asc.set_flag(asc.HardEvent.{event.name}, {event_id}) before this wait_flag",
            )
        _, consumer = event.pipes
        for w in pending.pop(0):
            w.seen_by.add(consumer)

    def finish(self, kernel: str) -> None:
        if self.region_start is not None:
            raise TwinError(
                f"{kernel} block {self.index}: metrics_prof_start() with no metrics_prof_stop() "
                "before the kernel ended",
                "call asc.metrics_prof_stop() after the region",
            )
        left = [f"{event.name} id {eid} x{len(sets)}" for (event, eid), sets in self.flags.items() if sets]
        if left:
            raise TwinError(
                f"{kernel} block {self.index}: set_flag without a matching wait_flag at the end of "
                f"the kernel: {', '.join(left)}",
                "pair every asc.set_flag with an asc.wait_flag of the same event and id",
            )


@dataclass
class State:
    """The block that runs now (None outside a launch) and the timer rows of every launch so far."""

    block: Block | None = None
    rows: list[dict[str, int]] = field(default_factory=list)
    launches: int = 0


STATE = State()


def current_block(call: str) -> Block:
    if STATE.block is None:
        raise TwinError(
            f"{call} called outside a kernel launch",
            "call it inside an @asc.jit function launched as kernel[core_num, stream](...)",
        )
    return STATE.block


class Timer:
    """Adds the time spent in a ``with`` block to one of the block's timers."""

    def __init__(self, block: Block, key: str) -> None:
        self.block, self.key = block, key

    def __enter__(self) -> None:
        self.t0 = time.perf_counter_ns()

    def __exit__(self, *exc) -> None:
        self.block.times[self.key] += time.perf_counter_ns() - self.t0


def run_launch(fn, name: str, core_num: int, args: tuple) -> None:
    """Run ``fn`` once per block, one after another; append one timer row per block to ``STATE.rows``."""
    if STATE.block is not None:
        raise TwinError(f"{name} launched from inside a kernel", "launch kernels from host code only")
    launch = STATE.launches
    start_unix, t0 = time.time_ns(), time.perf_counter_ns()
    rows = []
    for index in range(core_num):
        block = Block(index, bytearray([UB_FILL]) * UB_BYTES)
        STATE.block = block
        try:
            b0 = time.perf_counter_ns()
            fn(*args)
            block.times["kernel_ns"] = time.perf_counter_ns() - b0
            block.finish(name)
        finally:
            STATE.block = None
        rows.append({"launch": launch, "block": index, **block.times})
    wall = time.perf_counter_ns() - t0
    for row in rows:
        row.update(start_unix_ns=start_unix, wall_ns=wall)
    STATE.rows += rows
    STATE.launches += 1


def take_rows() -> list[dict[str, int]]:
    """The timer rows recorded since the last call (one per block and launch), then forget them."""
    rows, STATE.rows = STATE.rows, []
    return rows


TIMINGS_VAR = "ASCENDC_TWIN_TIMINGS"
TIMING_COLUMNS = [
    "launch",
    "block",
    "start_unix_ns",
    "wall_ns",
    "kernel_ns",
    "region_ns",
    "mte2_ns",
    "vec_ns",
    "mte3_ns",
]


@atexit.register
def write_timings() -> None:
    """At exit: the rows not taken yet, to ``$ASCENDC_TWIN_TIMINGS`` when it is set (the C++ twin's columns)."""
    path = os.environ.get(TIMINGS_VAR)
    if not path:
        return
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, TIMING_COLUMNS)
        writer.writeheader()
        writer.writerows(take_rows())


def fp16_exact(op, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``op`` on two fp16 arrays, rounded once to fp16 (nearest, ties to even), as the vector unit does.

    Two fp16 values add or subtract exactly in float64 (their exact result needs at most 51 bits),
    so one float64 -> float16 conversion (numpy's is round-to-nearest-even) gives the IEEE result.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        return op(a.astype(np.float64), b.astype(np.float64)).astype(np.float16)
