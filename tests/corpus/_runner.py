"""A folder of workload files through the card command's modes and agree: the machinery of ``python -m tests.corpus``
and ``python -m tests.zoo``.

Per model: mode 01, 03 (build + run), 04 and ``agree``, each as a user runs it (``bash <mode>/run.sh
0 --workload FILE``, under $PYTHON); the modes write their usual ``prof_out/`` and the log goes to
``last_run.log`` in the folder. Mode 02 profiles its own kernel, not the model: it runs once, first,
under the sweep's run id, which every model's modes share, so agree reads one run. A correct model
must pass every step; a ``wrong_*`` model must make at least one step fail. Prints one row per model
and exits 1 when any model's outcome is not the expected one. Each row also shows the share of op
time in family ``other`` (ops no family names) in 01, 03 and 04, init ops left out.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STEPS = {  # name -> the scripts it runs, in order (the workload is appended to each)
    "01": [["01_cmdline/run.sh", "0"]],
    "03": [["03_api_pyAcl/build_model.sh"], ["03_api_pyAcl/run.sh", "0"]],
    "04": [["04_pyTorch/run.sh", "0"]],
}


def models(folder: Path, names: list[str]) -> list[Path]:
    """The workload files of ``folder`` (every ``*.py`` not starting with ``_``), or the named ones."""
    found = sorted(p for p in folder.glob("*.py") if not p.name.startswith("_"))
    if not names:
        return found
    wanted = [folder / (n if n.endswith(".py") else f"{n}.py") for n in names]
    unknown = [w.name for w in wanted if w not in found]
    if unknown:
        sys.exit(
            f"Error: not in {folder.relative_to(ROOT)}: {', '.join(unknown)} — choose among "
            f"{', '.join(p.stem for p in found)}"
        )
    return wanted


def run(argv: list[str], env: dict[str, str], log) -> int:
    log.write(f"\n$ {' '.join(argv)}\n")
    log.flush()
    return subprocess.run(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT).returncode


def run_model(file: Path, env: dict[str, str], log) -> dict[str, int]:
    """Exit code per step (01, 03, 04, agree); a step that cannot start after a failed build gets the build's."""
    codes = {}
    for key, scripts in STEPS.items():
        code = 0
        for script in scripts:
            code = run(["bash", *script, "--workload", str(file)], env, log)
            if code:
                break
        codes[key] = code
    codes["agree"] = run([env["PYTHON"], "-m", "common", "agree"], env, log)
    return codes


OTHER_SHARE_MODES = ("01_cmdline", "03_api_pyAcl", "04_pyTorch")  # 02 profiles its own kernel, not the model


def other_share(mode_dir: str) -> str:
    """The share of op time in family ``other`` (ops the taxonomy does not name) of a mode's last output."""
    from common.analyze.families import family_share
    from common.formats.datasets import find_datasets

    try:
        stats = [row for ds in find_datasets(ROOT / mode_dir / "prof_out") for row in ds.op_statistic]
    except Exception as err:  # noqa: BLE001 (a failed run leaves no readable output: say so in the row)
        return f"n/a ({type(err).__name__})"
    share = family_share(stats, exclude=("init",)).get("other", 0.0)
    return f"{100 * share:.1f}%"


def main(folder: Path, names: list[str]) -> int:
    """Every model of ``folder`` (or the named ones) through the modes and agree, under $PYTHON (else this Python)."""
    python = os.environ.get("PYTHON") or sys.executable
    run_id = os.environ.get("MSPROF_LAB_RUN_ID") or uuid.uuid4().hex
    env = {**os.environ, "PYTHON": python, "MSPROF_LAB_RUN_ID": run_id, "PYTHONPATH": str(ROOT)}
    chosen = models(folder, names)
    log_path = folder / "last_run.log"
    rows, bad = [], []
    with log_path.open("w") as log:
        start = time.perf_counter()
        if run(["bash", "02_api_AscendC/build.sh"], env, log) or run(["bash", "02_api_AscendC/run.sh", "0"], env, log):
            print(f"Error: mode 02 failed, so agree cannot run — see {log_path}", file=sys.stderr)
            return 1
        for file in chosen:
            began = time.perf_counter()
            codes = run_model(file, env, log)
            wrong = file.stem.startswith("wrong_")
            failed = [k for k, c in codes.items() if c]
            ok = bool(failed) if wrong else not failed
            rows.append(
                (
                    file.stem,
                    " ".join(f"{k}={c}" for k, c in codes.items()),
                    f"{time.perf_counter() - began:.0f} s",
                    *(other_share(m) for m in OTHER_SHARE_MODES),
                    "as expected" if ok else "NOT AS EXPECTED",
                )
            )
            name, steps, took, other01, other03, other04, verdict = rows[-1]
            print(
                f"{name:30} {steps:32} {took:>6}  other {other01:>5} / {other03:>5} / {other04:>5}  "
                f"{'fails, as it must' if wrong and ok else verdict}",
                flush=True,
            )
            if not ok:
                bad.append(file.stem)
        total = time.perf_counter() - start
    print(
        f"{len(chosen)} models in {total:.0f} s; {len(chosen) - len(bad)} as expected"
        + (f"; not as expected: {', '.join(bad)}" if bad else "")
        + f" (log: {log_path.relative_to(ROOT)})"
    )
    return 1 if bad else 0
