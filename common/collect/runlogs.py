"""Each run's logs in its own output folder, and what a failure points at.

On the npu backend every program a mode runs (msprof, the program under it, the pyACL worker,
the ranks of a DDP run, and mode 04's own process) writes CANN's application logs into
``<output folder>/logs/``, through the two variables CANN's environment-variable reference
documents (docs/logs_and_dumps.md has the sources):

- ``ASCEND_PROCESS_LOG_PATH``: where the logs go, instead of ``$HOME/ascend/log``. Below it CANN
  writes ``{debug,run,security}/plog/plog-<pid>_<timestamp>.log`` (host side) and
  ``{debug,run,security}/device-<id>/device-<pid>_<timestamp>.log`` (device side, sent back).
- ``ASCEND_GLOBAL_LOG_LEVEL``: 0 DEBUG, 1 INFO, 2 WARNING, 3 ERROR (CANN's default), 4 NULL. The
  lab passes 3 unless you set another valid level: lower levels write far more and slow the run.

Every program's own stderr is also kept, on both backends: it is shown as it comes and copied to
``<output folder>/logs/<n>-<program>.stderr.log``. After a failure :func:`failure_report` names
those files and quotes their last ERROR lines, and says how to export the device's own logs.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import BinaryIO

from common.errors import LabError

LOG_DIR = "logs"  # inside a run's output folder
LOG_PATH_VAR = "ASCEND_PROCESS_LOG_PATH"
LOG_LEVEL_VAR = "ASCEND_GLOBAL_LOG_LEVEL"
PRINT_TO_STDOUT_VAR = "ASCEND_SLOG_PRINT_TO_STDOUT"  # "1": CANN prints its logs instead of writing files
LOG_LEVELS = {"0": "DEBUG", "1": "INFO", "2": "WARNING", "3": "ERROR", "4": "NULL"}
DEFAULT_LOG_LEVEL = "3"  # ERROR, CANN's own default; DEBUG/INFO can slow a profiled run down
LOG_KINDS = ("debug", "run", "security")
# A plog line, as CANN's log reference documents it:
#   [Level] ModuleName(PID,PName):DateTimeMS [FileName:LineNumber]LogContent
PLOG_LINE = re.compile(
    r"^\[(?P<level>[A-Z]+)\]\s*(?P<module>[^\s(]+)\((?P<pid>\d+),(?P<pname>[^)]*)\):"
    r"(?P<time>\S+)\s+(?P<content>.*)$"
)
ERROR_LINES_SHOWN = 5
LINE_CHARS = 300  # a log line is quoted up to this length
DEVICE_LOG_COMMAND = "msnpureport"  # in the driver: <driver install dir>/driver/tools/msnpureport


def log_dir(out_dir: Path) -> Path:
    """Where a run's logs go: ``<out_dir>/logs``."""
    return Path(out_dir).resolve() / LOG_DIR


def log_level(env: Mapping[str, str]) -> str:
    """The ASCEND_GLOBAL_LOG_LEVEL to pass: the user's, when it is one CANN accepts, else 3 (ERROR)."""
    value = env.get(LOG_LEVEL_VAR, "").strip()
    if not value:
        return DEFAULT_LOG_LEVEL
    if value not in LOG_LEVELS:
        levels = ", ".join(f"{k} ({v})" for k, v in LOG_LEVELS.items())
        raise LabError(
            f"{LOG_LEVEL_VAR}={value!r} is not a CANN log level",
            f"use one of {levels}, or unset it (the lab passes 3, CANN's default)",
        )
    return value


def npu_log_env(env: Mapping[str, str], out_dir: Path) -> dict[str, str]:
    """The variables to add for a run on the npu backend: the log folder inside ``out_dir``, and the level."""
    return {LOG_PATH_VAR: str(log_dir(out_dir)), LOG_LEVEL_VAR: log_level(env)}


def use_run_logs(is_npu: bool, out_dir: Path, child_env: dict[str, str]) -> dict[str, str]:
    """Point CANN's logs of this run at ``out_dir/logs``: in ``child_env`` (every program the mode starts)
    and, on the npu backend, in this process's environment too (mode 04 runs torch_npu in-process,
    03 builds its worker's environment afresh). The portable backend has no CANN: nothing changes."""
    if not is_npu:
        return {}
    added = npu_log_env(os.environ, out_dir)  # CANN makes the folder when it first writes there
    child_env.update(added)
    os.environ.update(added)
    return added


# --- a program's stderr, shown and kept ------------------------------------------------------------------
def stderr_log(out_dir: Path, argv: list[str]) -> Path:
    """A new file for one program's stderr: ``<out_dir>/logs/<n>-<program>.stderr.log``, n counting from 1."""
    folder = log_dir(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(argv[0]).name) or "program"
    n = len(list(folder.glob("*.stderr.log"))) + 1
    return folder / f"{n:02d}-{name}.stderr.log"


def stderr_log_beside(env: Mapping[str, str], argv: list[str]) -> Path | None:
    """A program's stderr file in the run's log folder named by ``env`` (npu), else None (not kept)."""
    folder = env.get(LOG_PATH_VAR)
    return stderr_log(Path(folder).parent, argv) if folder and Path(folder).name == LOG_DIR else None


def tee(pipe: BinaryIO, path: Path, echo=None) -> threading.Thread:
    """Copy ``pipe`` to ``echo`` (default: this process's stderr) and to the file ``path`` as it comes."""

    def copy() -> None:
        target = echo if echo is not None else sys.stderr
        raw = getattr(target, "buffer", None)
        with path.open("wb") as file:
            try:
                for chunk in iter(lambda: pipe.read1(65536), b""):
                    file.write(chunk)
                    file.flush()
                    _echo(chunk, target, raw)
            except (OSError, ValueError):  # the pipe was closed under us (the lab gave up waiting)
                pass

    thread = threading.Thread(target=copy, name=f"tee {path.name}", daemon=True)
    thread.start()
    return thread


def _echo(chunk: bytes, target, raw) -> None:
    try:
        if raw is not None:
            raw.write(chunk)
            raw.flush()
        else:
            target.write(chunk.decode(errors="replace"))
            target.flush()
    except (OSError, ValueError):  # the terminal went away: the file keeps going
        pass


# --- after a failure -------------------------------------------------------------------------------------
def cann_logs(folder: Path) -> list[Path]:
    """CANN's log files under ``folder`` (plog-*.log and device-*.log of debug/run/security), newest first."""
    if not folder.is_dir():
        return []
    found = [
        p
        for kind in LOG_KINDS
        for p in (folder / kind).glob("*/*.log")
        if p.name.startswith(("plog-", "device-")) and p.is_file()
    ]
    return sorted(found, key=lambda p: (p.stat().st_mtime, p.name), reverse=True)


def last_errors(path: Path, limit: int = ERROR_LINES_SHOWN) -> list[str]:
    """The last ``limit`` ERROR lines of a CANN log (``[ERROR] MODULE(pid,name):time [file:line]text``)."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    errors = [line.strip() for line in lines if (m := PLOG_LINE.match(line.strip())) and m["level"] == "ERROR"]
    return [line[:LINE_CHARS] for line in errors[-limit:]]


def last_lines(path: Path, limit: int = ERROR_LINES_SHOWN) -> list[str]:
    """The last ``limit`` non-empty lines of a text file (a program's stderr)."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    return [line.rstrip()[:LINE_CHARS] for line in lines if line.strip()][-limit:]


def failure_report(out_dir: Path, is_npu: bool) -> list[str]:
    """What to print after a program of this run failed: the log files, their last errors, and (npu) how to
    export the device's logs. Empty when there is nothing to point at (a portable run with an empty stderr)."""
    folder = log_dir(out_dir)
    lines: list[str] = []
    stderr_files = sorted(p for p in folder.glob("*.stderr.log") if p.stat().st_size) if folder.is_dir() else []
    for path in stderr_files:
        lines.append(f"  stderr of {path.name.split('-', 1)[-1].removesuffix('.stderr.log')}: {path}")
        lines += [f"    {line}" for line in last_lines(path)]
    if is_npu:
        plogs = cann_logs(folder)
        with_errors = [(p, errs) for p in plogs if (errs := last_errors(p))]
        if with_errors:
            for path, errors in with_errors[:3]:
                lines.append(f"  CANN log {path}, its last ERROR lines:")
                lines += [f"    {line}" for line in errors]
        elif os.environ.get(PRINT_TO_STDOUT_VAR) == "1":
            lines.append(f"  {PRINT_TO_STDOUT_VAR}=1: CANN printed its logs above instead of writing them to {folder}")
        else:
            lines.append(
                f"  CANN logs in {folder}: {len(plogs)} file(s), no ERROR line (raise the detail with "
                f"{LOG_LEVEL_VAR}=1 and run again)"
            )
        lines.append(
            f"  device-side logs: as root, in an empty folder, run {DEVICE_LOG_COMMAND} (the driver's "
            f"driver/tools/{DEVICE_LOG_COMMAND}; '{DEVICE_LOG_COMMAND} report' from CANN 8.0.RC2): it exports "
            "into a timestamped subfolder there (docs/logs_and_dumps.md)"
        )
    return ["logs of this run:", *lines] if lines else []


def print_failure_report(out_dir: Path, is_npu: bool) -> None:
    """Print :func:`failure_report` to stderr (nothing when there is nothing to point at)."""
    lines = failure_report(out_dir, is_npu)
    if lines:
        print("\n".join(lines), file=sys.stderr, flush=True)


def where_to_look(env: Mapping[str, str]) -> str:
    """The fix of a LabError for a failed NPU program: the log folder it wrote to, when the lab set one."""
    folder = env.get(LOG_PATH_VAR)
    if not folder:
        return "read the messages above"
    return f"read the messages above and CANN's logs in {folder} (plog/plog-<pid>_<timestamp>.log)"
