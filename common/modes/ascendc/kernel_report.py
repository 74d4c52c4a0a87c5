"""What mode 02 knows of its kernels: the sizes and the verification its programs print, the bytes an Add moves,
the 910B3 estimate beside the measured ratios, and the per-pipe table made from them (common.render.kernel).

The sizes are not restated here: the host program prints the ones it was built with (set once, in
add_kernel.cpp) on its ``kernel sizes:`` line, add_pyasc.py prints its own on the same line, and
:func:`read_sizes` reads that line.
"""

from __future__ import annotations

import re

from common.analyze.bounds.kernel import KernelFacts, pipe_ratios, pipe_times
from common.formats.records import Task
from common.render.kernel import render_report

KERNEL = "add_custom"
FP16_BYTES = 2

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


VERIFIED_RE = re.compile(r"verified: (\d+) of (\d+) elements")


def read_verified(stdout: str) -> tuple[tuple[int, int] | None, str]:
    """The program's ``verified: N of M elements`` line as (N, M), and the line as printed; (None, "") without one."""
    match = VERIFIED_RE.search(stdout)
    return ((int(match[1]), int(match[2])), match[0]) if match else (None, "")


def kernel_tasks(tasks: list[Task], kernel: str = KERNEL) -> list[Task]:
    return [t for t in tasks if kernel in t.op_type or kernel in t.op_name]


def kernel_facts(
    tasks: list[Task], sizes: dict[str, int], kernel: str, median_us: float, concurrent_blocks: int
) -> KernelFacts:
    """What bounds.kernel needs: median time, per-block busy time, pipe ratios, and the bytes an Add of
    ``total_length`` fp16 elements must move (read x and y, write z)."""
    busy = pipe_times(tasks)["aiv_time(us)"]
    return KernelFacts(
        kernel,
        median_us,
        busy,
        pipe_ratios(tasks),
        3 * sizes["total_length"] * FP16_BYTES,
        sizes["block_dim"],
        concurrent_blocks,
    )


def kernel_table(tasks: list[Task], backend_name: str, where: str, sizes: dict[str, int], kernel: str = KERNEL) -> str:
    """The per-pipe table of ``kernel``'s launches (common.render.kernel.render_report) from their mean pipe times
    and ratios, beside the 910B3 estimate."""
    return render_report(
        kernel,
        [t.duration_us for t in tasks],
        pipe_ratios(tasks),
        pipe_times(tasks),
        backend_name,
        where,
        sizes,
        ESTIMATE_910B3,
        python_kernel=kernel != KERNEL,
    )
