"""The twin's ``asc.runtime.config``: the names pyasc uses to choose where a kernel runs.

pyasc's ``Backend.NPU`` runs on the device and ``Backend.Model`` on CANN's simulator; the twin has
neither, so it accepts ``Model`` (it stands in for a simulator: the kernel runs, on the host) and
refuses ``NPU`` with one line.
"""

from __future__ import annotations

from enum import Enum

from asc._twin import TwinError


class Backend(Enum):
    Model = "Model"
    NPU = "NPU"


class Platform(Enum):
    """The Atlas A2 / A3 SoCs mode 02 profiles (pyasc lists more)."""

    Ascend910B1 = "Ascend910B1"
    Ascend910B2 = "Ascend910B2"
    Ascend910B3 = "Ascend910B3"
    Ascend910B4 = "Ascend910B4"


SELECTED: dict[str, object] = {"backend": Backend.Model, "soc_version": Platform.Ascend910B1}


def set_platform(backend, soc_version=None, device_id=None, check=True) -> None:
    """Record the choice; ``Backend.NPU`` needs pyasc and CANN, which the twin is not."""
    backend = Backend(backend)
    if soc_version is not None and not isinstance(soc_version, Platform):  # as pyasc, which reads soc_version.value
        raise TwinError(
            f"set_platform got soc_version {soc_version!r}, not a config.Platform member",
            "pass config.Platform(name), as pyasc's examples do",
        )
    if backend is Backend.NPU:
        raise TwinError(
            "Backend.NPU asked of the lab's pyasc twin (pyasc is not installed here)",
            "install pyasc and CANN on an NPU machine, or use Backend.Model to run the kernel on the twin",
        )
    SELECTED.update(backend=backend, soc_version=soc_version or Platform.Ascend910B1)
