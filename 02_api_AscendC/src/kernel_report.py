"""What add_profile.py reads and prints about add_custom: its sizes, the mean pipe ratios, the table.

The sizes are not restated here: the host program prints the ones it was built with (add_sizes.h)
on its ``kernel sizes:`` line, and :func:`read_sizes` reads that line.
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path

from common.analyze.kernel_verdict import KernelFacts
from common.formats.records import Task
from common.formats.table import read_table
from common.render.text import render_table

KERNEL = "add_custom"
FP16_BYTES = 2

# The four AI Vector pipes PipeUtilization reports, in op_summary's column names.
PIPES = ("vec", "scalar", "mte2", "mte3")
PIPE_ROLE = {
    "vec": "vector compute (Add)",
    "scalar": "scalar: loop, addresses, queue sync, instruction issue",
    "mte2": "GM -> UB copy (CopyIn)",
    "mte3": "UB -> GM copy (CopyOut)",
}

# ESTIMATES, not measurements and without a source to cite: pipe ratios from an earlier demo of this
# kernel on an Atlas 910B3, kept only to show the shape of an NPU result next to the twin's.
ESTIMATE_910B3 = {"vec": 0.04, "scalar": 0.65, "mte2": 0.33, "mte3": None}

SIZES_RE = re.compile(r"^kernel sizes: (.+)$", re.MULTILINE)


def read_sizes(stdout: str) -> dict[str, int] | None:
    """The host program's ``kernel sizes: total_length=<n> block_dim=<n> ...`` line, as numbers."""
    match = SIZES_RE.search(stdout)
    if not match:
        return None
    return {key: int(value) for key, value in (item.split("=", 1) for item in match.group(1).split())}


def kernel_tasks(tasks: list[Task], kernel: str = KERNEL) -> list[Task]:
    return [t for t in tasks if kernel in t.op_type or kernel in t.op_name]


def read_msprof_op_pipes(out_dir: Path) -> dict[str, float | None] | None:
    """Mean aiv_*_ratio over the vector blocks of msprof op's PipeUtilization*.csv, if one was written."""
    files = sorted(out_dir.glob("OPPROF_*/**/PipeUtilization*.csv"))
    if not files:
        return None
    table = read_table(files[0], ["sub_block_id"], "msprof op (OPPROF_*)")
    rows = [r for r in range(len(table)) if (table.text(r, "sub_block_id") or "").startswith("vector")]
    out: dict[str, float | None] = {}
    for pipe in PIPES:
        values = [v for r in rows if (v := table.number(r, f"aiv_{pipe}_ratio")) is not None]
        out[pipe] = statistics.fmean(values) if values else None
    return out


def mean_ratios(tasks: list[Task]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for pipe in PIPES:
        values = [v for t in tasks if (v := t.pmu.get(f"aiv_{pipe}_ratio")) is not None]
        out[pipe] = statistics.fmean(values) if values else None
    return out


def mean_times(tasks: list[Task]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for column in ["aiv_time(us)"] + [f"aiv_{p}_time(us)" for p in PIPES]:
        values = [v for t in tasks if (v := t.pmu.get(column)) is not None]
        out[column] = statistics.fmean(values) if values else None
    return out


def kernel_facts(tasks: list[Task], sizes: dict[str, int], kernel: str, median_us: float,
                 concurrent_blocks: int) -> KernelFacts:
    """What kernel_verdict needs: median time, per-block busy time, pipe ratios, and the bytes an Add of
    ``total_length`` fp16 elements must move (read x and y, write z)."""
    busy = mean_times(tasks)["aiv_time(us)"]
    return KernelFacts(kernel, median_us, busy, mean_ratios(tasks), 3 * sizes["total_length"] * FP16_BYTES,
                       sizes["block_dim"], concurrent_blocks)


def bound_pipe(ratios: dict[str, float | None]) -> tuple[str, float] | None:
    """The pipe with the largest busy ratio: the one to make cheaper first."""
    known = {p: r for p, r in ratios.items() if r is not None}
    if not known:
        return None
    pipe = max(known, key=known.get)
    return pipe, known[pipe]


def render_report(tasks: list[Task], backend_name: str, where: str, sizes: dict[str, int], kernel: str = KERNEL) -> str:
    """Per pipe: mean time, mean ratio and the 910B3 estimate; then the bound pipe and how to read it."""
    ratios, times = mean_ratios(tasks), mean_times(tasks)
    durations = [t.duration_us for t in tasks]
    lines = [
        f"--- {kernel}: {len(tasks)} launches x {sizes['block_dim']} blocks x {sizes['block_length']} fp16 elements "
        f"({backend_name}; from {where}) ---",
    ]
    if durations:
        lines.append(
            f"Task Duration(us): mean {statistics.fmean(durations):.1f}, "
            f"min {min(durations):.1f}, max {max(durations):.1f}"
            + (f"; aiv_time(us) per block: mean {times['aiv_time(us)']:.2f}" if times["aiv_time(us)"] else "")
        )
    label = "the portable twin (host CPU)" if backend_name == "portable" else "the NPU PMU"
    rows = []
    for pipe in PIPES:
        ref = ESTIMATE_910B3[pipe]
        rows.append([
            pipe, PIPE_ROLE[pipe], times[f"aiv_{pipe}_time(us)"], ratios[pipe],
            "-" if ref is None else f"~{ref:.2f}",
        ])
    lines.append(f"ratio = the pipe's share of the block's time; this run: {label}; 910B3: an estimate, not measured "
                 "here and without a published source")
    lines.append(render_table(["pipe", "what runs there", "time(us)", "ratio (this run)", "ratio (910B3 estimate)"],
                              rows))
    found = bound_pipe(ratios)
    ref_pipe = max((p for p in PIPES if ESTIMATE_910B3[p] is not None), key=lambda p: ESTIMATE_910B3[p])
    if found:
        pipe, value = found
        lines.append(
            f"Bound pipe: {pipe} ({value:.3f} of the block's time: {PIPE_ROLE[pipe]}). "
            f"The 910B3 estimate is bound by {ref_pipe} (~{ESTIMATE_910B3[ref_pipe]:.2f})."
        )
    if backend_name == "portable" and kernel != KERNEL:
        lines.append(
            "Reading it: on the pyasc twin the kernel is Python run by the interpreter, block after block, so "
            "scalar (the loop, the calls, the checks) dwarfs the pipes. It checks the kernel's structure, "
            "synchronisation and fp16 results, not NPU cycles: only msprof on an NPU gives PMU data."
        )
    elif backend_name == "portable":
        lines.append(
            "Reading it: on the twin every pipe is host code on one thread, so the ratios rank host costs "
            "(software fp16 makes vec expensive; memcpy makes MTE2/MTE3 cheap). They check the kernel's "
            "structure and correctness, not NPU cycles: only msprof on an NPU gives PMU data."
        )
    else:
        lines.append(
            "Reading it: a high scalar ratio with a tiny vec ratio means the tiles are too small for the "
            "vector unit to matter; larger tiles (fewer loop trips, fewer queue syncs) shift time to MTE2."
        )
    return "\n".join(lines)
