"""``python -m common.bench loop``: where the card command's time goes, process by process.

A learner runs ``nox -s cmdline ascendc pyacl pytorch -- 0`` after every edit. This runs that
command as they do, with ``common/bench/proclog`` on its PYTHONPATH, so every Python process of it
notes when the kernel started it, when it exited and how long its imports of torch, onnx,
onnxruntime and polars took. It prints one row per process, in start order (whole process: from
its start, interpreter start-up included, to its exit), the command's own wall time, and that time
in ``import torch`` equivalents: the median of three ``python -c "import torch"`` measured in the
same run, so the figure travels between machines. ``--cold`` runs with an empty record folder (a
temporary $MSPROF_LAB_CACHE: nothing is deleted), as after an edit of the model; the default is
warm, as a learner's second run. Figures are printed, never asserted.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from common.errors import LabError

ROOT = Path(__file__).resolve().parents[2]
PROCLOG_DIR = Path(__file__).resolve().parent / "proclog"
CARD = ["-s", "cmdline", "ascendc", "pyacl", "pytorch", "--"]
TORCH_SAMPLES = 3


@dataclass
class Process:
    pid: int
    ppid: int
    what: str
    started: float
    ended: float
    imports: dict[str, float]

    @property
    def wall_s(self) -> float:
        return self.ended - self.started


def nox_command() -> list[str]:
    """nox as the learner runs it: the one on PATH, else this Python's."""
    found = shutil.which("nox")
    return [found] if found else [sys.executable, "-m", "nox"]


def card_env(**extra: str) -> dict[str, str]:
    """The environment of a card command started from inside a nox session: without that session's run id, so the
    command's nox gives its own modes a new one (agree tells a run's outputs from older ones by it)."""
    env = {k: v for k, v in os.environ.items() if k != "MSPROF_LAB_RUN_ID"}
    env.update(extra)
    return env


def describe(argv: list[str]) -> str:
    """A short name for a process: its script relative to the repository, and its first arguments."""
    if not argv:
        return "python"
    head = Path(argv[0])
    try:
        head = head.resolve().relative_to(ROOT)
    except (ValueError, OSError):
        head = Path(head.name)
    name = "python -m common" if str(head) == "common/__main__.py" else str(head)
    return " ".join([name, *argv[1:3]])[:70]


def read_log(path: Path) -> list[Process]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        rows.append(
            Process(
                record["pid"],
                record["ppid"],
                describe(record["argv"]),
                record["started"],
                record["ended"],
                record["imports"],
            )
        )
    return sorted(rows, key=lambda p: p.started)


def import_torch_s(python: str) -> float:
    """The median wall time of ``python -c "import torch"`` over TORCH_SAMPLES runs, measured now."""
    times = []
    for _ in range(TORCH_SAMPLES):
        start = time.perf_counter()
        subprocess.run([python, "-c", "import torch"], check=True, stdin=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(device: str, extra: list[str], cold: bool) -> tuple[float, int, list[Process], Path]:
    """Run the card command once with every process logged: (wall s, exit code, processes, nox's output)."""
    work = Path(tempfile.mkdtemp(prefix="msprof_lab_loop_"))
    log, output = work / "processes.jsonl", work / "nox_output.txt"
    env = card_env(
        MSPROF_LAB_PROCLOG=str(log),
        PYTHONPATH=os.pathsep.join(filter(None, [str(PROCLOG_DIR), os.environ.get("PYTHONPATH")])),
    )
    if cold:
        env["MSPROF_LAB_CACHE"] = str(work / "empty_cache")
    command = [*nox_command(), *CARD, device, *extra]
    print(
        f"running: {' '.join(command)}  ({'cold: an empty record folder' if cold else 'warm'}; "
        f"its output goes to {output})",
        flush=True,
    )
    start = time.perf_counter()
    with open(output, "w", encoding="utf-8") as out:
        code = subprocess.run(
            command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        ).returncode
    wall = time.perf_counter() - start
    return wall, code, read_log(log) if log.is_file() else [], output


def table(processes: list[Process], t0: float, torch_s: float) -> str:
    header = f"{'process':<70} {'start s':>8} {'wall s':>7} {'torch':>6} {'onnx':>5} {'ort':>5} {'polars':>6}"
    lines = [header, "-" * len(header)]
    for p in processes:
        cells = [f"{p.imports[m]:.2f}" if m in p.imports else "-" for m in ("torch", "onnx", "onnxruntime", "polars")]
        lines.append(
            f"{p.what:<70} {p.started - t0:>8.1f} {p.wall_s:>7.2f} {cells[0]:>6} {cells[1]:>5} "
            f"{cells[2]:>5} {cells[3]:>6}"
        )
    paid = sum(p.imports.get("torch", 0.0) for p in processes)
    lines.append(
        f"{len(processes)} Python processes; {sum('torch' in p.imports for p in processes)} imported torch "
        f'({paid:.1f} s in all; `python -c "import torch"` takes {torch_s:.2f} s here, now)'
    )
    return "\n".join(lines)


def main(device: str, extra: list[str], cold: bool) -> int:
    if not (ROOT / "noxfile.py").is_file():
        raise LabError(f"no noxfile.py in {ROOT}", "run the loop benchmark from a checkout of the lab")
    torch_s = import_torch_s(sys.executable)
    wall, code, processes, output = measure(device, extra, cold)
    if not processes:
        raise LabError(f"no process of the card command was logged (exit code {code})", f"read {output}")
    t0 = min(p.started for p in processes)
    print(table(processes, t0, torch_s))
    print(
        f"card command: {wall:.1f} s wall (exit code {code}) = {wall / torch_s:.1f} `import torch` equivalents "
        f"({torch_s:.2f} s each, median of {TORCH_SAMPLES} measured in this run)"
    )
    return 0 if code == 0 else 1
