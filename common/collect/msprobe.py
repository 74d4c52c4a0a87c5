"""msprobe (MindStudio Probe, PyPI ``mindstudio-probe``), the Ascend toolkit's own per-op accuracy tool, as the
cross-check of ``python -m common precision`` (``--cross-check``), as msprof-analyze is for profiles.

It is installed into an environment of its own (``.nox/probe``, the ``probe`` dependency group, on first use; the
lab's environment never sees it). msprobe's dumper hooks the torch of the process it runs in, so that environment
holds the lab's CPU torch too, and the dumping is a small program run by its python (``msprobe_dump.py``):

- ``golden``: the workload's fp32 copy, ``target``: that copy in fp16, each dumped by ``PrecisionDebugger`` (L0);
- ``msprobe compare -tp <target>/step0 -gp <golden>/step0 -o <out>`` compares them and writes
  ``compare_result_*.csv`` (read by ``common.formats.msprobe_compare``).
"""

from __future__ import annotations

import os
from pathlib import Path

from common.collect import launcher
from common.environments import ensure_environment
from common.errors import LabError
from common.formats.rundir import REPO_ROOT

GROUP = "probe"  # the dependency group in pyproject.toml that pins mindstudio-probe (and the CPU torch it hooks)
ENV_DIR = REPO_ROOT / ".nox" / "probe"
INSTALL_TIMEOUT_S = 1200  # ~1.4 GB (torch's CPU wheel from the local cache, pandas, ...): 109 s on the 2-core VM
TOOL_TIMEOUT_S = 300  # each step ~10 s on TinyMLP (msprobe's import alone takes ~5 s)


def ensure_probe(log=print) -> Path:
    """The python of the msprobe environment, built when stale (common.environments, the ``probe`` group)."""
    python = ensure_environment(
        ENV_DIR,
        [GROUP],
        expect=("msprobe",),
        log=log,
        timeout_s=INSTALL_TIMEOUT_S,
        fix="it comes from PyPI: check the network; the precision command without --cross-check does not need it",
    )
    return python


def dump_argv(python: Path, which: str, dump_dir: Path, workload: str | None) -> list[str]:
    return [str(python), "-m", "common.collect.msprobe_dump", which, str(dump_dir), *([workload] if workload else [])]


def compare_argv(msprobe: Path, target: Path, golden: Path, out: Path) -> list[str]:
    """``msprobe compare`` of two step folders (mindstudio-probe 26.2.0's form; the older ``msprobe -f pytorch
    compare -i <json>`` is gone)."""
    return [str(msprobe), "compare", "-tp", str(target), "-gp", str(golden), "-o", str(out)]


def _run(argv: list[str], what: str, log_path: Path) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(REPO_ROOT)}
    run = launcher.run_command(argv, env, TOOL_TIMEOUT_S, capture=True, stderr=log_path)
    run.raise_if_stopped()
    output = log_path.read_text(errors="replace") + run.output
    log_path.write_text(output)
    if run.timed_out:
        raise LabError(f"{what}: no answer after {TOOL_TIMEOUT_S} s", f"its output is in {log_path}")
    if run.exit_code != 0:
        last = next((line for line in reversed(output.splitlines()) if line.strip()), "no output")
        raise LabError(f"{what} failed (exit {run.exit_code}): {last.strip()}", f"its full output is in {log_path}")


def dump_and_compare(out: Path, workload: str | None, log=print) -> Path:
    """Dump the golden and target paths with msprobe, compare them; the folder holding ``compare_result_*.csv``."""
    python = ensure_probe(log)
    out.mkdir(parents=True, exist_ok=True)
    for which in ("golden", "target"):
        log(f"msprobe: dumping the {which} path ({'fp32' if which == 'golden' else 'fp16'}) at level L0")
        _run(dump_argv(python, which, out / which, workload), f"msprobe's {which} dump", out / f"{which}.log")
    result = out / "compare"
    log("msprobe: compare -tp target/step0 -gp golden/step0")
    _run(
        compare_argv(python.parent / "msprobe", out / "target" / "step0", out / "golden" / "step0", result),
        "msprobe compare",
        out / "compare.log",
    )
    return result
