"""The pyACL inference chain, with every resource released in reverse order on every path.

The chain is the one every pyACL program follows:
init -> set_device -> create_context -> load model -> model desc -> device buffers + datasets
-> copy input in -> execute -> copy output back, then the same steps undone, last first.
Each acquisition registers its own release the moment it succeeds, so a failure at any step
releases exactly what was acquired before it, data buffers included. The ``acl`` module is a
parameter so the chain can be unit-tested against a recording stand-in.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from common.errors import LabError

ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0  # device memory: huge pages first, normal pages if none left
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_AICORE_PIPE_UTILIZATION = 1  # aclprofAicoreMetrics: the same metric set msprof's --aic-metrics uses

# aclprofCreateConfig data-type flags (acl_prof.h); pyACL exposes no names, so we define them.
ACL_PROF_ACL_API = 0x0001  # AscendCL calls -> api_statistic
ACL_PROF_TASK_TIME = 0x0002  # per-task device time -> op_summary, op_statistic
ACL_PROF_AICORE_METRICS = 0x0004  # AI Core PMU counters -> op_summary's PMU columns
ACL_PROF_AICPU = 0x0008  # ops that fall back to AI CPU
ACL_PROF_FLAGS = ACL_PROF_ACL_API | ACL_PROF_TASK_TIME | ACL_PROF_AICORE_METRICS | ACL_PROF_AICPU


def check_ret(call: str, ret: int) -> None:
    """One check for every pyACL return code: name the call and the code."""
    if ret != ACL_SUCCESS:
        raise LabError(
            f"{call} failed with ACL error {ret}", "look the code up in CANN's aclError list; check `npu-smi info`"
        )


def check_handle(call: str, handle: object) -> None:
    """Calls that return a handle signal failure with 0 / None instead of a code."""
    if not handle:
        raise LabError(f"{call} returned a null handle", "the device may be out of memory or not initialized")


class Releases:
    """A stack of release calls: ``push`` right after each acquisition, ``close`` undoes them last-first.

    Every release runs even when an earlier one fails; the first error is raised afterwards,
    unless the ``with`` body already failed (that error is the one the user needs to see).
    """

    def __init__(self) -> None:
        self._stack: list[tuple[str, Callable[..., object], tuple]] = []

    def push(self, call: str, release: Callable[..., object], *args: object) -> None:
        self._stack.append((call, release, args))

    def close(self) -> LabError | None:
        first: LabError | None = None
        while self._stack:
            call, release, args = self._stack.pop()
            try:
                ret = release(*args)
                if isinstance(ret, int):  # acl.rt.free etc. return a code; a few return nothing
                    check_ret(call, ret)
            except Exception as err:  # keep releasing: one failed free must not leak the rest
                first = first or (err if isinstance(err, LabError) else LabError(f"{call} raised {err!r}"))
        return first

    def __enter__(self) -> Releases:
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        error = self.close()
        if error is not None and exc is None:
            raise error
        return False


def _device_dataset(acl, releases: Releases, size: int) -> tuple[object, int]:
    """Device memory of ``size`` bytes wrapped in a data buffer inside a dataset: what execute takes."""
    dev_ptr, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    releases.push("acl.rt.free", acl.rt.free, dev_ptr)
    buffer = acl.create_data_buffer(dev_ptr, size)
    check_handle("acl.create_data_buffer", buffer)
    # destroy_dataset does not destroy the buffers inside it: each needs its own release.
    releases.push("acl.destroy_data_buffer", acl.destroy_data_buffer, buffer)
    dataset = acl.mdl.create_dataset()
    check_handle("acl.mdl.create_dataset", dataset)
    releases.push("acl.mdl.destroy_dataset", acl.mdl.destroy_dataset, dataset)
    _, ret = acl.mdl.add_dataset_buffer(dataset, buffer)
    check_ret("acl.mdl.add_dataset_buffer", ret)
    return dataset, dev_ptr


def _start_acl_prof(acl, releases: Releases, prof_dir: Path, device: int) -> None:
    """In-process collection: init -> create_config -> start; stop/destroy_config/finalize are pushed."""
    check_ret("acl.prof.init", acl.prof.init(str(prof_dir)))
    releases.push("acl.prof.finalize", acl.prof.finalize)
    config = acl.prof.create_config([device], ACL_AICORE_PIPE_UTILIZATION, 0, ACL_PROF_FLAGS)
    check_handle("acl.prof.create_config", config)
    releases.push("acl.prof.destroy_config", acl.prof.destroy_config, config)
    check_ret("acl.prof.start", acl.prof.start(config))
    releases.push("acl.prof.stop", acl.prof.stop, config)


def run_om(
    acl,
    om_path: Path,
    device: int,
    feed: np.ndarray,
    output_dtype: np.dtype,
    output_shape: tuple[int, ...],
    warmup: int,
    measured: int,
    prof_dir: Path | None = None,
) -> np.ndarray:
    """Load ``om_path`` on ``device``, execute it warmup + measured times on ``feed``, return the output.

    With ``prof_dir``, acl.prof records only the measured executes (the warm-up runs before start).
    """
    with Releases() as releases:
        check_ret("acl.init", acl.init())
        releases.push("acl.finalize", acl.finalize)
        check_ret("acl.rt.set_device", acl.rt.set_device(device))
        releases.push("acl.rt.reset_device", acl.rt.reset_device, device)
        context, ret = acl.rt.create_context(device)
        check_ret("acl.rt.create_context", ret)
        releases.push("acl.rt.destroy_context", acl.rt.destroy_context, context)

        model_id, ret = acl.mdl.load_from_file(str(om_path))
        check_ret(f"acl.mdl.load_from_file({om_path})", ret)
        releases.push("acl.mdl.unload", acl.mdl.unload, model_id)
        desc = acl.mdl.create_desc()
        check_handle("acl.mdl.create_desc", desc)
        releases.push("acl.mdl.destroy_desc", acl.mdl.destroy_desc, desc)
        check_ret("acl.mdl.get_desc", acl.mdl.get_desc(desc, model_id))

        # The om fixes its IO sizes at build time: a model built for another shape or dtype shows here.
        in_size = acl.mdl.get_input_size_by_index(desc, 0)
        out_size = acl.mdl.get_output_size_by_index(desc, 0)
        out_bytes = int(np.prod(output_shape)) * np.dtype(output_dtype).itemsize
        if in_size != feed.nbytes or out_size != out_bytes:
            raise LabError(
                f"{om_path} takes {in_size} input bytes and gives {out_size}, but the lab feeds "
                f"{feed.nbytes} ({feed.dtype} {list(feed.shape)}) and expects {out_bytes}",
                "rebuild the model for this variant: bash 03_api_pyAcl/build_model.sh",
            )
        input_dataset, input_ptr = _device_dataset(acl, releases, in_size)
        output_dataset, output_ptr = _device_dataset(acl, releases, out_size)

        host_input = np.ascontiguousarray(feed).tobytes()  # kept alive while its pointer is used
        check_ret(
            "acl.rt.memcpy(host->device)",
            acl.rt.memcpy(input_ptr, in_size, acl.util.bytes_to_ptr(host_input), in_size, ACL_MEMCPY_HOST_TO_DEVICE),
        )
        for _ in range(warmup):  # first executes pay one-off costs (memory, caches); not profiled
            check_ret("acl.mdl.execute (warm-up)", acl.mdl.execute(model_id, input_dataset, output_dataset))
        with Releases() as prof_releases:  # its own stack: profiling stops right after the measured runs
            if prof_dir is not None:
                _start_acl_prof(acl, prof_releases, prof_dir, device)
            for _ in range(measured):
                check_ret("acl.mdl.execute", acl.mdl.execute(model_id, input_dataset, output_dataset))

        host_output, ret = acl.rt.malloc_host(out_size)
        check_ret("acl.rt.malloc_host", ret)
        releases.push("acl.rt.free_host", acl.rt.free_host, host_output)
        check_ret(
            "acl.rt.memcpy(device->host)",
            acl.rt.memcpy(host_output, out_size, output_ptr, out_size, ACL_MEMCPY_DEVICE_TO_HOST),
        )
        data = acl.util.ptr_to_bytes(host_output, out_size)
        return np.frombuffer(data, dtype=output_dtype).reshape(output_shape).copy()
