"""Dynamic profiling's plumbing: start the job, edit its profiler_config.json, wait for the capture.

Harness for ``04_pyTorch/src/dynamic_profile.py``: the lesson keeps what a user writes into
``profiler_config.json`` and the job's loop; this module does what a user does from a second
shell (wait for torch_npu's template, edit it) and stops the job once its capture is complete.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

from common.errors import LabError

CONFIG_FILE = "profiler_config.json"
STOP_FILE = "stop_job"  # the lab's own signal to its job (not torch_npu's): stop after the current step
POLL_S = 0.2
SAFE_NAME = re.compile(r"[A-Za-z0-9_]+")  # torch_npu: letters, digits and underscores, no symbolic links


def config_folder(out: Path, name: str) -> Path:
    """``<out>/<name>``: the folder PROF_CONFIG_PATH names, checked against torch_npu's rule for its name."""
    if not SAFE_NAME.fullmatch(name):
        raise LabError(f"config folder {name!r} has characters torch_npu refuses",
                       "use letters, digits and underscores only")
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def start_job(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    """The job as an argv list (never a shell), its stdout and stderr into ``log``."""
    with log.open("w", encoding="utf-8") as sink:
        return subprocess.Popen(argv, env=env, stdout=sink, stderr=subprocess.STDOUT)


def wait_for(found, job: subprocess.Popen, timeout_s: float, what: str, log: Path):
    """Poll ``found()`` until it returns something truthy; the job ending first or the timeout is a LabError."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = found()
        if result:
            return result
        if job.poll() is not None:
            raise LabError(f"the job ended (exit {job.returncode}) before {what}", f"see {log}")
        time.sleep(POLL_S)
    raise LabError(f"no {what} after {timeout_s:.0f} s", f"see {log}")


def edit_config(folder: Path, changes: dict) -> dict:
    """Read torch_npu's template, apply ``changes`` and write it back in one move (a new mtime, never half a file)."""
    path = folder / CONFIG_FILE
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise LabError(f"{path} is not the JSON template torch_npu writes ({err})",
                       "check the torch_npu version; dynamic profiling needs 6.0.RC3 or later") from err
    config.update(changes)
    temporary = path.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    os.replace(temporary, path)
    return config


def finished_capture(prof_dir: Path) -> Path | None:
    """The first ``*_ascend_pt`` under ``prof_dir`` whose ASCEND_PROFILER_OUTPUT holds step_trace_time.csv."""
    return next((p for p in sorted(prof_dir.glob("*_ascend_pt"))
                 if (p / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv").is_file()), None)


def stop_job(folder: Path, job: subprocess.Popen, timeout_s: float, log: Path) -> int:
    """Ask the job to stop after its current step (torch_npu parses inside that step), wait for it; its exit code."""
    (folder / STOP_FILE).touch()
    try:
        return job.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        job.kill()
        job.wait()
        raise LabError(f"the job did not stop within {timeout_s:.0f} s of being asked", f"see {log}") from None


def stop_requested(folder: Path) -> bool:
    """In the job: whether the lab asked it to stop."""
    return (folder / STOP_FILE).exists()
