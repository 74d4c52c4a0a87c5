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


def visible_devices() -> tuple[int, ...]:
    """NPU indices the driver exposes (/dev/davinci<N>), limited by ASCEND_RT_VISIBLE_DEVICES if set."""
    found = sorted(int(m.group(1)) for p in glob.glob("/dev/davinci*") if (m := re.fullmatch(r"/dev/davinci(\d+)", p)))
    limit = os.environ.get("ASCEND_RT_VISIBLE_DEVICES")
    if limit:
        allowed = {int(x) for x in limit.split(",") if x.strip().isdigit()}
        found = [d for d in found if d in allowed]
    return tuple(found)


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
    devices = visible_devices()
    modules = tuple(m for m in ("torch_npu", "acl") if _importable(m))
    missing = []
    if not cann_home:
        missing.append("CANN (ASCEND_HOME_PATH unset, no /usr/local/Ascend)")
    if "msprof" not in tools:
        missing.append("msprof on PATH")
    if not devices:
        missing.append("visible NPU (/dev/davinci*)")

    if missing:
        if choice == "npu":
            raise LabError(
                f"{BACKEND_VAR}=npu but this machine lacks " + ", ".join(missing),
                "source CANN's set_env.sh and check `npu-smi info`, or use the portable backend",
            )
        return Backend("portable", "no " + "; no ".join(missing))
    reason = f"CANN at {cann_home}, devices {','.join(map(str, devices))}"
    return Backend("npu", reason, cann_home, tools, devices, modules)


def select_device(backend: Backend, device: int) -> dict[str, str]:
    """Environment for a child that must use ``device``; on the npu backend the device must be visible.

    ASCEND_RT_VISIBLE_DEVICES is set before msprof starts so that msprof, the runtime and the
    app agree on one card; inside the child that card is then logical device 0.
    """
    env = dict(os.environ)
    if backend.is_npu:
        if device not in backend.devices:
            raise LabError(
                f"device {device} is not visible (visible: {', '.join(map(str, backend.devices))})",
                "pick one of those ids, see `npu-smi info`",
            )
        env["ASCEND_RT_VISIBLE_DEVICES"] = str(device)
    return env


def host_arch_dir() -> str:
    """CANN's per-architecture library folder name, e.g. ``x86_64-linux`` or ``aarch64-linux``."""
    return f"{platform.machine()}-linux"


def soc_version(backend: Backend, device: int = 0) -> str:
    """The SoC name ATC and AscendC want (e.g. ``Ascend910B3``): $SOC_VERSION, else from npu-smi."""
    forced = os.environ.get("SOC_VERSION")
    if forced:
        if not re.fullmatch(r"Ascend[0-9A-Za-z_]+", forced):
            raise LabError(f"SOC_VERSION={forced!r} does not look like Ascend<chip>", "e.g. SOC_VERSION=Ascend910B3")
        return forced
    npu_smi = backend.tools.get("npu-smi")
    if not npu_smi:
        raise LabError("cannot detect the SoC: npu-smi not found", "set SOC_VERSION, e.g. SOC_VERSION=Ascend910B3")
    text = subprocess.run([npu_smi, "info"], capture_output=True, text=True, timeout=30, check=False).stdout
    names = re.findall(r"\b((?:910|310|950)[0-9A-Z]*)\b", text)
    if not names:
        raise LabError("cannot read the chip name from `npu-smi info`", "set SOC_VERSION, e.g. SOC_VERSION=Ascend910B3")
    return "Ascend" + names[min(device, len(names) - 1)]
