"""The lab's CPU twin of pyasc's ``asc`` language: the subset mode 02's pyasc kernel uses.

Same names and call shapes as pyasc (``asc.jit``, ``asc.GlobalAddress``, ``asc.GlobalTensor``,
``asc.LocalTensor``, ``asc.TPosition``, ``asc.HardEvent``, ``asc.get_block_idx``, ``asc.data_copy``,
``asc.add`` / ``asc.sub``, ``asc.set_flag`` / ``asc.wait_flag``, ``asc.metrics_prof_start`` /
``asc.metrics_prof_stop``, the ``asc.float16`` / ``asc.float32`` data types), executed on the host.
pyasc compiles an ``@asc.jit`` function for the AI Core; the twin calls it as Python, once per block.
Anything else of pyasc is absent here on purpose: a kernel that needs more fails at the name.
"""

from __future__ import annotations

import functools
import operator
import time
from dataclasses import dataclass

import numpy as np

from asc._twin import (
    COPY_GRANULE_BYTES,
    UB_BYTES,
    HardEvent,
    Pipe,
    Timer,
    TPosition,
    TwinError,
    current_block,
    fail,
    fp16_exact,
    run_launch,
)

LAB_TWIN = True  # pyasc_twin.is_twin() reads this

__all__ = [
    "jit",
    "GlobalAddress",
    "GlobalTensor",
    "LocalTensor",
    "TPosition",
    "HardEvent",
    "get_block_idx",
    "data_copy",
    "add",
    "sub",
    "set_flag",
    "wait_flag",
    "metrics_prof_start",
    "metrics_prof_stop",
    "float16",
    "float32",
    "DataType",
]


@dataclass(frozen=True)
class DataType:
    """An element type: its pyasc name and numpy type; ``sizeof()`` in bytes, as in pyasc."""

    name: str
    numpy: type

    def sizeof(self) -> int:
        return np.dtype(self.numpy).itemsize


float16 = DataType("float16", np.float16)
float32 = DataType("float32", np.float32)
_BY_NUMPY = {np.dtype(t.numpy): t for t in (float16, float32)}


class GlobalAddress:
    """A kernel argument in global memory: a numpy array and an element offset into it (``x + n``)."""

    def __init__(self, array: np.ndarray, offset: int = 0) -> None:
        self.array, self.offset = array, offset
        self.dtype = _BY_NUMPY[array.dtype]

    def __add__(self, elements: int) -> GlobalAddress:
        return GlobalAddress(self.array, self.offset + int(elements))


class GlobalTensor:
    """A window on global memory: ``set_global_buffer(address, length)``, then ``gm[start:]`` for sub-windows."""

    def __init__(self) -> None:
        self.data: np.ndarray | None = None
        self.dtype: DataType | None = None

    def set_global_buffer(self, buffer: GlobalAddress, buffer_size: int | None = None) -> None:
        end = buffer.array.size if buffer_size is None else buffer.offset + int(buffer_size)
        if not 0 <= buffer.offset <= end <= buffer.array.size:
            fail(
                "set_global_buffer",
                f"elements [{buffer.offset}, {end}) lie outside the {buffer.array.size}-element argument",
                "check the block's offset and length against the launch's sizes",
            )
        self.data, self.dtype = buffer.array[buffer.offset : end], buffer.dtype

    def __getitem__(self, index: slice) -> GlobalTensor:
        start = _slice_start(index, "GlobalTensor")
        if self.data is None or start > self.data.size:
            fail(
                "GlobalTensor[...]",
                f"start {start} is past the tensor's {0 if self.data is None else self.data.size} "
                "elements (or set_global_buffer was not called)",
                "keep offsets inside the block's slice",
            )
        view = GlobalTensor()
        view.data, view.dtype = self.data[start:], self.dtype
        return view


class LocalTensor:
    """``LocalTensor(dtype, position, addr, length)``: ``length`` elements at byte ``addr`` of this block's UB."""

    def __init__(self, dtype: DataType, pos: TPosition = TPosition.VECIN, addr: int = 0, tile_size: int = 0) -> None:
        block = current_block("LocalTensor(...)")
        nbytes = int(tile_size) * dtype.sizeof()
        if addr % COPY_GRANULE_BYTES or addr < 0 or addr + nbytes > UB_BYTES:
            fail(
                "LocalTensor(...)",
                f"bytes [{addr}, {addr + nbytes}) of the UB: the address must be a multiple of "
                f"{COPY_GRANULE_BYTES} and the tensor inside the {UB_BYTES}-byte UB",
                "lay the buffers out at 32-byte multiples within the UB",
            )
        self.dtype, self.position, self.addr = dtype, TPosition(pos), int(addr)
        self.data = np.frombuffer(block.ub, dtype=dtype.numpy, count=int(tile_size), offset=int(addr))

    def __getitem__(self, index: slice) -> LocalTensor:
        start = _slice_start(index, "LocalTensor")
        if start > self.data.size:
            fail(
                "LocalTensor[...]",
                f"start {start} is past the tensor's {self.data.size} elements",
                "keep offsets inside the tensor",
            )
        view = object.__new__(LocalTensor)
        view.dtype, view.position = self.dtype, self.position
        view.addr, view.data = self.addr + start * self.dtype.sizeof(), self.data[start:]
        return view

    def byte_range(self, count: int) -> tuple[int, int]:
        return self.addr, self.addr + count * self.dtype.sizeof()


def _slice_start(index, what: str) -> int:
    if isinstance(index, slice) and index.stop is None and index.step is None:
        return int(index.start or 0)
    fail(f"{what}[...]", f"{index!r}: only [start:] is supported, as in pyasc", "write tensor[offset:]")


def jit(fn=None, **options):
    """``@asc.jit``: the function becomes a kernel, launched as ``kernel[core_num, stream](*args)``."""
    if fn is None:
        return lambda f: Kernel(f)
    return Kernel(fn)


class Kernel:
    def __init__(self, fn) -> None:
        self.fn, self.__name__ = fn, fn.__name__
        functools.update_wrapper(self, fn)

    def __getitem__(self, launch) -> functools.partial:
        core_num, _stream = launch if isinstance(launch, tuple) else (launch, None)
        if not isinstance(core_num, int) or core_num <= 0:
            raise TwinError(
                f"{self.__name__}[{core_num!r}, ...]: core_num must be a positive int",
                "launch as kernel[USE_CORE_NUM, stream](...)",
            )
        return functools.partial(self._launch, core_num)

    def __call__(self, *args):
        raise TwinError(
            f"{self.__name__}(...) called without [core_num, stream]",
            f"launch it as {self.__name__}[core_num, asc.lib.runtime.current_stream()](...)",
        )

    def _launch(self, core_num: int, *args) -> None:
        converted = []
        for arg in args:
            if isinstance(arg, np.ndarray):
                if arg.dtype not in _BY_NUMPY or not arg.flags.c_contiguous:
                    raise TwinError(
                        f"{self.__name__}: an argument of dtype {arg.dtype} (contiguous: {arg.flags.c_contiguous})",
                        "pass contiguous float16 or float32 numpy arrays",
                    )
                converted.append(GlobalAddress(arg))
            elif isinstance(arg, (int, float)):
                converted.append(arg)
            else:
                raise TwinError(
                    f"{self.__name__}: argument of type {type(arg).__name__}",
                    "the twin takes numpy arrays and Python numbers",
                )
        run_launch(self.fn, self.__name__, core_num, tuple(converted))


def get_block_idx() -> int:
    """This block's index, 0 .. core_num - 1."""
    return current_block("get_block_idx()").index


def data_copy(dst, src, count: int) -> None:
    """GM -> UB (MTE2) or UB -> GM (MTE3) of ``count`` elements, whole 32-byte blocks only."""
    block = current_block("data_copy")
    count = int(count)
    if isinstance(dst, LocalTensor) and isinstance(src, GlobalTensor):
        pipe, key, local = Pipe.MTE2, "mte2_ns", dst
    elif isinstance(dst, GlobalTensor) and isinstance(src, LocalTensor):
        pipe, key, local = Pipe.MTE3, "mte3_ns", src
    else:
        fail(
            "data_copy",
            f"{type(dst).__name__} <- {type(src).__name__}: the twin copies GM -> UB and UB -> GM only",
            "copy between a GlobalTensor and a LocalTensor",
        )
    nbytes = count * local.dtype.sizeof()
    if count <= 0 or nbytes % COPY_GRANULE_BYTES:
        fail(
            "data_copy",
            f"{count} elements = {nbytes} bytes, not a whole number of {COPY_GRANULE_BYTES}-byte blocks",
            "copy a multiple of 32 bytes (16 fp16 elements)",
        )
    if src.data is None or dst.data is None or count > min(dst.data.size, src.data.size):
        fail(
            "data_copy",
            f"{count} elements, but dst holds {0 if dst.data is None else dst.data.size} and src "
            f"{0 if src.data is None else src.data.size}",
            "copy no more than both tensors hold",
        )
    lo, hi = local.byte_range(count)
    if pipe is Pipe.MTE3:
        block.check_read(pipe, lo, hi, "data_copy")
    with Timer(block, key):
        np.copyto(dst.data[:count], src.data[:count])
    if pipe is Pipe.MTE2:
        block.record_write(pipe, lo, hi)


def _vector_binary(call: str, op, dst: LocalTensor, src0: LocalTensor, src1: LocalTensor, count: int) -> None:
    block = current_block(call)
    count = int(count)
    if not all(isinstance(t, LocalTensor) for t in (dst, src0, src1)):
        fail(call, "vector instructions work on LocalTensors (UB) only", "copy the data into the UB first")
    if not (count > 0 and count <= min(dst.data.size, src0.data.size, src1.data.size)):
        fail(
            call,
            f"{count} elements, but the tensors hold {dst.data.size}, {src0.data.size}, {src1.data.size}",
            "pass a count no larger than every operand",
        )
    for src in (src0, src1):
        block.check_read(Pipe.V, *src.byte_range(count), call)
    with Timer(block, "vec_ns"):
        if dst.dtype is float16:
            dst.data[:count] = fp16_exact(op, src0.data[:count], src1.data[:count])
        else:
            dst.data[:count] = op(src0.data[:count], src1.data[:count])
    block.record_write(Pipe.V, *dst.byte_range(count))


def add(dst: LocalTensor, src0: LocalTensor, src1: LocalTensor, count: int) -> None:
    """dst = src0 + src1 over ``count`` elements, on the vector pipe (V)."""
    _vector_binary("add", operator.add, dst, src0, src1, count)


def sub(dst: LocalTensor, src0: LocalTensor, src1: LocalTensor, count: int) -> None:
    """dst = src0 - src1 over ``count`` elements, on the vector pipe (V)."""
    _vector_binary("sub", operator.sub, dst, src0, src1, count)


def set_flag(event: HardEvent, event_id: int) -> None:
    """The producer pipe of ``event`` signals: what it has written so far may be used."""
    current_block("set_flag").set_flag(HardEvent(event), int(event_id))


def wait_flag(event: HardEvent, event_id: int) -> None:
    """The consumer pipe of ``event`` waits for the matching ``set_flag``."""
    current_block("wait_flag").wait_flag(HardEvent(event), int(event_id))


def metrics_prof_start() -> None:
    """Open the region ``msprof op`` measures; the twin times it (``region_ns``)."""
    block = current_block("metrics_prof_start")
    if block.region_start is not None:
        fail("metrics_prof_start", "called twice without metrics_prof_stop()", "close the region first")
    block.region_start = time.perf_counter_ns()


def metrics_prof_stop() -> None:
    """Close the region opened by ``metrics_prof_start``."""
    block = current_block("metrics_prof_stop")
    if block.region_start is None:
        fail("metrics_prof_stop", "no metrics_prof_start() before it", "open the region with asc.metrics_prof_start()")
    block.times["region_ns"] += time.perf_counter_ns() - block.region_start
    block.region_start = None
