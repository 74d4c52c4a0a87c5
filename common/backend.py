"""Backend detection, done once: is this a CANN + NPU machine, or do we run portable?

Standard library only, so ``noxfile.py`` can import it before any environment exists.
"""

from __future__ import annotations

import functools
import glob
import importlib.util
import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from common.errors import LabError

BACKEND_VAR = "MSPROF_LAB_BACKEND"  # auto (default) | portable | npu
BACKENDS = ("auto", "portable", "npu")
MAX_DEVICE_ID = 63
VISIBLE_VAR = "ASCEND_RT_VISIBLE_DEVICES"  # refused on the npu backend: not supported while profiling

# Where CANN installs itself when ASCEND_HOME_PATH is not set (toolkit and the newer single-package layout).
_CANN_CANDIDATES = (
    "/usr/local/Ascend/ascend-toolkit/latest",
    "/usr/local/Ascend/cann",
    "~/Ascend/ascend-toolkit/latest",
)


@dataclass(frozen=True)
class Backend:
    """What the lab found on this machine and which backend it will use."""

    name: str  # "npu" or "portable"
    reason: str
    cann_home: str | None = None
    tools: dict[str, str] = field(default_factory=dict)  # tool name -> absolute path
    devices: tuple[int, ...] = ()
    python_modules: tuple[str, ...] = ()  # of torch_npu, acl: those importable

    @property
    def is_npu(self) -> bool:
        return self.name == "npu"

    def banner(self) -> str:
        """The loud first line every mode prints."""
        return f"=== msprof lab backend: {self.name.upper()} ({self.reason}) ==="


def parse_device_id(text: str | int) -> int:
    """A device id is an integer in 0..63; anything else is a usage error."""
    value = str(text).strip()
    if not re.fullmatch(r"[0-9]{1,2}", value) or int(value) > MAX_DEVICE_ID:
        raise LabError(
            f"device id {str(text)!r} is not an integer in 0..{MAX_DEVICE_ID}",
            "pass the NPU index as shown by `npu-smi info`, e.g. 0",
        )
    return int(value)


def find_cann_home() -> str | None:
    """CANN's install root: ASCEND_HOME_PATH / ASCEND_TOOLKIT_HOME, else the standard paths."""
    for var in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME"):
        value = os.environ.get(var)
        if value and Path(value).is_dir():
            return str(Path(value).resolve())
    for candidate in _CANN_CANDIDATES:
        path = Path(candidate).expanduser()
        if (path / "set_env.sh").is_file() or (path / "bin").is_dir():
            return str(path.resolve())
    return None


def find_tool(name: str, cann_home: str | None) -> str | None:
    """A CANN tool on PATH, or in ``<cann_home>/bin`` where set_env.sh would put it."""
    found = shutil.which(name)
    if found:
        return found
    if cann_home:
        candidate = Path(cann_home) / "bin" / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


# `npu-smi info -l`: "Total Count : N", then one block per NPU ("NPU ID : k", ..., "Chip Count : c").
_TOTAL_COUNT = re.compile(r"^\s*Total Count\s*:\s*(\d+)\s*$", re.MULTILINE)
_NPU_ID = re.compile(r"^\s*NPU ID\s*:\s*(\d+)\s*$", re.MULTILINE)
_CHIP_COUNT = re.compile(r"^\s*Chip Count\s*:\s*(\d+)\s*$", re.MULTILINE)


def count_from_npu_smi_list(text: str) -> int | None:
    """Logical devices listed by ``npu-smi info -l``: one per chip (the sum of "Chip Count" when every NPU
    entry has one), else "Total Count", else the number of "NPU ID" entries; None when it lists none."""
    npus, chips = _NPU_ID.findall(text), _CHIP_COUNT.findall(text)
    if npus and len(chips) == len(npus):
        return sum(int(c) for c in chips) or None
    total = _TOTAL_COUNT.search(text)
    if total:
        return int(total.group(1)) or None
    return len(npus) or None


def davinci_count() -> int:
    """The /dev/davinci<N> nodes (not davinci_manager): only the fallback when npu-smi is missing."""
    return sum(1 for p in glob.glob("/dev/davinci*") if re.fullmatch(r"/dev/davinci[0-9]+", p))


def logical_devices(npu_smi: str | None) -> tuple[tuple[int, ...], str]:
    """The logical device ids 0..N-1 the runtime numbers, and what N was counted from.

    Logical ids are what ``aclrtSetDevice`` / ``acl.rt.set_device`` / ``torch.npu.set_device`` take:
    in a container that mounts only /dev/davinci4, that card is logical device 0. N comes from
    ``npu-smi info -l``; only without npu-smi is it the number of /dev/davinci<N> nodes.
    """
    if npu_smi:
        try:
            text = subprocess.run(
                [npu_smi, "info", "-l"], capture_output=True, text=True, timeout=30, check=False
            ).stdout
        except (OSError, subprocess.SubprocessError):
            text = ""
        return tuple(range(count_from_npu_smi_list(text) or 0)), "`npu-smi info -l`"
    return tuple(range(davinci_count())), "/dev/davinci* nodes, npu-smi not found"


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


@functools.lru_cache(maxsize=None)
def detect(requested: str | None = None) -> Backend:
    """Decide the backend once per process. ``requested`` (or $MSPROF_LAB_BACKEND) may force one."""
    choice = (requested or os.environ.get(BACKEND_VAR) or "auto").strip().lower()
    if choice not in BACKENDS:
        raise LabError(f"{BACKEND_VAR}={choice!r} is not one of {', '.join(BACKENDS)}", "unset it or pick one of those")
    if choice == "portable":
        return Backend("portable", f"forced by {BACKEND_VAR}=portable")

    cann_home = find_cann_home()
    tools = {t: p for t in ("msprof", "atc", "npu-smi") if (p := find_tool(t, cann_home))}
    devices, source = logical_devices(tools.get("npu-smi"))
    modules = tuple(m for m in ("torch_npu", "acl") if _importable(m))
    missing = []
    if not cann_home:
        missing.append("CANN (ASCEND_HOME_PATH unset, no /usr/local/Ascend)")
    if "msprof" not in tools:
        missing.append("msprof on PATH")
    if not devices:
        missing.append(f"NPU (none counted from {source})")

    if missing:
        if choice == "npu":
            raise LabError(
                f"{BACKEND_VAR}=npu but this machine lacks " + ", ".join(missing),
                "source CANN's set_env.sh and check `npu-smi info`, or use the portable backend",
            )
        return Backend("portable", "no " + "; no ".join(missing))
    reason = f"CANN at {cann_home}, logical devices 0..{len(devices) - 1} (counted from {source})"
    return Backend("npu", reason, cann_home, tools, devices, modules)


def select_device(backend: Backend, device: int) -> dict[str, str]:
    """Check ``device`` is a logical device id here; the environment a profiled child runs with.

    The program selects the device itself (``aclrtSetDevice`` / ``acl.rt.set_device`` /
    ``torch.npu.set_device``), given the id on its command line, and msprof profiles the device
    the program uses. ASCEND_RT_VISIBLE_DEVICES is not used: CANN's environment-variable reference
    says it is not supported while profiling, so a run with it set is refused.
    """
    env = dict(os.environ)
    if backend.is_npu:
        if env.get(VISIBLE_VAR) is not None:
            raise LabError(
                f"{VISIBLE_VAR}={env[VISIBLE_VAR]!r} is set; CANN does not support it while profiling",
                f"unset {VISIBLE_VAR} and pass the logical device id (0..{max(len(backend.devices) - 1, 0)}) instead",
            )
        if device not in backend.devices:
            raise LabError(
                f"device {device} is not a logical device id here (valid: {valid_ids(backend.devices)})",
                "pick one of those; logical ids count the chips `npu-smi info` lists, from 0",
            )
    return env


def valid_ids(devices: tuple[int, ...] | list[int]) -> str:
    """``0..7`` for a full range, else the ids themselves; ``none`` when there are none."""
    if not devices:
        return "none"
    ids = sorted(devices)
    if len(ids) > 2 and ids == list(range(ids[0], ids[-1] + 1)):
        return f"{ids[0]}..{ids[-1]}"
    return ", ".join(map(str, ids))


def host_arch_dir() -> str:
    """CANN's per-architecture library folder name, e.g. ``x86_64-linux`` or ``aarch64-linux``."""
    return f"{platform.machine()}-linux"


def _cells(line: str) -> list[str] | None:
    """The cells of one ``| a | b | c |`` table row, stripped; None for rules and other lines."""
    line = line.strip()
    if not (line.startswith("|") and line.endswith("|")) or len(line) < 2:
        return None
    return [c.strip() for c in line[1:-1].split("|")]


# A SoC name as CANN spells it: "Ascend" + the chip, which may carry a "-<n>" suffix (Ascend910B4-1:
# torch_npu's NpuVariables.cpp socVersionMap, vllm-ascend's SOC_VERSION list).
_CHIP = r"[0-9A-Za-z_]+(?:-[0-9A-Za-z_]+)?"
SOC_NAME = re.compile(rf"Ascend{_CHIP}")
# Atlas A2 (Ascend910B1, B2, B2C, B3, B4, B4-1) and Atlas A3 (Ascend910_93xx), by their full names
# (NpuVariables.cpp socVersionMap). A prefix "Ascend910B" would also take the legacy Atlas training
# chips "Ascend910B" and "Ascend910ProB", which are neither.
ATLAS_A2_A3 = re.compile(r"Ascend(?:910B[1-4]|910B2C|910B4-1|910_93[0-9]{2})")


def is_atlas_a2_a3(soc: str | None) -> bool:
    """Whether ``soc`` names an Atlas A2 or A3 chip: the ones the AscendC KernelScale region
    (MetricsProfStart/Stop, msprof op ``--aic-metrics=KernelScale``) and mode 02's
    PipeUtilization layout (``aiv_*`` columns, ``sub_block_id``) are documented for."""
    return bool(soc) and ATLAS_A2_A3.fullmatch(soc) is not None


_NAME_ROW = re.compile(r"(\d+)\s+([0-9]{3}[0-9A-Za-z_]*(?:-[0-9A-Za-z_]+)?)")  # "NPU  Name": "0     910B3" / "910B4-1"
_CHIP_ROW = re.compile(r"(\d+)(?:\s+(\d+))?")  # "Chip [Device]": "0" (910B), "1     2" (310P: Device 2)


def chip_names(text: str) -> dict[int, str]:
    """``npu-smi info``'s chip table as {logical device id: chip Name}, read by its columns.

    Each chip is two rows: the first cell holds "NPU  Name", the next row's first cell "Chip" or
    "Chip  Device". Only that first cell is read, so a number from another column (memory
    "3105 / 65536", power, bus id) is never taken for a name. Where the table has a Device column
    (310P) it is the logical id; otherwise the chips are numbered in the order listed. The
    process table below the chips ends the reading.
    """
    names: dict[int, str] = {}
    in_table, pending = False, None
    for line in text.splitlines():
        cells = _cells(line)
        if cells is None:
            continue
        first = cells[0]
        if first.startswith("NPU") and "Name" in first:  # the chip table's header
            in_table, pending = True, None
            continue
        if any("Process" in c for c in cells):  # "NPU Chip | Process id | ...": not chips
            in_table, pending = False, None
            continue
        if not in_table:
            continue
        if pending is None:
            m = _NAME_ROW.fullmatch(first)
            pending = m.group(2) if m else None
            continue
        m = _CHIP_ROW.fullmatch(first)
        if m:
            logical = int(m.group(2)) if m.group(2) is not None else len(names)
            names.setdefault(logical, pending)
        pending = None
    return names


def soc_version(backend: Backend, device: int = 0) -> str:
    """The SoC name ATC and AscendC want (e.g. ``Ascend910B3``): $SOC_VERSION, else the Name column
    of ``npu-smi info``'s chip table for logical device ``device``."""
    forced = os.environ.get("SOC_VERSION")
    if forced:
        if not SOC_NAME.fullmatch(forced):
            raise LabError(f"SOC_VERSION={forced!r} does not look like Ascend<chip>", "e.g. SOC_VERSION=Ascend910B3")
        return forced
    npu_smi = backend.tools.get("npu-smi")
    if not npu_smi:
        raise LabError("cannot detect the SoC: npu-smi not found", "set SOC_VERSION, e.g. SOC_VERSION=Ascend910B3")
    try:
        text = subprocess.run([npu_smi, "info"], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        text = ""
    names = chip_names(text)
    if device not in names:
        found = f"chips for logical devices {valid_ids(sorted(names))}" if names else "no chip table"
        raise LabError(
            f"cannot read the chip Name of device {device} from `npu-smi info` ({found})",
            "set SOC_VERSION, e.g. SOC_VERSION=Ascend910B3",
        )
    return "Ascend" + names[device]
