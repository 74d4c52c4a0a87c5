"""What mode 02 reads and prints about its kernels: their sizes, the mean pipe ratios, the table.

The sizes are not restated here: the host program prints the ones it was built with (set once, in
add_kernel.cpp) on its ``kernel sizes:`` line, add_pyasc.py prints its own on the same line, and
:func:`read_sizes` reads that line.
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path

from common.analyze.bounds.kernel import KernelFacts
from common.analyze.bounds.kernel import PIPE_ROLE, PIPES
from common.analyze.bounds.op import busiest_pipe, mean_pipe_ratios, mean_pmu
from common.formats.records import Task
from common.formats.table import read_table
from common.render.text import render_table

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


# msprof op simulator (msOpProf "simulator mode performance data"): OPPROF_*/simulator/ holds one folder per
# core, core<i>.veccore<j> (or .cubecore<j>), each with <core>_code_exe.csv (code, call_count, cycles,
# running_time(us)), <core>_instr_exe.csv (instr, addr, pipe, call_count, cycles, running_time(us), detail)
# and trace.json. Whatever is missing is reported as missing, not guessed.
SIMULATOR_CORE = re.compile(r"core\d+\.(?:vec|cube)core\d+")


def read_simulator_cores(out_dir: Path) -> list[dict]:
    """One summary per core folder of the newest ``OPPROF_*/simulator/``: cycles per pipe, the hottest code line."""
    runs = sorted(out_dir.glob("OPPROF_*/simulator"))
    if not runs:
        return []
    cores = []
    for folder in sorted(p for p in runs[-1].iterdir() if p.is_dir() and SIMULATOR_CORE.fullmatch(p.name)):
        core = {
            "core": folder.name,
            "trace": (folder / "trace.json").is_file(),
            "pipe_cycles": None,
            "hot_line": None,
            "running_us": None,
        }
        code_exe, instr_exe = folder / f"{folder.name}_code_exe.csv", folder / f"{folder.name}_instr_exe.csv"
        if code_exe.is_file():
            table = read_table(code_exe, ["code", "cycles", "running_time(us)"], "msprof op simulator (code_exe)")
            rows = [
                (table.text(r, "code"), table.number(r, "cycles") or 0.0, table.number(r, "running_time(us)") or 0.0)
                for r in range(len(table))
            ]
            core["running_us"] = sum(t for _, _, t in rows)
            core["hot_line"] = max(rows, key=lambda row: row[1])[:2] if rows else None
        if instr_exe.is_file():
            table = read_table(instr_exe, ["pipe", "cycles"], "msprof op simulator (instr_exe)")
            cycles: dict[str, float] = {}
            for r in range(len(table)):
                pipe = table.text(r, "pipe") or "N/A"
                cycles[pipe] = cycles.get(pipe, 0.0) + (table.number(r, "cycles") or 0.0)
            core["pipe_cycles"] = cycles
        cores.append(core)
    return cores


def render_simulator(cores: list[dict]) -> str:
    """The per-core table of a simulator run; cells the simulator did not write say so."""
    if not cores:
        return "msprof op simulator: no OPPROF_*/simulator/core* folders were written"
    rows = []
    for c in cores:
        pipes = (
            ", ".join(f"{p} {n:.0f}" for p, n in sorted(c["pipe_cycles"].items(), key=lambda kv: -kv[1]))
            if c["pipe_cycles"] is not None
            else "no instr_exe.csv"
        )
        hot = f"{c['hot_line'][0]} ({c['hot_line'][1]:.0f} cycles)" if c["hot_line"] else "no code_exe.csv"
        running = f"{c['running_us']:.3f}" if c["running_us"] is not None else "N/A"
        rows.append([c["core"], running, pipes, hot, "yes" if c["trace"] else "missing"])
    return render_table(
        ["core", "running_time (us)", "cycles per pipe (instr_exe)", "hottest code line (code_exe)", "trace.json"], rows
    )


def mean_ratios(tasks: list[Task]) -> dict[str, float | None]:
    """The mean aiv_<pipe>_ratio of each of :data:`PIPES`, by its short name (analyze.bounds.op.mean_pipe_ratios)."""
    found = mean_pipe_ratios(tasks, [f"aiv_{p}" for p in PIPES])
    return {p: found[f"aiv_{p}"] for p in PIPES}


def mean_times(tasks: list[Task]) -> dict[str, float | None]:
    return mean_pmu(tasks, ["aiv_time(us)"] + [f"aiv_{p}_time(us)" for p in PIPES])


def kernel_facts(
    tasks: list[Task], sizes: dict[str, int], kernel: str, median_us: float, concurrent_blocks: int
) -> KernelFacts:
    """What bounds.kernel needs: median time, per-block busy time, pipe ratios, and the bytes an Add of
    ``total_length`` fp16 elements must move (read x and y, write z)."""
    busy = mean_times(tasks)["aiv_time(us)"]
    return KernelFacts(
        kernel,
        median_us,
        busy,
        mean_ratios(tasks),
        3 * sizes["total_length"] * FP16_BYTES,
        sizes["block_dim"],
        concurrent_blocks,
    )


def render_report(tasks: list[Task], backend_name: str, where: str, sizes: dict[str, int], kernel: str = KERNEL) -> str:
    """Per pipe: mean time, mean ratio and the 910B3 estimate; then the bound pipe and how to read it."""
    ratios, times = mean_ratios(tasks), mean_times(tasks)
    durations = [t.duration_us for t in tasks]
    lines = [
        f"--- {kernel}: {len(tasks)} launches x {sizes['block_dim']} blocks x {sizes['block_length']} fp16 elements "
        f"({backend_name}; from {where}) ---"
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
        rows.append(
            [pipe, PIPE_ROLE[pipe], times[f"aiv_{pipe}_time(us)"], ratios[pipe], "-" if ref is None else f"~{ref:.2f}"]
        )
    lines.append(
        f"ratio = the pipe's share of the block's time; this run: {label}; 910B3: an estimate, not measured "
        "here and without a published source"
    )
    lines.append(
        render_table(["pipe", "what runs there", "time(us)", "ratio (this run)", "ratio (910B3 estimate)"], rows)
    )
    found = busiest_pipe(ratios)
    ref_pipe = max((p for p in PIPES if ESTIMATE_910B3[p] is not None), key=lambda p: ESTIMATE_910B3[p])
    if found:
        pipe, value = found
        lines.append(
            f"Busiest pipe: {pipe} ({value:.3f} of the block's time: {PIPE_ROLE[pipe]}, measured on "
            f"{label}); in the 910B3 estimate (not measured) it would be {ref_pipe} (~{ESTIMATE_910B3[ref_pipe]:.2f})."
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
