"""``nox -s noise -- N``: the card command N times on a busy machine; how far each check stood from failing.

A learner's laptop also runs a browser. This runs ``nox -s cmdline ascendc pyacl pytorch -- <device>``
N times per workload while a hog holds one core (``--hog cpu``, the default: a busy loop; ``memory``:
a loop that writes through 256 MB, which also evicts the caches; ``none``), reads every verdict line
the runs printed, and prints one row per check: how often it passed, was inconclusive ([N/A]) or
failed, and, for the checks that print a difference and a tolerance, the distribution of the margin
(tolerance minus difference: below zero is a FAIL). A FAIL on a correct model is a false FAIL; the
command exits 1 when there was any, so this is also a test of the lab's verdicts under noise.

Workloads: TinyMLP, then every file of ``workloads/`` with ``--workloads``, then each ``--workload FILE``
(repeatable). Each run's full output is kept under ``--out`` (default ``bench/noise``), with
``noise.json``: every run's exit code and verdicts.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from common.bench.loop import CARD, card_env, nox_command
from common.bench.measure import ROOT
from common.errors import ArgumentParser, LabError, run_cli

DEFAULT_OUT = ROOT / "bench" / "noise"  # gitignored
VERDICT = re.compile(r"^\[(PASS|FAIL|N/A)\] (.+?): (.*)$")
# The margin of a check, from the numbers its line prints (tolerance - difference, in the line's unit).
MARGINS = (
    re.compile(r"difference (?P<d>[\d.,]+)[^,;]*?, tolerance (?P<t>[\d.,]+)"),  # share agreement (robust.Agreement)
    re.compile(r"off by median (?P<d>[\d.]+)%.*?tolerance (?P<t>[\d.]+)%"),  # op time vs Computing
    re.compile(r"off by (?P<d>[\d.]+)%.*?tolerance (?P<t>[\d.]+)%"),
)
HOG_MB = 256


def margin(detail: str) -> float | None:
    for pattern in MARGINS:
        if m := pattern.search(detail):
            return float(m["t"].replace(",", "")) - float(m["d"].replace(",", ""))
    return None


HOGS = {  # each a Python loop in a process of its own, until it is stopped
    "cpu": "while True: pass",
    "memory": f"b = bytearray({HOG_MB} << 20)\n"
    "while True:\n    for i in range(0, len(b), 4096): b[i] = (b[i] + 1) & 255",
}


def start_hog(kind: str) -> subprocess.Popen | None:
    if kind == "none":
        return None
    return subprocess.Popen([sys.executable, "-c", HOGS[kind]], stdin=subprocess.DEVNULL)


@dataclass
class CheckStats:
    passed: int = 0
    na: int = 0
    failed: int = 0
    margins: list[float] = field(default_factory=list)


def normalise(name: str) -> str:
    """A check's name without what changes between runs (capture folders, timestamps, counts of a run)."""
    name = re.sub(r"\(([^()]*?)PROF_[^)]*\)", r"(\1PROF_*)", name)
    name = re.sub(r"\(vm_[^)]*\)|\([^()]*_ascend_pt[^)]*\)", "(<capture>)", name)
    return re.sub(r"\d{8,}", "*", name)


def verdicts_of(text: str) -> list[tuple[str, str, str]]:
    return [(m[1], normalise(m[2]), m[3]) for line in text.splitlines() if (m := VERDICT.match(line.strip()))]


def run_once(device: str, workload: str | None, output: Path) -> tuple[int, float, list[tuple[str, str, str]]]:
    command = [*nox_command(), *CARD, device, *(["--workload", workload] if workload else [])]
    start = time.perf_counter()
    with open(output, "w", encoding="utf-8") as out:
        code = subprocess.run(
            command, cwd=ROOT, env=card_env(), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        ).returncode
    return code, time.perf_counter() - start, verdicts_of(output.read_text(encoding="utf-8", errors="replace"))


def table(stats: dict[str, CheckStats]) -> str:
    header = f"{'check':<78} {'PASS':>5} {'N/A':>4} {'FAIL':>5}  margin min / median / max"
    lines = [header, "-" * len(header)]
    for name, s in sorted(stats.items(), key=lambda kv: (-kv[1].failed, kv[0])):
        m = s.margins
        spread = f"{min(m):.1f} / {statistics.median(m):.1f} / {max(m):.1f}" if m else "-"
        lines.append(f"{name[:78]:<78} {s.passed:>5} {s.na:>4} {s.failed:>5}  {spread}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(
        prog="python -m common.bench.noise", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("runs", nargs="?", type=int, default=10, help="runs of the card command per workload (10)")
    parser.add_argument("--device", default="0", help="device id passed to the modes (default 0)")
    parser.add_argument(
        "--hog",
        choices=("cpu", "memory", "none"),
        default="cpu",
        help="what holds one core meanwhile (default cpu: a busy loop)",
    )
    parser.add_argument(
        "--workload",
        action="append",
        default=[],
        metavar="FILE",
        help="a workload file to run too, after TinyMLP (repeatable)",
    )
    parser.add_argument("--workloads", action="store_true", help="also every file of workloads/ besides TinyMLP")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where each run's output is kept (bench/noise)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.runs < 1:
        raise LabError(f"bad arguments: {args.runs} runs", "give at least 1 (e.g. nox -s noise -- 10)")
    given = [str(Path(w).resolve()) for w in args.workload]
    for w in given:
        if not Path(w).is_file():
            raise LabError(f"no workload file {w}", "give a Python file that defines build_model and make_input")
    shipped = [str(p) for p in sorted((ROOT / "workloads").glob("*.py")) if p.name != "tiny_mlp.py"]
    workloads: list[str | None] = [None, *(shipped if args.workloads else []), *given]  # TinyMLP first
    args.out.mkdir(parents=True, exist_ok=True)
    stats: dict[str, CheckStats] = {}
    runs = []
    hog = start_hog(args.hog)
    print(
        f"noise: {args.runs} run(s) of the card command per workload, hog: {args.hog}; outputs in {args.out}",
        flush=True,
    )
    try:
        for i in range(1, args.runs + 1):
            for w in workloads:
                label = Path(w).stem if w else "tiny_mlp"
                code, wall, found = run_once(args.device, w, args.out / f"{label}_{i}.txt")
                fails = [f"{name}: {detail}" for status, name, detail in found if status == "FAIL"]
                runs.append(
                    {
                        "run": i,
                        "workload": label,
                        "exit_code": code,
                        "wall_s": round(wall, 1),
                        "verdicts": [list(v) for v in found],
                    }
                )
                for status, name, detail in found:
                    s = stats.setdefault(name, CheckStats())
                    if status == "PASS":
                        s.passed += 1
                    elif status == "N/A":
                        s.na += 1
                    else:
                        s.failed += 1
                    if (m := margin(detail)) is not None:
                        s.margins.append(m)
                print(
                    f"run {i} {label}: exit {code}, {wall:.0f} s, {len(found)} verdicts, {len(fails)} FAIL"
                    + "".join(f"\n    [FAIL] {f}" for f in fails),
                    flush=True,
                )
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
    (args.out / "noise.json").write_text(json.dumps({"hog": args.hog, "runs": runs}, indent=1))
    print(table(stats))
    bad = [r for r in runs if r["exit_code"] != 0]
    failed = sum(s.failed for s in stats.values())
    print(f"{len(runs)} runs, {len(bad)} exited non-zero, {failed} FAIL verdicts (hog: {args.hog})")
    return 1 if bad or failed else 0


if __name__ == "__main__":
    run_cli(main)
