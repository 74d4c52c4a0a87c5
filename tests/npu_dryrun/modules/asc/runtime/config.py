# TEST DOUBLE for the NPU dry run: pyasc's asc.runtime.config; never used outside tests.
"""``Backend`` and ``set_platform`` as pyasc has them: ``NPU`` on a logical device (0 by default, refused
outside the machine's devices, as the runtime refuses it), ``Model`` on a simulator SoC (pyasc's
default ``Ascend910B1``). The choice is recorded (``pyasc`` / ``set_platform``)."""

from enum import Enum

import npu_dryrun_record as rec


class Backend(Enum):
    Model = "Model"
    NPU = "NPU"


SELECTED: dict = {"backend": "Model", "soc_version": "Ascend910B1", "device_id": None}


def set_platform(backend, soc_version=None, device_id=None, check=True) -> None:
    backend = Backend(backend)
    args = [backend.value, soc_version, device_id]
    if backend is Backend.NPU:
        device_id = 0 if device_id is None else int(device_id)
        if not 0 <= device_id < rec.logical_count():
            rec.record("pyasc", "set_platform", args, rc=rec.ACL_ERROR_RT_INVALID_DEVICEID)
            raise RuntimeError(f"set_platform: device {device_id} is not a logical device of this machine")
        SELECTED.update(backend="NPU", soc_version=None, device_id=device_id)
    else:
        SELECTED.update(backend="Model", soc_version=soc_version or "Ascend910B1", device_id=None)
    rec.record("pyasc", "set_platform", args, rc=0)
