"""Mode 02 in pyasc: the same fp16 vector Add, written in Python and compiled for the AI Core.

What you will do:
  - write the Add kernel as an ``@asc.jit`` function: each block takes its slice of x, y and z,
    and walks it tile by tile — copy in (GM -> UB), add, copy out (UB -> GM) — with two UB
    slots per tensor so that the next tile's copy-in can overlap this tile's add;
  - launch it as ``add_kernel[cores, stream](x, y, z, block_length)`` and check every element
    against numpy's fp16 add;
  - bracket the tile loop with ``asc.metrics_prof_start()`` / ``asc.metrics_prof_stop()`` so that
    ``msprof op`` measures the loop only.

What you will learn:
  - how pyasc spells the AscendC calls of ``add_kernel.cpp`` (``set_global_buffer``, ``LocalTensor``,
    ``data_copy``, ``add``) and how, without TQue, ``set_flag`` / ``wait_flag`` order the pipes yourself:
    MTE2 -> V before the add, V -> MTE3 before the copy-out, MTE3 -> MTE2 before a slot is refilled;
  - that the profile of this kernel is read exactly like the C++ one's (``run.sh 0 --kernel pyasc``).

Run it alone: ``python add_pyasc.py -r NPU --device 0`` (pyasc, CANN, an NPU), ``-r Model -v Ascend910B1``
(CANN's simulator: its libraries on the loader's path first, ``export LD_LIBRARY_PATH=$ASCEND_HOME_PATH/tools/
simulator/Ascend910B1/lib:$LD_LIBRARY_PATH``); profile it with ``msprof op --output=prof_out --kernel-name=add_kernel
--aic-metrics=KernelScale,PipeUtilization python add_pyasc.py -r NPU --device 0``. Without pyasc, the lab's
CPU twin of it stands in: ``PYTHONPATH=<lab>/common/modes/ascendc/pyasc_twin/site python add_pyasc.py``.
"""

from __future__ import annotations

import argparse

import numpy as np

import asc
import asc.lib.runtime as rt
import asc.runtime.config as config

# --- 1. The sizes: those of add_kernel.cpp (a tile must stay whole 32-byte blocks: 16 fp16) ---------
TOTAL_LENGTH = 8 * 1024  # elements in x, y and z  <- your sizes here
USE_CORE_NUM = 8  # blocks
TILE_NUM = 8  # tiles per block
BUFFER_NUM = 2  # UB slots per tensor: the double buffer
BLOCK_LENGTH = TOTAL_LENGTH // USE_CORE_NUM  # elements per block: 1024
TILE_LENGTH = BLOCK_LENGTH // TILE_NUM // BUFFER_NUM  # elements per slot: 64
SEED = 2024

# fp16 sums must equal numpy's (round to nearest, ties to even) bit for bit on the twin, which rounds so; on
# an NPU 1 ULP is allowed, as no document states the vector unit's rounding for every input.
MAX_ULP = {"twin": 0, "npu": 1}


# --- 2. The kernel ------------------------------------------------------------------------------------
@asc.jit
def add_kernel(x: asc.GlobalAddress, y: asc.GlobalAddress, z: asc.GlobalAddress, block_length: int):
    # This block's slice of the three tensors in global memory (GM).
    first = asc.get_block_idx() * block_length
    x_gm = asc.GlobalTensor()
    y_gm = asc.GlobalTensor()
    z_gm = asc.GlobalTensor()
    x_gm.set_global_buffer(x + first, block_length)
    y_gm.set_global_buffer(y + first, block_length)
    z_gm.set_global_buffer(z + first, block_length)

    # The Unified Buffer (UB), laid out by hand: x's two slots, then y's, then z's.
    tile = block_length // TILE_NUM // BUFFER_NUM
    slots_bytes = BUFFER_NUM * tile * x.dtype.sizeof()
    x_ub = asc.LocalTensor(x.dtype, asc.TPosition.VECIN, 0, BUFFER_NUM * tile)
    y_ub = asc.LocalTensor(x.dtype, asc.TPosition.VECIN, slots_bytes, BUFFER_NUM * tile)
    z_ub = asc.LocalTensor(x.dtype, asc.TPosition.VECOUT, 2 * slots_bytes, BUFFER_NUM * tile)

    # Both slots start free: mark each as "copied out" once, so the first refill does not wait.
    for slot in range(BUFFER_NUM):
        asc.set_flag(asc.HardEvent.MTE3_MTE2, slot)

    asc.metrics_prof_start()  # msprof op --aic-metrics=KernelScale measures from here ...
    for i in range(TILE_NUM * BUFFER_NUM):
        slot = i % BUFFER_NUM
        at = slot * tile
        # copy in (MTE2), once the slot's previous tile has left the UB
        asc.wait_flag(asc.HardEvent.MTE3_MTE2, slot)
        asc.data_copy(x_ub[at:], x_gm[i * tile :], tile)
        asc.data_copy(y_ub[at:], y_gm[i * tile :], tile)
        asc.set_flag(asc.HardEvent.MTE2_V, slot)
        # add (V), once both copies have landed
        asc.wait_flag(asc.HardEvent.MTE2_V, slot)
        asc.add(z_ub[at:], x_ub[at:], y_ub[at:], tile)
        asc.set_flag(asc.HardEvent.V_MTE3, slot)
        # copy out (MTE3), once the sum is written; then the slot is free again
        asc.wait_flag(asc.HardEvent.V_MTE3, slot)
        asc.data_copy(z_gm[i * tile :], z_ub[at:], tile)
        asc.set_flag(asc.HardEvent.MTE3_MTE2, slot)
    asc.metrics_prof_stop()  # ... to here

    for slot in range(BUFFER_NUM):  # wait for each slot's last copy-out before the kernel ends
        asc.wait_flag(asc.HardEvent.MTE3_MTE2, slot)


# --- 3. Launch and check ------------------------------------------------------------------------------
def make_inputs(seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    """x and y: fp16 values in [-8, 8), from a fixed seed."""
    rng = np.random.default_rng(seed)
    return rng.uniform(-8, 8, TOTAL_LENGTH).astype(np.float16), rng.uniform(-8, 8, TOTAL_LENGTH).astype(np.float16)


def launch(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """One launch on USE_CORE_NUM blocks; z is filled with NaN first, so an element never written fails."""
    z = np.full_like(x, np.nan)
    add_kernel[USE_CORE_NUM, rt.current_stream()](x, y, z, BLOCK_LENGTH)
    return z


def mismatches(x: np.ndarray, y: np.ndarray, z: np.ndarray, max_ulp: int) -> list[tuple[int, float, float]]:
    """(index, expected, actual) of every element further than ``max_ulp`` fp16 steps from numpy's x + y."""
    want = x + y  # numpy adds fp16 in float32 and rounds once to fp16: the correctly rounded sum
    steps = np.abs(_ordered(want) - _ordered(z))
    bad = np.flatnonzero((steps > max_ulp) | (np.isnan(want) != np.isnan(z)))
    return [(int(i), float(want[i]), float(z[i])) for i in bad]


def _ordered(values: np.ndarray) -> np.ndarray:
    """fp16 bit patterns mapped to integers in value order, so a difference counts fp16 steps."""
    bits = values.view(np.int16).astype(np.int64)
    return np.where(bits < 0, -(bits & 0x7FFF), bits)


# --- 4. Run: warm-up launches, then the measured ones; every launch verified ------------------------------
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-r", default="Model", choices=["Model", "NPU"], help="pyasc backend (default Model)")
    # type=config.Platform: set_platform takes a Platform member (pyasc reads its .value), as pyasc's examples pass it
    parser.add_argument("-v", type=config.Platform, default=None, help="SoC for the Model backend, e.g. Ascend910B1")
    parser.add_argument("--device", type=int, default=None, help="logical NPU id for -r NPU")
    parser.add_argument("--warmup", type=int, default=0, help="launches before the measured ones (default 0)")
    parser.add_argument("--launches", type=int, default=1, help="measured launches (default 1)")
    args = parser.parse_args()
    config.set_platform(config.Backend(args.r), args.v, device_id=args.device)
    print(
        f"kernel sizes: total_length={TOTAL_LENGTH} block_dim={USE_CORE_NUM} block_length={BLOCK_LENGTH} "
        f"tile_num={TILE_NUM} buffer_num={BUFFER_NUM} tile_length={TILE_LENGTH}"
    )
    max_ulp = MAX_ULP["twin" if getattr(asc, "LAB_TWIN", False) else "npu"]
    (x, y), total = make_inputs(), args.warmup + args.launches
    for i in range(total):  # warm-up first: those launches pay for compiling and first-touch costs
        bad = mismatches(x, y, launch(x, y), max_ulp)
        for index, want, got in bad[:5]:
            print(f"mismatch in launch {i} at {index}: expected {want}, got {got}")
        if bad:
            print(f"verified: {TOTAL_LENGTH - len(bad)} of {TOTAL_LENGTH} elements in launch {i}")
            return 1
    print(
        f"verified: {TOTAL_LENGTH} of {TOTAL_LENGTH} elements equal numpy's fp16 x + y (within {max_ulp} ULP) "
        f"in each of {total} launches ({args.warmup} warm-up + {args.launches} measured)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
