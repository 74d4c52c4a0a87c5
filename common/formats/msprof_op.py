"""msprof op's output, read: the mean pipe ratios of PipeUtilization (an NPU run), and the simulator's per-core
files (``msprof op simulator``). Mode 02 reads both; a file without its documented columns stops with one line."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

from common.formats.schema import AIV_PIPES
from common.formats.table import read_table


def read_msprof_op_pipes(out_dir: Path) -> dict[str, float | None] | None:
    """Mean aiv_*_ratio over the vector blocks of msprof op's PipeUtilization*.csv, if one was written."""
    files = sorted(out_dir.glob("OPPROF_*/**/PipeUtilization*.csv"))
    if not files:
        return None
    table = read_table(files[0], ["sub_block_id"], "msprof op (OPPROF_*)")
    rows = [r for r in range(len(table)) if (table.text(r, "sub_block_id") or "").startswith("vector")]
    out: dict[str, float | None] = {}
    for pipe in AIV_PIPES:
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
