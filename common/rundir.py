"""The lab's output directories: marker-protected ``prof_out/`` and its ``run_info.json``.

A directory is deleted and recreated only when it carries the lab's marker file, so a
path that the lab did not create is never removed.
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import json
import os
import platform
import shutil
import socket
import subprocess
import uuid
from pathlib import Path

from common.errors import LabError

MARKER = ".msprof_lab"
RUN_INFO = "run_info.json"
RUN_ID_VAR = "MSPROF_LAB_RUN_ID"  # set by nox so every mode of one run shares an id
REPO_ROOT = Path(__file__).resolve().parent.parent


def output_path(mode_dir: Path, given: str | None) -> Path:
    """The output directory of a mode: ``<mode>/prof_out`` or another folder strictly inside ``<mode>/``."""
    mode_dir = mode_dir.resolve()
    if not given:
        return mode_dir / "prof_out"
    path = Path(os.path.normpath(Path.cwd() / given))  # "a/../b" collapses; symlinked parents resolve below
    resolved = path.parent.resolve() / path.name
    if mode_dir not in resolved.parents:
        raise LabError(
            f"output {given!r} is not inside {mode_dir}",
            f"give a folder inside the mode folder, e.g. {mode_dir.name}/prof_out_mine",
        )
    return resolved


def prepare_output_dir(path: Path | str) -> Path:
    """Create ``path`` empty; an existing one is replaced only if the lab made it."""
    path = Path(path).absolute()
    if path.is_symlink():
        raise LabError(f"{path} is a symlink", "give a real directory the lab can own")
    if path.exists():
        if not path.is_dir():
            raise LabError(f"{path} exists and is not a directory", "remove it or choose another output")
        if not (path / MARKER).is_file():
            raise LabError(
                f"{path} exists and was not made by msprof lab (no {MARKER} marker)",
                "move it away or choose another output directory; the lab deletes only its own",
            )
        shutil.rmtree(path)
    path.mkdir(parents=True)
    (path / MARKER).write_text("created by msprof lab; safe for the lab to delete and recreate\n")
    return path


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cann_version() -> str | None:
    home = os.environ.get("ASCEND_HOME_PATH")
    if not home:
        return None
    for name in ("version.cfg", "ascend_toolkit_install.info"):
        file = Path(home) / name
        if file.is_file():
            for line in file.read_text(errors="replace").splitlines():
                if "version" in line.lower() and "=" in line:
                    return line.split("=", 1)[1].strip()
    return None


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def start_run(out_dir: Path, *, mode: str, backend: str, device: int, command: list[str], **extra: object) -> dict:
    """Write run_info.json with ``completed: false``; :func:`finish_run` flips it at the end."""
    info = {
        "backend": backend,
        "mode": mode,
        "device": device,
        "command": command,
        "run_id": os.environ.get(RUN_ID_VAR) or uuid.uuid4().hex,
        "start": _now(),
        "end": None,
        "completed": False,
        "exit_code": None,
        "host": socket.gethostname(),
        "machine": platform.machine(),
        "git_commit": _git_commit(),
        "versions": {
            "python": platform.python_version(),
            "torch": _version("torch"),
            "torch_npu": _version("torch_npu"),
            "onnxruntime": _version("onnxruntime"),
            "onnx": _version("onnx"),
            "cann": _cann_version(),
        },
        **extra,
    }
    write_run_info(out_dir, info)
    return info


def finish_run(out_dir: Path, info: dict, *, exit_code: int, completed: bool, **extra: object) -> dict:
    info.update(end=_now(), exit_code=exit_code, completed=completed, **extra)
    write_run_info(out_dir, info)
    return info


def write_run_info(out_dir: Path, info: dict) -> None:
    tmp = out_dir / (RUN_INFO + ".tmp")
    tmp.write_text(json.dumps(info, indent=2) + "\n")
    tmp.replace(out_dir / RUN_INFO)


def read_run_info(out_dir: Path | str) -> dict | None:
    """The run_info.json of a lab output directory, or None for data collected elsewhere."""
    file = Path(out_dir) / RUN_INFO
    if not file.is_file():
        return None
    try:
        info = json.loads(file.read_text())
    except json.JSONDecodeError as err:
        raise LabError(f"{file}: not valid JSON ({err})", "re-run the mode to rewrite it") from None
    for key in ("backend", "mode", "completed"):
        if key not in info:
            raise LabError(f"{file}: key {key!r} missing", "re-run the mode to rewrite it")
    return info

