"""Mode 02's kernel report: the per-pipe table of its launches, the bound pipe and how to read it, and the per-core
table of a simulator run; from numbers the harness computed (common.modes.ascendc.kernel_report)."""

from __future__ import annotations

import statistics

from common.analyze.bounds.kernel import PIPE_ROLE, PIPES
from common.analyze.bounds.op import busiest_pipe
from common.render.text import render_table


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


def render_report(
    kernel: str,
    durations: list[float],
    ratios: dict[str, float | None],
    times: dict[str, float | None],
    backend_name: str,
    where: str,
    sizes: dict[str, int],
    estimate: dict[str, float | None],
    python_kernel: bool = False,
) -> str:
    """Per pipe: mean time, mean ratio (``ratios``, ``times``: common.analyze.bounds.kernel's pipe_ratios and
    pipe_times) and the ``estimate`` from elsewhere; then the bound pipe and how to read it (``python_kernel``: the
    pyasc kernel, whose twin runs Python)."""
    lines = [
        f"--- {kernel}: {len(durations)} launches x {sizes['block_dim']} blocks x {sizes['block_length']} fp16 elements "
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
        ref = estimate[pipe]
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
    ref_pipe = max((p for p in PIPES if estimate[p] is not None), key=lambda p: estimate[p])
    if found:
        pipe, value = found
        lines.append(
            f"Busiest pipe: {pipe} ({value:.3f} of the block's time: {PIPE_ROLE[pipe]}, measured on "
            f"{label}); in the 910B3 estimate (not measured) it would be {ref_pipe} (~{estimate[ref_pipe]:.2f})."
        )
    if backend_name == "portable" and python_kernel:
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
