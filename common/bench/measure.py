"""Running and measuring the benchmark's children: wall time, CPU time and peak RSS of each (wait4),
the median of interleaved runs, and one table row per tool with its agreement with the lab.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from common.errors import LabError

DEFAULT_RANK_TASKS = 200  # tasks per step in each generated rank's kernel_details.csv and trace_view.json


def cluster_folder(out: Path, ranks: int, rank_tasks: int = DEFAULT_RANK_TASKS) -> Path:
    """Where ``python -m common.bench make`` writes a capture of ``ranks`` ranks."""
    return out / (f"cluster_{ranks}" if rank_tasks == DEFAULT_RANK_TASKS else f"cluster_{ranks}_t{rank_tasks}")


ROOT = Path(__file__).resolve().parents[2]
AGREE_REL = 1e-3  # totals of two tools agree when within 0.1%
MSA_EXE_VAR = "MSPROF_ANALYZE"  # common.collect.msprof_analyze's override: the tool the bench runs
MSA_DEFAULT = ROOT / ".nox" / "ecosystem" / "bin" / "msprof-analyze"


@dataclass
class Run:
    wall_s: float  # the whole process, start to exit
    cpu_s: float  # user + system of the process and its children
    peak_mib: float  # the largest resident set among the process and its children
    result: dict = field(default_factory=dict)  # what it printed as its last JSON line, if any
    output: str = ""
    own_peak_mib: float | None = None  # the process's own high-water mark (VmHWM, sampled while it ran)
    child_peak_mib: float | None = None  # the largest of its child processes' (workers), sampled likewise

    @property
    def inside_s(self) -> float | None:
        return self.result.get("seconds")


def _hwm_kib(pid: int) -> int | None:
    """A process's high-water resident set (VmHWM, KiB), None when it is gone or has no memory of its own."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*/children") if Path(f"/proc/{parent}").exists() else []:
            try:
                kids = [int(x) for x in task.read_text().split()]
            except (OSError, ValueError):
                continue
            out += kids
            todo += kids
    return out


def _sample_peaks(pid: int, peaks: dict[int, int]) -> None:
    """Each process's VmHWM in the tree under ``pid`` (it only grows, so the last sample is the closest)."""
    for p in [pid, *_descendants(pid)]:
        hwm = _hwm_kib(p)
        if hwm is not None:
            peaks[p] = max(peaks.get(p, 0), hwm)


def spawn(argv: list[str], env: dict | None = None, cwd: Path | None = None, timeout: float = 1800) -> Run:
    """Run ``argv`` (no shell) to its end; its wall time, CPU time and peak RSS (wait4), its own and its child
    processes' peaks (sampled from /proc every 20 ms, on Linux), its output."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        deadline = start + timeout
        peaks: dict[int, int] = {}
        sampled = 0.0
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            if time.perf_counter() - sampled > 0.02:
                _sample_peaks(proc.pid, peaks)
                sampled = time.perf_counter()
            time.sleep(0.005)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
    if proc.returncode != 0:
        raise LabError(
            f"benchmark step failed ({' '.join(map(str, argv[:4]))} ...): exit {proc.returncode}: "
            f"{text.strip().splitlines()[-1:] if text.strip() else 'no output'}",
            "see the message above",
        )
    result = {}
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            try:
                result = json.loads(line)
            except json.JSONDecodeError:
                continue
            break
    own = peaks.pop(proc.pid, None)
    return Run(
        wall,
        usage.ru_utime + usage.ru_stime,
        usage.ru_maxrss / 1024,
        result,
        text,
        None if own is None else own / 1024,
        max(peaks.values()) / 1024 if peaks else None,
    )


def python_argv(*args: str) -> list[str]:
    return [sys.executable, *args]


def lab_runs(
    repeat: int, command: list[str], kind: str, target: Path, env: dict | None = None
) -> tuple[list[Run], list[Run]]:
    """``repeat`` interleaved runs of ``python -m common <command>`` (whole process) and of the lab's
    in-process measurement ``kind`` on ``target``."""
    whole, inside = [], []
    for _ in range(repeat):
        whole.append(spawn(python_argv("-m", "common", *command), env=env))
        inside.append(spawn(python_argv("-m", "common.bench", "_child", kind, str(target)), env=env))
    return whole, inside


def median_run(runs: list[Run]) -> Run:
    """The run with the median whole-process wall time (its other figures with it)."""
    return sorted(runs, key=lambda r: r.wall_s)[len(runs) // 2]


def agree(a: float | None, b: float | None) -> str:
    if a is None or b is None:
        return "N/A"
    diff = abs(a - b) / max(abs(a), abs(b), 1e-12)
    return f"{100 * diff:.4f}% ({'agree' if diff <= AGREE_REL else 'DIFFER'})"


def table_row(name: str, runs: list[Run], total: str, vs: str) -> str:
    r = median_run(runs)
    inside = f"{r.inside_s:7.2f}" if r.inside_s is not None else "    N/A"
    walls = "/".join(f"{x.wall_s:.2f}" for x in runs)
    return (
        f"  {name:38s} {r.wall_s:7.2f} {inside} {r.cpu_s / r.wall_s:5.2f} {r.peak_mib:8.0f}  {total:>26s}  {vs:>20s}"
        f"  [{len(runs)} run{'s' if len(runs) > 1 else ''}: {walls}]"
    )


HEADER = (
    f"  {'':38s} {'whole':>7s} {'inside':>7s} {'CPU/':>5s} {'peak':>8s}  {'totals reported':>26s}  "
    f"{'vs the lab':>20s}\n  {'':38s} {'(s)':>7s} {'(s)':>7s} {'wall':>5s} {'(MiB)':>8s}"
)


def installed_tool() -> Path | None:
    given = os.environ.get(MSA_EXE_VAR)
    exe = Path(given) if given else MSA_DEFAULT
    return exe if exe.is_file() and os.access(exe, os.X_OK) else None


def ensure_tool(install: bool) -> Path | None:
    if installed_tool() is None and install:
        spawn(python_argv("-c", "from common.collect.msprof_analyze import ensure_tool; ensure_tool()"), timeout=1800)
    return installed_tool()


def ensure_profile(out: Path, kind: str, size: int, sizes: dict) -> Path:
    """The generated profile of ``kind`` (made by a child when missing): its folder or file."""
    where = {
        "op_summary": out / f"op_summary_{size}",
        "trace_view": out / f"trace_view_{size}",
        "db": out / f"db_{size}",
        "cluster": cluster_folder(out, size, sizes.get("rank_tasks", DEFAULT_RANK_TASKS)),
    }[kind]
    if not where.is_dir():
        args = [
            "--rows",
            str(sizes["rows"]),
            "--events",
            str(sizes["events"]),
            "--tasks",
            str(sizes["tasks"]),
            "--ranks",
            str(size if kind == "cluster" else sizes["ranks"][0]),
            "--rank-tasks",
            str(sizes.get("rank_tasks", DEFAULT_RANK_TASKS)),
        ]
        spawn(python_argv("-m", "common.bench", "make", "--what", kind, "--out", str(out), *args))
    if kind == "trace_view":
        return next(where.rglob("trace_view.json"))
    if kind == "db":
        return next(where.rglob("ascend_pytorch_profiler_*.db")).parent
    return where
