# TEST DOUBLE for the NPU dry run: a recording stand-in for torch_npu on the real CPU torch; never used outside tests.
"""``import torch_npu`` here registers an "npu" device that is the CPU, and records what the lab calls.

- ``torch.npu.set_device(id)`` / ``current_device`` / ``device_count`` / ``synchronize``: logical ids
  0..N-1 (N = 8, narrowed by ASCEND_RT_VISIBLE_DEVICES); an id outside raises RuntimeError, as
  torch_npu does for an invalid device.
- ``tensor.to("npu:N")`` / ``module.to(...)``: checked like set_device, then the tensor stays on the CPU.
- ``dist.init_process_group("hccl")``: a gloo group on the CPU; DDP over CPU parameters drops
  ``device_ids`` (recorded).
- ``torch_npu.npu.mstx.range_start(message, stream=None, domain="default") -> int`` / ``range_end(id)``
  and ``torch.npu.current_stream()``: recorded, as the torch_npu API reference states them
  (op-plugin docs ``torch_npu-npu-mstx-range_start.md``); ending an id never started raises.
- the tuning settings (torch_npu API reference): ``npu.set_compile_mode(jit_compile=...)``,
  ``npu.set_aoe(dump_path)``, ``npu.config.allow_internal_format`` and ``npu.matmul.allow_hf32``
  (attributes: each assignment recorded with its value); ``TASK_QUEUE_ENABLE`` and
  ``CPU_AFFINITY_CONF`` as the process had them when torch_npu was imported (the import's record).
- ``torch_npu.profiler``: see torch_npu/profiler/__init__.py.
"""

from __future__ import annotations

import os
import types

import npu_dryrun_record as rec
import torch

__version__ = f"{os.environ.get('NPU_DRYRUN_PTA_VERSION', '7.2.0')}.dryrun"  # the release it poses as
_state = {"device": None, "to_seen": set()}


def _index(device) -> int | None:
    """The npu index of ``device`` (None: the current device), or -1 when it is not an npu device."""
    if isinstance(device, int):
        return device
    if isinstance(device, str):
        if not device.startswith("npu"):
            return -1
        _, _, idx = device.partition(":")
        return int(idx) if idx else None
    if isinstance(device, torch.device):
        return device.index if device.type == "npu" else -1
    return -1


def _check(call: str, index: int) -> None:
    if not 0 <= index < rec.logical_count():
        rec.record("torch_npu", call, [index], rc=1, refused="invalid device id")
        raise RuntimeError(f"Invalid device ID {index}: logical npu ids here are 0..{rec.logical_count() - 1}")


def set_device(device) -> None:
    index = _index(device)
    if index is None or index < 0:
        rec.record("torch_npu", "npu.set_device", [str(device)], rc=1, refused="not an npu device")
        raise RuntimeError(f"set_device expects an npu device, got {device!r}")
    _check("npu.set_device", index)
    _state["device"] = index
    rec.record("torch_npu", "npu.set_device", [index], rc=0)


def current_device() -> int:
    return 0 if _state["device"] is None else _state["device"]


def device_count() -> int:
    return rec.logical_count()


def synchronize(device=None) -> None:
    rec.record("torch_npu", "npu.synchronize", [] if device is None else [str(device)], rc=0)


def is_available() -> bool:
    return rec.logical_count() > 0


class _Stream:
    """What torch.npu.current_stream() returns: the device's default stream."""

    def __init__(self, device: int) -> None:
        self.device_index = device


def current_stream(device=None) -> _Stream:
    return _Stream(current_device() if device is None else _index(device))


def _range_start(message: str = "None", stream=None, domain: str = "default") -> int:
    _state["ranges"] = _state.get("ranges", 0) + 1
    _state.setdefault("open", set()).add(_state["ranges"])
    rec.record(
        "torch_npu",
        "mstx.range_start",
        [message, domain],
        rc=0,
        range_id=_state["ranges"],
        device_stream=None if stream is None else stream.device_index,
    )
    return _state["ranges"]


def _range_end(range_id: int, domain: str = "default") -> None:
    if range_id not in _state.get("open", set()):
        rec.record("torch_npu", "mstx.range_end", [range_id], rc=1, refused="range id never started")
        raise RuntimeError(f"mstx.range_end: range id {range_id} was not started")
    _state["open"].discard(range_id)
    rec.record("torch_npu", "mstx.range_end", [range_id], rc=0)


def set_compile_mode(jit_compile: bool = True) -> None:
    if not isinstance(jit_compile, bool):
        rec.record("torch_npu", "npu.set_compile_mode", [jit_compile], rc=1, refused="jit_compile is a bool")
        raise TypeError("set_compile_mode(jit_compile=...) takes a bool")
    rec.record("torch_npu", "npu.set_compile_mode", [], rc=0, jit_compile=jit_compile)


def set_aoe(dump_path) -> None:
    rec.record("torch_npu", "npu.set_aoe", [str(dump_path)], rc=0)


class _Settings:
    """``torch.npu.config`` / ``torch.npu.matmul``: known boolean switches; each assignment recorded, others refused."""

    def __init__(self, prefix: str, **defaults: bool) -> None:
        object.__setattr__(self, "_prefix", prefix)
        object.__setattr__(self, "_values", dict(defaults))

    def __getattr__(self, name: str):
        values = object.__getattribute__(self, "_values")
        if name not in values:
            raise AttributeError(f"{object.__getattribute__(self, '_prefix')}.{name}")
        return values[name]

    def __setattr__(self, name: str, value) -> None:
        call = f"{self._prefix}.{name}"
        if name not in self._values or not isinstance(value, bool):
            rec.record("torch_npu", call, [value], rc=1, refused="no such switch, or not a bool")
            raise AttributeError(f"{call} is not a boolean switch of torch_npu")
        self._values[name] = value
        rec.record("torch_npu", call, [value], rc=0)


def _has_mstx(version: str) -> bool:
    """Whether the release the stand-in poses as documents ``npu.mstx.range_start``: 6.0.RC3 and later."""
    major, minor, *rest = (version.lower().split(".") + ["0"])[:3]
    if (int(major), int(minor)) != (6, 0):
        return (int(major), int(minor)) > (6, 0)
    return not rest[0].startswith("rc") or int(rest[0][2:] or 0) >= 3


npu = types.ModuleType("torch_npu.npu")
npu.set_compile_mode, npu.set_aoe = set_compile_mode, set_aoe
npu.config = _Settings("npu.config", allow_internal_format=True)
npu.matmul = _Settings("npu.matmul", allow_hf32=False)
npu.set_device, npu.current_device, npu.device_count = set_device, current_device, device_count
npu.synchronize, npu.is_available, npu.current_stream = synchronize, is_available, current_stream
if _has_mstx(os.environ.get("NPU_DRYRUN_PTA_VERSION", "7.2.0")):  # an older release poses without it
    npu.mstx = types.SimpleNamespace(range_start=_range_start, range_end=_range_end)


def _to_cpu(device):
    index = _index(device)
    if index == -1:
        return device
    index = current_device() if index is None else index
    _check("tensor.to", index)
    if index not in _state["to_seen"]:  # once per device and process: the first move says which card
        _state["to_seen"].add(index)
        rec.record("torch_npu", "tensor.to", [index], rc=0)
    return torch.device("cpu")


_tensor_to = torch.Tensor.to


def _patched_to(self, *args, **kwargs):
    args = tuple(_to_cpu(a) if isinstance(a, (str, torch.device)) else a for a in args)
    if "device" in kwargs:
        kwargs["device"] = _to_cpu(kwargs["device"])
    return _tensor_to(self, *args, **kwargs)


def _register() -> None:
    if getattr(torch, "_npu_dryrun", False):
        return
    torch.utils.rename_privateuse1_backend("npu")
    torch._register_device_module("npu", npu)
    torch.Tensor.to = _patched_to
    torch._npu_dryrun = True
    _register_hccl()
    rec.record(
        "torch_npu",
        "import",
        [],
        rc=0,
        tuning_env={k: os.environ.get(k) for k in ("TASK_QUEUE_ENABLE", "CPU_AFFINITY_CONF")},
    )


def _register_hccl() -> None:
    import torch.distributed as dist

    if not dist.is_available():
        return

    def create(store, rank, size, timeout):
        rec.record("torch_npu", "hccl.create_group", [rank, size], rc=0, mapped_to="gloo")
        return dist.ProcessGroupGloo(store, rank, size, timeout)

    dist.Backend.register_backend("hccl", create, devices=["cpu", "npu"])
    base = torch.nn.parallel.DistributedDataParallel

    class DistributedDataParallel(base):
        def __init__(self, module, device_ids=None, *args, **kwargs):
            if device_ids is not None and all(p.device.type == "cpu" for p in module.parameters()):
                for d in device_ids:
                    _check("ddp.device_ids", _index(d) if not isinstance(d, int) else d)
                rec.record("torch_npu", "ddp.device_ids", [str(d) for d in device_ids], rc=0, mapped_to="cpu")
                device_ids = None
            super().__init__(module, device_ids, *args, **kwargs)

    torch.nn.parallel.DistributedDataParallel = DistributedDataParallel


_register()

from torch_npu import profiler as profiler  # after the device exists
