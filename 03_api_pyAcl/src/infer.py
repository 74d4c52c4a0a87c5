"""The pyACL inference chain, with every resource released in reverse order on every path.

The chain is the one every pyACL program follows:
init -> set_device -> create_context -> [prof.init] -> load model -> model desc -> device buffers
+ datasets (input and output sizes, output dims from the model description) -> copy inputs in -> execute -> copy
outputs back, then the same steps undone, last first. With profiling, acl.prof.init comes after
the runtime resources and before the model is loaded, acl.prof.start right before the measured
executes, stop / destroy_config right after them, and acl.prof.finalize after the model is unloaded
but before the runtime resources are released (destroy_context, reset_device) and acl.finalize
(CANN pyACL API reference, "Profiling pyACL API"; oam-tools "使用acl C&C++接口采集性能数据").
Each acquisition registers its own release the moment it succeeds, so a failure at any step
releases exactly what was acquired before it, data buffers included. The ``acl`` module is a
parameter so the chain can be unit-tested against a recording stand-in.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from common.backend import Backend
from common.errors import LabError
from common.profiling import AicoreMetrics, Profiler, ProfileType, PyaclProfInterface

NPU = Backend("npu", "pyACL's worker runs on the NPU")  # the worker is started on the npu backend only

ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0  # device memory: huge pages first, normal pages if none left
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
# What acl.prof collects (aclprofCreateConfig's dataTypeConfig, acl_prof.h; pyACL exposes no names, common.profiling
# does): AscendCL calls -> api_statistic, per-task device time -> op_summary / op_statistic, the AI Core PMU counters
# of PipeUtilization (the metric set msprof's --aic-metrics uses) -> op_summary's PMU columns, ops on the AI CPU.
ACL_PROF_FLAGS = ProfileType.ACL_API | ProfileType.TASK_TIME | ProfileType.AICORE_METRICS | ProfileType.AICPU

# aclDataType (acl_base.h) -> numpy, for the dtypes an offline model's outputs can have here.
ACL_DTYPES = {0: np.float32, 1: np.float16, 2: np.int8, 3: np.int32, 4: np.uint8, 6: np.int16, 7: np.uint16,
              8: np.uint32, 9: np.int64, 10: np.uint64, 11: np.float64, 12: np.bool_}


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


def _device_dataset(acl, releases: Releases, sizes: list[int]) -> tuple[object, list[int]]:
    """Device memory per size, each wrapped in a data buffer, all in one dataset: what execute takes."""
    buffers, pointers = [], []
    for size in sizes:
        dev_ptr, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
        check_ret("acl.rt.malloc", ret)
        releases.push("acl.rt.free", acl.rt.free, dev_ptr)
        buffer = acl.create_data_buffer(dev_ptr, size)
        check_handle("acl.create_data_buffer", buffer)
        # destroy_dataset does not destroy the buffers inside it: each needs its own release.
        releases.push("acl.destroy_data_buffer", acl.destroy_data_buffer, buffer)
        buffers.append(buffer)
        pointers.append(dev_ptr)
    dataset = acl.mdl.create_dataset()
    check_handle("acl.mdl.create_dataset", dataset)
    releases.push("acl.mdl.destroy_dataset", acl.mdl.destroy_dataset, dataset)
    for buffer in buffers:
        _, ret = acl.mdl.add_dataset_buffer(dataset, buffer)
        check_ret("acl.mdl.add_dataset_buffer", ret)
    return dataset, pointers


def _init_acl_prof(acl, releases: Releases, prof_dir: Path) -> Profiler:
    """acl.prof.init: after the device and context, before the model is loaded. Pushed here, its
    finalize runs after the model is unloaded and before the context and device are released.
    The calls go through the lab's Profiler (pyasc's asc.lib.profiling names) over pyACL's acl.prof."""
    profiler = Profiler(prof_dir, backend=NPU, interface=PyaclProfInterface(acl))
    profiler.init()  # a failure is a ProfilingError (a LabError) naming the call and its code
    releases.push("acl.prof.finalize", profiler.finalize)
    return profiler


def _start_acl_prof(profiler: Profiler, releases: Releases, device: int) -> None:
    """create_config -> start, right before the measured executes; stop + destroy_config are pushed."""
    profiler.start(device, metrics=AicoreMetrics.PIPE_UTILIZATION, profile_types=ACL_PROF_FLAGS)
    releases.push("acl.prof.stop", profiler.stop, False)


def output_specs(acl, desc, om_path: Path) -> list[tuple[int, tuple[int, ...], np.dtype]]:
    """Per model output: its size in bytes, dims and dtype, as the model description states them."""
    count = acl.mdl.get_num_outputs(desc)
    if not count:
        raise LabError(f"{om_path}: acl.mdl.get_num_outputs found no output",
                       "rebuild the model: bash 03_api_pyAcl/build_model.sh")
    specs = []
    for i in range(count):
        size = acl.mdl.get_output_size_by_index(desc, i)
        dims, ret = acl.mdl.get_output_dims(desc, i)
        check_ret(f"acl.mdl.get_output_dims({i})", ret)
        shape = tuple(int(d) for d in (dims or {}).get("dims", []))
        code = acl.mdl.get_output_data_type(desc, i)
        if code not in ACL_DTYPES:
            raise LabError(f"{om_path}: acl.mdl.get_output_data_type({i}) returned {code}, not a dtype the lab reads",
                           "rebuild the model: bash 03_api_pyAcl/build_model.sh")
        dtype = np.dtype(ACL_DTYPES[code])
        if any(d < 0 for d in shape) or not size or int(np.prod(shape)) * dtype.itemsize != size:
            raise LabError(f"{om_path}: output {i} has dims {list(shape)} ({dtype}) but {size} bytes",
                           "build the model with a fixed --input_shape: bash 03_api_pyAcl/build_model.sh")
        specs.append((size, shape, dtype))
    return specs


def input_sizes(acl, desc, om_path: Path, feeds: list[np.ndarray]) -> list[int]:
    """Per model input, its size in bytes; the om fixes them at build time, so a model built for other
    inputs (count, shape or dtype) shows here."""
    count = acl.mdl.get_num_inputs(desc)
    if count != len(feeds):
        raise LabError(f"{om_path}: acl.mdl.get_num_inputs gives {count} inputs, the lab feeds {len(feeds)}",
                       "rebuild the model for this workload: bash 03_api_pyAcl/build_model.sh --workload FILE")
    sizes = []
    for i, feed in enumerate(feeds):
        size = acl.mdl.get_input_size_by_index(desc, i)
        if size != feed.nbytes:
            raise LabError(
                f"{om_path} takes {size} bytes at input {i}, but the lab feeds {feed.nbytes} ({feed.dtype} "
                f"{list(feed.shape)})", "rebuild the model for this variant: bash 03_api_pyAcl/build_model.sh",
            )
        sizes.append(size)
    return sizes


def run_om(
    acl,
    om_path: Path,
    device: int,
    feeds: list[np.ndarray] | np.ndarray,
    warmup: int,
    measured: int,
    prof_dir: Path | None = None,
    acl_config: Path | None = None,
) -> list[np.ndarray]:
    """Load ``om_path`` on logical device ``device``, execute it warmup + measured times on ``feeds``
    (one array per model input), return every output (sizes, dims and dtypes from the model description).

    With ``prof_dir``, acl.prof.init runs before the model is loaded and acl.prof.start after the
    warm-up, so only the measured executes are recorded; acl.prof.finalize runs before the context
    and the device are released. With ``acl_config``, acl.init reads that JSON file (the lab uses it for the
    ``dump`` block: every op's output of the executes, written by CANN; see common/collect/precision.py).
    """
    feeds = [feeds] if isinstance(feeds, np.ndarray) else list(feeds)
    with Releases() as releases:
        check_ret("acl.init", acl.init(str(acl_config)) if acl_config else acl.init())
        releases.push("acl.finalize", acl.finalize)
        check_ret("acl.rt.set_device", acl.rt.set_device(device))
        releases.push("acl.rt.reset_device", acl.rt.reset_device, device)
        context, ret = acl.rt.create_context(device)
        check_ret("acl.rt.create_context", ret)
        releases.push("acl.rt.destroy_context", acl.rt.destroy_context, context)
        profiler = None
        if prof_dir is not None:  # here, so acl.prof.finalize comes before the context and device are released
            profiler = _init_acl_prof(acl, releases, prof_dir)

        model_id, ret = acl.mdl.load_from_file(str(om_path))
        check_ret(f"acl.mdl.load_from_file({om_path})", ret)
        releases.push("acl.mdl.unload", acl.mdl.unload, model_id)
        desc = acl.mdl.create_desc()
        check_handle("acl.mdl.create_desc", desc)
        releases.push("acl.mdl.destroy_desc", acl.mdl.destroy_desc, desc)
        check_ret("acl.mdl.get_desc", acl.mdl.get_desc(desc, model_id))

        in_sizes = input_sizes(acl, desc, om_path, feeds)
        outputs = output_specs(acl, desc, om_path)
        input_dataset, input_ptrs = _device_dataset(acl, releases, in_sizes)
        output_dataset, output_ptrs = _device_dataset(acl, releases, [size for size, _, _ in outputs])

        host_inputs = [np.ascontiguousarray(feed).tobytes() for feed in feeds]  # kept alive while pointers are used
        for i, (ptr, size, host) in enumerate(zip(input_ptrs, in_sizes, host_inputs)):
            check_ret(f"acl.rt.memcpy(host->device, input {i})",
                      acl.rt.memcpy(ptr, size, acl.util.bytes_to_ptr(host), size, ACL_MEMCPY_HOST_TO_DEVICE))
        for _ in range(warmup):  # first executes pay one-off costs (memory, caches); before start: not recorded
            check_ret("acl.mdl.execute (warm-up)", acl.mdl.execute(model_id, input_dataset, output_dataset))
        with Releases() as prof_releases:  # its own stack: stop + destroy_config right after the measured runs
            if profiler is not None:
                _start_acl_prof(profiler, prof_releases, device)
            for _ in range(measured):
                check_ret("acl.mdl.execute", acl.mdl.execute(model_id, input_dataset, output_dataset))

        results = []
        for (size, shape, dtype), output_ptr in zip(outputs, output_ptrs):
            host_output, ret = acl.rt.malloc_host(size)
            check_ret("acl.rt.malloc_host", ret)
            releases.push("acl.rt.free_host", acl.rt.free_host, host_output)
            check_ret(
                "acl.rt.memcpy(device->host)",
                acl.rt.memcpy(host_output, size, output_ptr, size, ACL_MEMCPY_DEVICE_TO_HOST),
            )
            data = acl.util.ptr_to_bytes(host_output, size)
            results.append(np.frombuffer(data, dtype=dtype).reshape(shape).copy())
        return results
