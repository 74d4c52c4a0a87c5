# TEST DOUBLE for the NPU dry run: pyasc's asc.runtime.config; never used outside tests.
"""``Backend``, ``Platform`` and ``set_platform`` as pyasc has them: ``NPU`` on a logical device (0 by default,
refused outside the machine's devices, as the runtime refuses it), ``Model`` on a simulator SoC (pyasc's
default ``Ascend910B1``). ``soc_version`` must be a ``Platform`` member: pyasc versions whose ``set_platform``
takes ``Optional[Platform]`` pass it on unconverted and read its ``.value`` (PYASC, ``runtime/config.py``); a
string is refused here (recorded, TypeError). ``Model`` wants CANN's simulator libraries for the SoC on
``LD_LIBRARY_PATH`` (``$ASCEND_HOME_PATH/tools/simulator/<soc>/lib``, pyasc's own error message). The choice is recorded (``pyasc`` / ``set_platform``)."""

import os
from enum import Enum
from pathlib import Path

import npu_dryrun_record as rec


class Backend(Enum):
    Model = "Model"
    NPU = "NPU"


class Platform(Enum):
    """The Atlas A2 / A3 SoCs pyasc lists (``runtime/config.py``)."""

    Ascend910B1 = "Ascend910B1"
    Ascend910B2 = "Ascend910B2"
    Ascend910B2C = "Ascend910B2C"
    Ascend910B3 = "Ascend910B3"
    Ascend910B4 = "Ascend910B4"
    Ascend910B4_1 = "Ascend910B4-1"
    Ascend910_9362 = "Ascend910_9362"
    Ascend910_9372 = "Ascend910_9372"
    Ascend910_9381 = "Ascend910_9381"
    Ascend910_9382 = "Ascend910_9382"
    Ascend910_9391 = "Ascend910_9391"
    Ascend910_9392 = "Ascend910_9392"


SELECTED: dict = {"backend": "Model", "soc_version": "Ascend910B1", "device_id": None}


def set_platform(backend, soc_version=None, device_id=None, check=True) -> None:
    backend = Backend(backend)
    if soc_version is not None and not isinstance(soc_version, Platform):
        rec.record(
            "pyasc",
            "set_platform",
            [backend.value, repr(soc_version), device_id],
            rc=1,
            refused="soc_version is not a Platform member",
        )
        raise TypeError(
            f"set_platform: soc_version {soc_version!r} is not a config.Platform member (pyasc reads soc_version.value)"
        )
    soc_version = soc_version.value if soc_version is not None else None
    args = [backend.value, soc_version, device_id]
    if backend is Backend.NPU:
        device_id = 0 if device_id is None else int(device_id)
        if not 0 <= device_id < rec.logical_count():
            rec.record("pyasc", "set_platform", args, rc=rec.ACL_ERROR_RT_INVALID_DEVICEID)
            raise RuntimeError(f"set_platform: device {device_id} is not a logical device of this machine")
        SELECTED.update(backend="NPU", soc_version=None, device_id=device_id)
    else:
        soc_version = soc_version or "Ascend910B1"
        # pyasc: "Runtime library is not available! Please export LD_LIBRARY_PATH=$ASCEND_HOME_PATH/tools/simulator/
        # <soc>/lib:$LD_LIBRARY_PATH" when the Model backend's libraries cannot be loaded (check=True).
        lib = Path(os.environ.get("ASCEND_HOME_PATH", "")).resolve() / "tools" / "simulator" / soc_version / "lib"
        if check and lib not in {
            Path(p).resolve() for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p
        }:
            rec.record("pyasc", "set_platform", args, rc=1, refused=f"{lib} not on LD_LIBRARY_PATH")
            raise RuntimeError(
                f"Runtime library is not available! Please export LD_LIBRARY_PATH={lib}:$LD_LIBRARY_PATH"
            )
        SELECTED.update(backend="Model", soc_version=soc_version, device_id=None)
    rec.record("pyasc", "set_platform", args, rc=0)
