# TEST DOUBLE for the NPU dry run: a recording stand-in for pyACL (``import acl``); never used outside tests.
"""pyACL's calls as the lab uses them, with CANN's order rules and return codes, recorded in calls.jsonl.

Refused like the real runtime (a non-zero aclError, or a 0 handle): any call before ``acl.init``;
a logical device id outside 0..N-1 (N = 8, narrowed by ASCEND_RT_VISIBLE_DEVICES);
``acl.prof.init`` after a model was loaded (pyACL API reference, "Profiling pyACL API": init
after acl.init and before model loading), ``prof.start`` before ``prof.init`` or with a config
it did not create, a second ``prof.init``, ``prof.finalize`` after the device was reset (oam-tools
"使用acl C&C++接口采集性能数据": finalize profiling, then release the runtime resources), ``acl.finalize``
while profiling is initialized.
"Device memory" is host memory. ``mdl.execute`` runs the ONNX model the stand-in ATC recorded
in the .om on the CPU (ONNX Runtime), in the IO dtypes ATC fixed, when ONNX Runtime is there.
"""

from __future__ import annotations

import itertools
import json
import os
import types
from pathlib import Path

import npu_dryrun_record as rec
import npu_dryrun_replay as replay

_ids = itertools.count(1)


class _State:
    def __init__(self) -> None:
        self.initialized = False
        self.device: int | None = None
        self.models: dict[int, dict] = {}
        self.loaded_any = False
        self.prof_path: str | None = None
        self.prof_configs: dict[int, list[int]] = {}
        self.prof_started: set[int] = set()
        self.prof_devices: set[int] = set()
        self.reset_while_profiling = False
        self.memory: dict[int, bytearray] = {}
        self.buffers: dict[int, tuple[int, int]] = {}
        self.datasets: dict[int, list[int]] = {}
        self.descs: dict[int, int | None] = {}
        self.dump: dict | None = None
        self.dumped: dict[int, int] = {}  # model id -> executes dumped (the data_index folders)


S = _State()


def _done(call: str, args: list, rc: int, why: str | None = None) -> int:
    extra = {"refused": why} if rc != rec.ACL_SUCCESS and why else {}
    rec.record("acl", call, args, rc=rc, **extra)
    return rc


def _needs_init(call: str, args: list) -> int | None:
    if not S.initialized:
        return _done(call, args, rec.ACL_ERROR_UNINITIALIZE, "called before acl.init")
    return None


# The dump block's documented values (pyACL API reference, acl.json's "dump": docs/npu_reference.md ACL-DUMP).
DUMP_MODES = ("input", "output", "all")
DUMP_DATA = ("tensor", "stats")
DUMP_OP_SWITCH = ("on", "off")


def _dump_problem(dump: object) -> str | None:
    """Why acl.init would refuse this ``dump`` block, or None."""
    if not isinstance(dump, dict):
        return "dump must be an object"
    path = dump.get("dump_path")
    if not isinstance(path, str) or not os.path.isdir(path):
        return "dump_path is required and must be an existing folder"
    items = dump.get("dump_list")
    if not isinstance(items, list) or not all(isinstance(i, dict) and i.get("model_name") for i in items):
        return "dump_list must list objects with a model_name"
    for key, allowed in (("dump_mode", DUMP_MODES), ("dump_data", DUMP_DATA), ("dump_op_switch", DUMP_OP_SWITCH)):
        if key in dump and dump[key] not in allowed:
            return f"{key} must be one of {', '.join(allowed)}"
    return None


def init(config_path: str | None = None) -> int:
    if S.initialized:
        return _done("init", [], rec.ACL_ERROR_REPEAT_INITIALIZE, "acl.init called twice")
    args = [] if config_path is None else [config_path]
    extra = {}
    if config_path:
        try:
            config = json.loads(Path(config_path).read_text())
        except (OSError, ValueError) as err:
            return _done("init", args, rec.ACL_ERROR_INVALID_PARAM, f"cannot read the config file: {err}")
        if "dump" in config:
            if (why := _dump_problem(config["dump"])) is not None:
                return _done("init", args, rec.ACL_ERROR_INVALID_PARAM, why)
            S.dump = config["dump"]
            extra["dump"] = config["dump"]
    S.initialized = True
    rec.record("acl", "init", args, rc=0, **extra)
    return 0


def finalize() -> int:
    if (bad := _needs_init("finalize", [])) is not None:
        return bad
    if S.prof_path is not None:
        return _done("finalize", [], rec.ACL_ERROR_PROFILING_FAILURE, "acl.prof.finalize must come before acl.finalize")
    S.initialized = False
    return _done("finalize", [], 0)


# ----- acl.rt -----------------------------------------------------------------------------------------
def _set_device(device_id: int) -> int:
    if (bad := _needs_init("rt.set_device", [device_id])) is not None:
        return bad
    if not isinstance(device_id, int) or not 0 <= device_id < rec.logical_count():
        return _done(
            "rt.set_device",
            [device_id],
            rec.ACL_ERROR_RT_INVALID_DEVICEID,
            f"logical device ids here are 0..{rec.logical_count() - 1}",
        )
    S.device = device_id
    return _done("rt.set_device", [device_id], 0)


def _reset_device(device_id: int) -> int:
    if device_id != S.device:
        return _done("rt.reset_device", [device_id], rec.ACL_ERROR_RT_INVALID_DEVICEID, "device was not set")
    S.device = None
    S.reset_while_profiling |= S.prof_path is not None
    return _done("rt.reset_device", [device_id], 0)


def _get_device_count() -> tuple[int, int]:
    rec.record("acl", "rt.get_device_count", [], rc=0)
    return rec.logical_count(), 0


def _create_context(device_id: int) -> tuple[int, int]:
    if device_id != S.device:
        return 0, _done("rt.create_context", [device_id], rec.ACL_ERROR_RT_INVALID_DEVICEID, "device was not set")
    return next(_ids), _done("rt.create_context", [device_id], 0)


def _destroy_context(context: int) -> int:
    return _done("rt.destroy_context", [], 0)


def _malloc(size: int, policy: int) -> tuple[int, int]:
    if S.device is None:
        return 0, _done("rt.malloc", [size, policy], rec.ACL_ERROR_RT_PARAM_INVALID, "no device set")
    ptr = next(_ids) << 20
    S.memory[ptr] = bytearray(size)
    return ptr, _done("rt.malloc", [size, policy], 0)


def _free(ptr: int) -> int:
    return _done("rt.free", [], 0 if S.memory.pop(ptr, None) is not None else rec.ACL_ERROR_RT_PARAM_INVALID)


def _malloc_host(size: int) -> tuple[int, int]:
    ptr = next(_ids) << 20
    S.memory[ptr] = bytearray(size)
    return ptr, _done("rt.malloc_host", [size], 0)


def _memcpy(dst: int, dst_max: int, src: int, count: int, kind: int) -> int:
    if dst not in S.memory or src not in S.memory or count > dst_max or count > len(S.memory[src]):
        return _done("rt.memcpy", [count, kind], rec.ACL_ERROR_RT_PARAM_INVALID, "unknown pointer or size")
    S.memory[dst][:count] = S.memory[src][:count]
    return _done("rt.memcpy", [count, kind], 0)


def _free_host(ptr: int) -> int:
    return _done("rt.free_host", [], 0 if S.memory.pop(ptr, None) is not None else rec.ACL_ERROR_RT_PARAM_INVALID)


rt = types.SimpleNamespace(
    set_device=_set_device,
    reset_device=_reset_device,
    get_device_count=_get_device_count,
    create_context=_create_context,
    destroy_context=_destroy_context,
    malloc=_malloc,
    free=_free,
    malloc_host=_malloc_host,
    free_host=_free_host,
    memcpy=_memcpy,
)


# ----- acl.util, data buffers -------------------------------------------------------------------------
def _bytes_to_ptr(data: bytes) -> int:
    ptr = next(_ids) << 20
    S.memory[ptr] = bytearray(data)
    return ptr


def _ptr_to_bytes(ptr: int, size: int) -> bytes:
    return bytes(S.memory[ptr][:size])


util = types.SimpleNamespace(bytes_to_ptr=_bytes_to_ptr, ptr_to_bytes=_ptr_to_bytes)


def create_data_buffer(ptr: int, size: int) -> int:
    if ptr not in S.memory:
        rec.record("acl", "create_data_buffer", [size], rc=0, refused="unknown pointer")
        return 0
    handle = next(_ids)
    S.buffers[handle] = (ptr, size)
    return handle


def destroy_data_buffer(handle: int) -> int:
    return 0 if S.buffers.pop(handle, None) else rec.ACL_ERROR_INVALID_PARAM


# ----- acl.mdl ----------------------------------------------------------------------------------------
def _load_from_file(path: str) -> tuple[int, int]:
    if (bad := _needs_init("mdl.load_from_file", [path])) is not None:
        return 0, bad
    if S.device is None:
        return 0, _done("mdl.load_from_file", [path], rec.ACL_ERROR_RT_PARAM_INVALID, "no device set")
    try:
        header = json.loads(Path(path).read_text())
        assert header.get("magic") == "NPU_DRYRUN_OM"
    except (OSError, ValueError, AssertionError):
        return 0, _done("mdl.load_from_file", [path], 145000, "not an offline model")  # ACL_ERROR_GE_PARAM_INVALID
    model_id = next(_ids)
    S.models[model_id] = header
    S.loaded_any = True
    return model_id, _done("mdl.load_from_file", [path], 0)


def _unload(model_id: int) -> int:
    return _done("mdl.unload", [], 0 if S.models.pop(model_id, None) else rec.ACL_ERROR_INVALID_PARAM)


def _create_desc() -> int:
    handle = next(_ids)
    S.descs[handle] = None
    return handle


def _destroy_desc(desc: int) -> int:
    return 0 if S.descs.pop(desc, 0) != 0 else rec.ACL_ERROR_INVALID_PARAM


def _get_desc(desc: int, model_id: int) -> int:
    if desc not in S.descs or model_id not in S.models:
        return _done("mdl.get_desc", [], rec.ACL_ERROR_INVALID_PARAM, "unknown desc or model")
    S.descs[desc] = model_id
    return _done("mdl.get_desc", [], 0)


def _io(desc: int, kind: str, index: int) -> dict | None:
    model = S.models.get(S.descs.get(desc) or -1)
    items = model[kind] if model else []
    return items[index] if 0 <= index < len(items) else None


def _nbytes(item: dict) -> int:
    import numpy as np

    return int(np.prod(item["dims"])) * np.dtype(item["dtype"]).itemsize


def _size(kind: str):
    def size_by_index(desc: int, index: int) -> int:
        item = _io(desc, kind, index)
        rec.record("acl", f"mdl.get_{kind[:-1]}_size_by_index", [index], rc=0 if item else rec.ACL_ERROR_INVALID_PARAM)
        return _nbytes(item) if item else 0

    return size_by_index


def _dims(kind: str):
    def dims_by_index(desc: int, index: int) -> tuple[dict, int]:
        item = _io(desc, kind, index)
        rc = 0 if item else rec.ACL_ERROR_INVALID_PARAM
        rec.record("acl", f"mdl.get_{kind[:-1]}_dims", [index], rc=rc)
        if not item:
            return {}, rc
        return {"name": item["name"], "dimCount": len(item["dims"]), "dims": list(item["dims"])}, 0

    return dims_by_index


_DTYPE_CODES = {"float32": 0, "float16": 1, "int8": 2, "uint8": 4}  # aclDataType


def _data_type(kind: str):
    def data_type_by_index(desc: int, index: int) -> int:
        item = _io(desc, kind, index)
        return _DTYPE_CODES.get(item["dtype"], -1) if item else -1

    return data_type_by_index


def _num(kind: str):
    def num(desc: int) -> int:
        model = S.models.get(S.descs.get(desc) or -1)
        return len(model[kind]) if model else 0

    return num


def _create_dataset() -> int:
    handle = next(_ids)
    S.datasets[handle] = []
    return handle


def _destroy_dataset(dataset: int) -> int:
    return 0 if S.datasets.pop(dataset, None) is not None else rec.ACL_ERROR_INVALID_PARAM


def _add_dataset_buffer(dataset: int, buffer: int) -> tuple[int, int]:
    if dataset not in S.datasets or buffer not in S.buffers:
        return dataset, rec.ACL_ERROR_INVALID_PARAM
    S.datasets[dataset].append(buffer)
    return dataset, 0


def _execute(model_id: int, inputs: int, outputs: int) -> int:
    model = S.models.get(model_id)
    if model is None or inputs not in S.datasets or outputs not in S.datasets:
        return _done("mdl.execute", [], rec.ACL_ERROR_INVALID_PARAM, "unknown model or dataset")
    try:
        _compute(model, inputs, outputs)
    except ImportError:  # no ONNX Runtime: the output buffer stays as it is
        pass
    dumped = _dump(model_id, model, inputs) if S.dump else None
    rec.record("acl", "mdl.execute", [], rc=0, **({"dumped": dumped} if dumped else {}))
    return 0


def _dump(model_id: int, model: dict, inputs: int) -> str | None:
    """Every node's output of one execute, as the dump lays it out (ACL-DUMP-DATA):
    ``{dump_path}/{time}/{device}/{model_name}/{model_id}/{data_index}/{op_type}.{op_name}.{task}.{stream}.{timestamp}``
    with ".", "/", "\\" and spaces in the names replaced by "_". The files hold .npy bytes: the stand-in's own
    format, which only the stand-in msaccucmp.py reads (the real dump is CANN's binary format)."""
    import re
    import time

    import numpy as np
    import onnx
    import onnxruntime as ort

    name = model["name"].removesuffix(".om")  # the model file's name without suffix (ACL-DUMP)
    if S.dump.get("dump_mode", "output") == "input" or name not in {i["model_name"] for i in S.dump["dump_list"]}:
        return None
    graph = onnx.load(model["onnx"])
    wanted = [o for node in graph.graph.node for o in node.output[:1] if o]
    graph.graph.output.extend(
        onnx.ValueInfoProto(name=o) for o in wanted if o not in {x.name for x in graph.graph.output}
    )
    session = ort.InferenceSession(graph.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {}
    for item, handle in zip(model["inputs"], S.datasets[inputs]):
        ptr, _ = S.buffers[handle]
        feeds[item["name"]] = (
            np.frombuffer(bytes(S.memory[ptr][: _nbytes(item)]), dtype=item["dtype"])
            .reshape(item["dims"])
            .astype(np.float32)
        )
    values = dict(zip(wanted, session.run(wanted, feeds)))
    index = S.dumped.get(model_id, 0)
    S.dumped[model_id] = index + 1
    # The folder carries the model's name: the .om's stem, or with NPU_DRYRUN_DUMP_FOLDER=internal the name the
    # model has inside the .om (the ONNX graph's), as some CANN versions may name it (docs/npu_reference.md).
    folder_name = model.get("graph_name", name) if os.environ.get("NPU_DRYRUN_DUMP_FOLDER") == "internal" else name
    folder = (
        Path(S.dump["dump_path"])
        / time.strftime("%Y%m%d%H%M%S")
        / str(S.device)
        / folder_name
        / str(model_id)
        / str(index)
    )
    folder.mkdir(parents=True, exist_ok=True)

    def clean(text: str) -> str:
        return re.sub(r"[./\\ ]", "_", text)

    for task, node in enumerate(graph.graph.node, start=1):
        if node.output[:1] and node.output[0] in values:
            stamp = int(time.time() * 1e6) + task
            with (folder / f"{clean(node.op_type)}.{clean(node.name or node.output[0])}.{task}.0.{stamp}").open(
                "wb"
            ) as f:
                np.save(f, values[node.output[0]])
    return str(folder)


def _compute(model: dict, inputs: int, outputs: int) -> None:
    import numpy as np
    import onnxruntime as ort

    session = model.get("_session")
    if session is None:
        session = model["_session"] = ort.InferenceSession(model["onnx"], providers=["CPUExecutionProvider"])
    feeds = {}
    for item, handle in zip(model["inputs"], S.datasets[inputs]):
        ptr, size = S.buffers[handle]
        raw = np.frombuffer(bytes(S.memory[ptr][: _nbytes(item)]), dtype=item["dtype"]).reshape(item["dims"])
        feeds[item["name"]] = raw.astype(np.float32)
    results = session.run(None, feeds)
    for item, handle, value in zip(model["outputs"], S.datasets[outputs], results):
        ptr, size = S.buffers[handle]
        data = np.ascontiguousarray(value.astype(item["dtype"])).tobytes()
        S.memory[ptr][: min(size, len(data))] = data[:size]


mdl = types.SimpleNamespace(
    load_from_file=_load_from_file,
    unload=_unload,
    create_desc=_create_desc,
    destroy_desc=_destroy_desc,
    get_desc=_get_desc,
    get_num_inputs=_num("inputs"),
    get_num_outputs=_num("outputs"),
    get_input_size_by_index=_size("inputs"),
    get_output_size_by_index=_size("outputs"),
    get_input_dims=_dims("inputs"),
    get_output_dims=_dims("outputs"),
    get_input_data_type=_data_type("inputs"),
    get_output_data_type=_data_type("outputs"),
    create_dataset=_create_dataset,
    destroy_dataset=_destroy_dataset,
    add_dataset_buffer=_add_dataset_buffer,
    execute=_execute,
)


# ----- acl.prof ---------------------------------------------------------------------------------------
def _prof_init(path: str) -> int:
    if (bad := _needs_init("prof.init", [path])) is not None:
        return bad
    if S.prof_path is not None:
        return _done("prof.init", [path], rec.ACL_ERROR_PROFILING_FAILURE, "acl.prof.init called twice")
    if S.loaded_any:
        return _done(
            "prof.init",
            [path],
            rec.ACL_ERROR_PROFILING_FAILURE,
            "acl.prof.init must come after acl.init and before any model is loaded",
        )
    if not os.path.isabs(path) or not os.path.isdir(path):
        return _done(
            "prof.init", [path], rec.ACL_ERROR_INVALID_PARAM, "the result path must be an existing absolute path"
        )
    S.prof_path = path
    return _done("prof.init", [path], 0)


def _prof_create_config(devices: list, aicore_metrics: int, events, data_types: int) -> int:
    args = [list(devices), aicore_metrics, events, data_types]
    bad = (
        (S.prof_path is None and "before acl.prof.init")
        or (not all(isinstance(d, int) and 0 <= d < rec.logical_count() for d in devices) and "invalid device id")
        or (aicore_metrics not in (0, 1, 2, 3, 4, 5, 6, 8, 0xFF) and "unknown aclprofAicoreMetrics")
    )
    if bad:
        rec.record("acl", "prof.create_config", args, rc=0, refused=bad, handle=0)
        return 0
    handle = next(_ids)
    S.prof_configs[handle] = list(devices)
    rec.record("acl", "prof.create_config", args, rc=0, handle=handle)
    return handle


def _prof_start(config: int) -> int:
    if S.prof_path is None:
        return _done("prof.start", [], rec.ACL_ERROR_PROFILING_FAILURE, "acl.prof.start before acl.prof.init")
    if config not in S.prof_configs:
        return _done("prof.start", [], rec.ACL_ERROR_INVALID_PARAM, "unknown profiling config")
    S.prof_started.add(config)
    S.prof_devices.update(S.prof_configs[config])
    return _done("prof.start", [], 0)


def _prof_stop(config: int) -> int:
    if config not in S.prof_started:
        return _done("prof.stop", [], rec.ACL_ERROR_PROFILING_FAILURE, "acl.prof.stop without acl.prof.start")
    S.prof_started.discard(config)
    return _done("prof.stop", [], 0)


def _prof_destroy_config(config: int) -> int:
    if config in S.prof_started:
        return _done("prof.destroy_config", [], rec.ACL_ERROR_PROFILING_FAILURE, "config still started")
    return _done(
        "prof.destroy_config", [], 0 if S.prof_configs.pop(config, None) is not None else rec.ACL_ERROR_INVALID_PARAM
    )


def _prof_finalize() -> int:
    if S.prof_path is None:
        return _done("prof.finalize", [], rec.ACL_ERROR_PROFILING_FAILURE, "acl.prof.finalize without acl.prof.init")
    if S.prof_started or S.prof_configs:
        return _done("prof.finalize", [], rec.ACL_ERROR_PROFILING_FAILURE, "stop and destroy_config come first")
    if S.reset_while_profiling:
        return _done(
            "prof.finalize",
            [],
            rec.ACL_ERROR_PROFILING_FAILURE,
            "acl.prof.finalize must come before the runtime resources are released (acl.rt.reset_device)",
        )
    replay.write_raw_prof(Path(S.prof_path), sorted(S.prof_devices))  # raw data only: msprof --export parses it
    S.prof_path = None
    return _done("prof.finalize", [], 0)


prof = types.SimpleNamespace(
    init=_prof_init,
    create_config=_prof_create_config,
    start=_prof_start,
    stop=_prof_stop,
    destroy_config=_prof_destroy_config,
    finalize=_prof_finalize,
)

__all__ = ["create_data_buffer", "destroy_data_buffer", "finalize", "init", "mdl", "prof", "rt", "util"]
