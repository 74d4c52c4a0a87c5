"""A short calibration of this machine: memory bandwidth and GEMM throughput, measured now.

The portable backend has no datasheet, so its "device peaks" for the bottleneck analysis are
what this CPU does on two simple kernels: a large copy (bytes read + written per second) and a
square fp32 matrix product through torch (the same library the profiled ops use). The best of a
few repetitions is kept: a peak, not an average. It takes about half a second plus torch's import,
so the result is kept in ``.lab_cache`` (common.cache) while the machine (host, CPU model, cores),
the thread count and the toolchain are unchanged; a run that reuses it says when it was measured,
and checks that the machine is quiet now with a 0.1 s copy probe instead.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import platform
import socket
import statistics
import sys
import time
from typing import TYPE_CHECKING, NamedTuple

from common import cache
from common.analyze.bounds.op import DEVICE_PEAKS, Peaks, device_peaks
from common.formats.readers import cpu_only
from common.formats.rundir import recorded_count

if TYPE_CHECKING:
    from common.formats.datasets import Dataset

# Two copy sizes: 64 MB streams from DRAM, 4 MB mostly stays in cache. The peak is the faster of
# the two, because the profiled ops (a 4 MB weight, a 128 kB activation) are cache-sized too; a
# bound from DRAM bandwidth alone would not be a lower bound for them.
COPY_MB = (64, 4)
GEMM_N = 1024
GEMM_PRECISIONS = (("bf16", "bfloat16"), ("fp16", "float16"))  # measured besides fp32, when torch runs them
REPEATS = 5  # at least; short kernels repeat until BUDGET_S has passed
BUDGET_S = 0.15  # per kernel: on a machine shared with other jobs more tries find a quiet moment


# A quiet machine repeats a kernel within a few percent. When the median try takes this many times
# the best one, something else was using the CPU while the lab measured: the run is "disturbed".
CALIBRATION_SPREAD_MAX = 1.5
NOW = "calibrated on this machine now:"  # how a calibration made in this process introduces itself
# Mode 04's active steps run the same work: their wall times' coefficient of variation (standard
# deviation / mean) above this says the steps were interrupted, not that the model varies.
STEP_CV_MAX = 0.25


def _best(
    fn, repeats: int = REPEATS, spreads: dict | None = None, label: str = "", budget_s: float = BUDGET_S
) -> float:
    fn()  # first call: page faults, thread pool start-up
    best, tries, spent, times = float("inf"), 0, 0.0, []
    while tries < repeats or (spent < budget_s and tries < 200):
        start = time.perf_counter()
        fn()
        took = time.perf_counter() - start
        best, tries, spent = min(best, took), tries + 1, spent + took
        times.append(took)
    if spreads is not None:
        spreads[label] = statistics.median(times) / best if best > 0 else 1.0
    return best


class Measured(NamedTuple):
    """One calibration: the peaks, the median/best time of each kernel's repeats, and the load line when other
    programs kept the cores busy while it was measured (None: quiet, or a kept calibration)."""

    peaks: Peaks
    spreads: dict[str, float]
    busy: str | None = None


@functools.cache
def _measure(threads: int | None = None) -> Measured:
    """The peaks at ``threads`` (None: this process's count): measured once per process, or the kept calibration
    of this machine and a short probe of how quiet it is now."""
    key = json.dumps(_machine(threads), sort_keys=True)
    found = cache.load("calibration", key)
    if found is not None:
        kept = found["result"]
        return Measured(
            Peaks(
                kept["name"],
                kept["flops_per_s"],
                kept["bytes_per_s"],
                f"{kept['source'].replace(NOW, 'calibrated on this machine:', 1)}; measured "
                f"{kept['when']}, kept while this machine, its thread count and torch are unchanged",
                more_flops=tuple((p, f) for p, f in kept.get("more_flops", ())),
            ),
            _probe_spread(),
        )
    load = _load()
    peaks, spreads = _calibrate_now(threads)
    # keep only a quiet machine's peaks: repeats that agree, and no other program running (a machine busy the
    # whole time slows every repeat alike, which their spread cannot show)
    if max(spreads.values(), default=1.0) <= CALIBRATION_SPREAD_MAX and load is None:
        cache.save(
            "calibration",
            key,
            cache.inputs_of((), {}),
            {
                "name": peaks.name,
                "flops_per_s": peaks.flops_per_s,
                "bytes_per_s": peaks.bytes_per_s,
                "more_flops": list(peaks.more_flops),
                "source": peaks.source,
                "when": time.strftime("%Y-%m-%d %H:%M %Z"),
            },
        )
    return Measured(peaks, spreads, load)


def _load() -> str | None:
    """A line when other programs keep the cores busy now (the 1-minute load average above the cores less half
    a core: this process's own work is one), else None."""
    try:
        load = os.getloadavg()[0]
    except OSError:  # not on this platform
        return None
    cores = os.cpu_count() or 1
    return f"load average {load:.2f} on {cores} cores" if load > cores - 0.5 else None


def _machine(threads: int | None = None) -> dict[str, object]:
    """What a calibration depends on besides the toolchain: the host, its CPU, and torch's thread count."""
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    if threads is not None:
        count = str(threads)
    elif "torch" in sys.modules:
        count = str(sys.modules["torch"].get_num_threads())
    else:  # what torch will read when it is imported
        count = os.environ.get("OMP_NUM_THREADS") or "torch's default"
    return {
        "host": socket.gethostname(),
        "machine": platform.machine(),
        "cpu": model,
        "cores": os.cpu_count(),
        "threads": count,
        "gemm": ["fp32"] + [p for p, _ in GEMM_PRECISIONS],
    }


def _probe_spread() -> dict[str, float]:
    """median/best time of a 4 MB copy repeated for 0.1 s: how quiet the machine is now (numpy, no torch)."""
    import numpy as np

    src = np.ones(2**20, dtype=np.float32)
    dst = np.empty_like(src)
    spreads: dict[str, float] = {}
    _best(lambda: np.copyto(dst, src), repeats=REPEATS, spreads=spreads, label="copy 4 MB (probe)", budget_s=0.1)
    return spreads


def _calibrate_now(threads: int | None = None) -> tuple[Peaks, dict[str, float]]:
    import torch

    before = torch.get_num_threads()
    if threads is not None:  # the run's own thread count: the peaks its ops could reach
        torch.set_num_threads(threads)
    try:
        return _calibrate_torch(torch)
    finally:
        torch.set_num_threads(before)


def _calibrate_torch(torch) -> tuple[Peaks, dict[str, float]]:
    bandwidth, spreads = {}, {}
    for mb in COPY_MB:
        src = torch.ones(mb * 2**20 // 4, dtype=torch.float32)
        dst = torch.empty_like(src)
        bandwidth[mb] = (
            2 * src.numel() * 4 / _best(lambda d=dst, s=src: d.copy_(s), spreads=spreads, label=f"copy {mb} MB")
        )  # read + write
    bytes_per_s = max(bandwidth.values())
    flops = {}
    for precision, name in (("fp32", "float32"), *GEMM_PRECISIONS):
        a = torch.rand(GEMM_N, GEMM_N).to(getattr(torch, name))
        b = torch.rand(GEMM_N, GEMM_N).to(a.dtype)
        out = torch.empty(GEMM_N, GEMM_N, dtype=a.dtype)
        try:
            torch.mm(a, b, out=out)
        except RuntimeError:  # this build of torch has no such GEMM on the CPU: no peak for that precision
            continue
        flops[precision] = (
            2
            * GEMM_N**3
            / _best(
                lambda a=a, b=b, out=out: torch.mm(a, b, out=out), spreads=spreads, label=f"{precision} GEMM {GEMM_N}^3"
            )
        )
    return _peaks(torch, bandwidth, bytes_per_s, flops), spreads


def calibrate(threads: int | None = None) -> Peaks:
    """Measured peaks of this machine at ``threads`` torch threads (None: this process's count; cached)."""
    return _measure(threads).peaks


def calibration_disturbance(threads: int | None = None) -> str | None:
    """A 'disturbed' line when this process's calibration repeats spread beyond CALIBRATION_SPREAD_MAX."""
    measured = _measure(threads)
    wide = {k: v for k, v in measured.spreads.items() if v > CALIBRATION_SPREAD_MAX}
    if measured.busy:
        return (
            f"disturbed: other programs kept the cores busy while the lab calibrated this machine "
            f"({measured.busy}): its peaks may be low, so ops may look closer to them than they are; the "
            f"calibration is not kept, and a quieter run measures it again"
        )
    if not wide:
        return None
    listed = ", ".join(f"{k} median {v:.2f}x its best" for k, v in wide.items())
    return (
        f"disturbed: the calibration's repeats spread ({listed}; a quiet machine stays below "
        f"{CALIBRATION_SPREAD_MAX:g}x): another program was using the CPU, so times here may be inflated"
    )


def step_disturbance(step_us: list[float], what: str) -> str | None:
    """A 'disturbed' line when repeats of the same work (steps, forwards, launches) vary beyond STEP_CV_MAX
    (coefficient of variation)."""
    if len(step_us) < 2 or statistics.fmean(step_us) <= 0:
        return None
    cv = statistics.stdev(step_us) / statistics.fmean(step_us)
    if cv <= STEP_CV_MAX:
        return None
    return (
        f"disturbed: {what} vary (coefficient of variation {cv:.2f}, above {STEP_CV_MAX:g}; "
        f"min {min(step_us):.1f} us, max {max(step_us):.1f} us): the same work took that differently, so "
        f"something interrupted it (another program, a stall) and this run's figures are less reliable; re-run "
        f"on a quieter machine"
    )


def _threads(n: int) -> str:
    return f"{n} thread{'' if n == 1 else 's'}"


def _peaks(torch, bandwidth: dict[int, float], bytes_per_s: float, flops: dict[str, float]) -> Peaks:
    return Peaks(
        f"{socket.gethostname()} ({platform.machine()}, {_threads(torch.get_num_threads())})",
        flops["fp32"],
        bytes_per_s,
        f"{NOW} copy "
        + ", ".join(f"{mb} MB {bw / 1e9:.1f} GB/s" for mb, bw in bandwidth.items())
        + " (peak = the faster), GEMM "
        + ", ".join(f"{p} {f / 1e9:.1f}" for p, f in flops.items())
        + f" GFLOP/s ({GEMM_N}^3, best of >= {REPEATS} tries each)",
        more_flops=tuple((p, f) for p, f in flops.items() if p != "fp32"),
    )


def peaks_for(info: dict | None, datasets: list[Dataset], soc: str | None) -> tuple[Peaks | None, str]:
    """Device peaks for the data: the SoC table for NPU data, a calibration of this machine for portable data."""
    portable = (info or {}).get("backend") == "portable" or cpu_only(
        core for ds in datasets for core in ds.task_totals["task_type"].unique()
    )
    soc = soc or (info or {}).get("soc_version") or os.environ.get("SOC_VERSION")
    if soc:
        peaks = device_peaks(soc)
        if peaks:
            return peaks, f"table entry for {peaks.name}"
        return None, f"{soc} is not in the peak table ({', '.join(DEVICE_PEAKS)})"
    if portable:
        peaks = calibrate(recorded_count(info, "threads"))  # at the run's own thread count, where it recorded one
        host = (info or {}).get("host")
        note = "" if not host or host == socket.gethostname() else f" (the data was measured on {host})"
        return dataclasses.replace(peaks, source=peaks.source + note), "calibrated"
    return None, "NPU data without a SoC name: pass --soc Ascend910B3 (or set SOC_VERSION) for lower bounds"
