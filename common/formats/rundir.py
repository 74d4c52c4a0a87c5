"""The lab's output directories: marker-protected ``prof_out/``, its ``run_info.json``, the mode lock.

A directory is deleted and recreated only when it carries the lab's marker file, so a
path that the lab did not create is never removed; ``/``, the home folder, the repository
and the folders above the current one are refused even when someone planted a marker there.
One run at a time per mode folder: :func:`lock_mode` takes an exclusive lock that the
operating system drops when the process ends, however it ends.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import importlib.metadata
import json
import math
import os
import platform
import shutil
import socket
import subprocess
import uuid
from pathlib import Path

from common.errors import LabError

MARKER = ".msprof_lab"
LOCK_FILE = ".msprof_lab.lock"  # in each mode folder; never deleted (removing a lock file races its holders)
RUN_INFO = "run_info.json"
TIMEOUT_VAR = "MSPROF_LAB_TIMEOUT_S"  # default for every mode's --timeout
RUN_ID_VAR = "MSPROF_LAB_RUN_ID"  # set by nox so every mode of one run shares an id
REPO_ROOT = Path(__file__).resolve().parents[2]


def require_directory(path: Path, give: str) -> None:
    """An input folder exists and is a folder, or a LabError saying which it is not (``give``: what to pass)."""
    if not path.exists():
        raise LabError(f"{path}: no such directory", give)
    if not path.is_dir():
        raise LabError(f"{path} is not a directory", f"{give}, not a file")


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


def protected_paths() -> list[Path]:
    """Folders the lab never deletes, marker or not: ``/``, the home folder, the repository and their parents."""
    paths = {Path("/")}
    for where in (Path.home, lambda: REPO_ROOT, Path.cwd):
        try:
            base = where().resolve()
        except (OSError, RuntimeError):  # no home folder known, or the current folder is gone
            continue
        paths.add(base)
        paths.update(base.parents)
    return sorted(paths)


def prepare_output_dir(path: Path | str) -> Path:
    """Create ``path`` empty; an existing one is replaced only if the lab made it."""
    path = check_output_dir(path)
    if path.exists():
        shutil.rmtree(path)  # symlinks inside are unlinked, never followed
    path.mkdir(parents=True)
    (path / MARKER).write_text("created by msprof lab; safe for the lab to delete and recreate\n")
    return path


def check_output_dir(path: Path | str) -> Path:
    """``path`` resolved, if :func:`prepare_output_dir` may use it; else the LabError it would raise
    (to refuse a bad output folder before the work whose results go into it)."""
    path = Path(path).absolute()
    if path.is_symlink():
        raise LabError(f"{path} is a symlink", "give a real directory the lab can own")
    path = path.resolve()  # a symlinked parent: judge (and delete) the real place
    if path in protected_paths():
        raise LabError(
            f"{path} is /, the home folder, the repository or a folder above the current one",
            "give a folder of its own inside the mode folder, e.g. prof_out_mine",
        )
    if path.exists():
        if not path.is_dir():
            raise LabError(f"{path} exists and is not a directory", "remove it or choose another output")
        marker = path / MARKER
        if marker.is_symlink() or not marker.is_file():
            raise LabError(
                f"{path} exists and was not made by msprof lab (no {MARKER} marker)",
                "move it away or choose another output directory; the lab deletes only its own",
            )
    return path


class ModeLock:
    """An exclusive ``flock`` on ``<mode>/.msprof_lab.lock``, held until :meth:`release` or process exit."""

    def __init__(self, mode_dir: Path, fd: int) -> None:
        self.mode_dir, self._fd = mode_dir, fd

    def release(self) -> None:
        if self._fd is not None:
            _HELD.pop(self.mode_dir, None)
            os.close(self._fd)  # closing the descriptor drops the lock
            self._fd = None

    def __enter__(self) -> ModeLock:  # noqa: PYI034 (Python 3.10: no typing.Self)
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


_HELD: dict[Path, ModeLock] = {}


def lock_mode(mode_dir: Path | str) -> ModeLock:
    """Refuse to start while another run uses ``mode_dir``; otherwise hold its lock for this process.

    The lock is an advisory ``flock``: the kernel releases it when the holder exits, killed
    or not, so a crashed run never blocks the next one and nothing needs cleaning up. The
    descriptor is not inherited by the programs the lab starts. Taking it twice in one
    process returns the lock already held.
    """
    mode_dir = Path(mode_dir).resolve()
    if mode_dir in _HELD:
        return _HELD[mode_dir]
    fd = os.open(mode_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 200, 0).decode(errors="replace").strip().splitlines()[:1] or ["unknown process"]
        os.close(fd)
        raise LabError(
            f"another msprof lab run is using {mode_dir.name} ({holder[0]})",
            "wait for it to finish, or stop it; runs of one mode never share its folder",
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()}, started {_now()}\n".encode(), 0)
    _HELD[mode_dir] = lock = ModeLock(mode_dir, fd)
    return lock


def parse_timeout(text: str | float | None) -> float | None:
    """``--timeout`` in seconds (a positive finite number), else $MSPROF_LAB_TIMEOUT_S, else no limit."""
    if text is None or text == "":
        text = os.environ.get(TIMEOUT_VAR) or None
        if text is None:
            return None
    try:
        value = float(str(text).strip())
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise LabError(
            f"timeout {str(text)!r} is not a positive number of seconds",
            f"pass e.g. --timeout 600 (or set {TIMEOUT_VAR}); leave it out for no limit",
        )
    return value


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


# The environment torch_npu records in profiler_metadata.json (ENV_VARIABLES), recorded for every lab run too:
# the advisor's environment rule reads it (common.analyze.advisor.environment).
RECORDED_ENV = (
    "ASCEND_GLOBAL_LOG_LEVEL",
    "HCCL_RDMA_TC",
    "HCCL_RDMA_SL",
    "ACLNN_CACHE_LIMIT",
    "HOST_CACHE_CAPACITY",
    "ASCEND_ENHANCE_ENABLE",
    "PYTORCH_NPU_ALLOC_CONF",
    "ASCEND_LAUNCH_BLOCKING",
    "HCCL_ALGO",
)


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
        "environment": {name: os.environ.get(name, "") for name in RECORDED_ENV},
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


def recorded_count(info: dict | None, key: str) -> int | None:
    """A count a run recorded in run_info.json (``threads``, ``samples``): a positive integer, else None."""
    value = (info or {}).get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


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
