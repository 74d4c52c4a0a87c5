"""Run an offline model under a profiler: pyACL on an Ascend NPU, ONNX Runtime on any machine.

What you will do: execute a model 3 times to warm up, then 20 times profiled, and keep what the profiler wrote:
    python infer.py --om model.om --device 0   # NPU (model.om: see export_onnx.py): acl.prof's prof_out/PROF_*
    python infer.py --onnx model.onnx          # any machine: ONNX Runtime's prof_out/onnxruntime_profile_*.json
What you will learn:
- the pyACL chain in CANN's order, acl.prof inside it: init, device, context, prof.init, load, warm-up, prof
  start, measured executes, prof stop, unload, prof.finalize, release: every return code checked;
- why warm-up executes stay out of the profile: the first ones pay one-off costs (memory, caches).
"""

import argparse
import contextlib
import sys
from pathlib import Path

import numpy as np

ACL_DTYPES = {
    0: np.float32,
    1: np.float16,
    2: np.int8,
    3: np.int32,
    4: np.uint8,
    6: np.int16,
    7: np.uint16,
    8: np.uint32,
    9: np.int64,
    10: np.uint64,
    11: np.float64,
    12: np.bool_,
}  # aclDataType -> numpy
HUGE_FIRST, HOST_TO_DEVICE, DEVICE_TO_HOST = 0, 1, 2  # aclrtMemMallocPolicy, aclrtMemcpyKind
PIPE_UTILIZATION, PROF_FLAGS = 1, 0x1 | 0x2 | 0x4 | 0x8  # aclprof: PipeUtilization, ACL_API|TASK_TIME|AICORE|AICPU
# The fix for an unfused graph (MatMul then Add as two nodes, the GELU formula as five): let ONNX Runtime fuse
# them (Gemm, FusedMatMul, Gelu) with "all" (--graph-optimization all). "disabled" runs the file's nodes as
# built, as an .om runs what ATC built: keep it to profile what a converter made. (On an NPU ATC fuses at build.)
GRAPH_OPTIMIZATION = "disabled"


def check(call, ret):  # every pyACL call returns 0 (ACL_SUCCESS) or an aclError code: name the call and the code
    if ret != 0:
        raise RuntimeError(f"{call} failed with ACL error {ret}")


def handle(call, value):  # a call that creates something returns a handle, 0 / None when it failed
    return value or check(call, "(a null handle)")


def release(undo, call, fn, *args):  # registered once acquired: ``undo`` runs them last first, on every path
    undo.callback(lambda: check(call, fn(*args) or 0))  # a release that returns nothing counts as done


def device_dataset(acl, undo, sizes):  # device memory per size, each in a data buffer, all in one dataset
    dataset, pointers = handle("acl.mdl.create_dataset", acl.mdl.create_dataset()), []
    release(undo, "acl.mdl.destroy_dataset", acl.mdl.destroy_dataset, dataset)  # its buffers stay: each their own
    for size in sizes:
        ptr, ret = acl.rt.malloc(size, HUGE_FIRST)
        check("acl.rt.malloc", ret)
        release(undo, "acl.rt.free", acl.rt.free, ptr)
        buffer = handle("acl.create_data_buffer", acl.create_data_buffer(ptr, size))
        release(undo, "acl.destroy_data_buffer", acl.destroy_data_buffer, buffer)
        check("acl.mdl.add_dataset_buffer", acl.mdl.add_dataset_buffer(dataset, buffer)[1])
        pointers.append(ptr)
    return dataset, pointers


# --- 1. the pyACL chain (an NPU) -----------------------------------------------------------------
def run_om(acl, om, device, feeds, warmup, measured, prof_dir=None, acl_config=None):
    """Execute ``om`` on logical device ``device`` (``feeds``: an array per input; None: zeros); its outputs."""
    with contextlib.ExitStack() as undo:
        check("acl.init", acl.init(str(acl_config)) if acl_config else acl.init())  # a JSON config: e.g. a dump
        release(undo, "acl.finalize", acl.finalize)
        check("acl.rt.set_device", acl.rt.set_device(device))  # the program selects its device; msprof follows
        release(undo, "acl.rt.reset_device", acl.rt.reset_device, device)
        context, ret = acl.rt.create_context(device)
        check("acl.rt.create_context", ret)
        release(undo, "acl.rt.destroy_context", acl.rt.destroy_context, context)
        if prof_dir:  # after the context, before the load: so prof.finalize comes after the unload
            check("acl.prof.init", acl.prof.init(str(prof_dir)))
            release(undo, "acl.prof.finalize", acl.prof.finalize)
        model_id, ret = acl.mdl.load_from_file(str(om))
        check(f"acl.mdl.load_from_file({om})", ret)
        release(undo, "acl.mdl.unload", acl.mdl.unload, model_id)
        desc = handle("acl.mdl.create_desc", acl.mdl.create_desc())  # the model's IO: ATC fixed every size
        release(undo, "acl.mdl.destroy_desc", acl.mdl.destroy_desc, desc)
        check("acl.mdl.get_desc", acl.mdl.get_desc(desc, model_id))
        sizes = [acl.mdl.get_input_size_by_index(desc, i) for i in range(acl.mdl.get_num_inputs(desc))]
        feeds = [np.zeros(size, np.uint8) for size in sizes] if feeds is None else feeds
        if sizes != [feed.nbytes for feed in feeds]:
            raise RuntimeError(f"{om} takes inputs of {sizes} bytes, the inputs given have {[f.nbytes for f in feeds]}")
        outputs = []  # (bytes, dims, dtype) per output
        for i in range(acl.mdl.get_num_outputs(desc)):
            dims, ret = acl.mdl.get_output_dims(desc, i)
            check(f"acl.mdl.get_output_dims({i})", ret)
            code, size = acl.mdl.get_output_data_type(desc, i), acl.mdl.get_output_size_by_index(desc, i)
            if code not in ACL_DTYPES or size <= 0 or np.prod(dims["dims"]) * ACL_DTYPES[code]().itemsize != size:
                raise RuntimeError(f"{om}: output {i} has dims {dims['dims']}, aclDataType {code}, {size} bytes")
            outputs.append((size, tuple(dims["dims"]), ACL_DTYPES[code]))
        inputs, in_ptrs = device_dataset(acl, undo, sizes)
        results, out_ptrs = device_dataset(acl, undo, [size for size, _, _ in outputs])
        for ptr, feed in zip(in_ptrs, feeds):
            raw = np.ascontiguousarray(feed).tobytes()  # kept until the (synchronous) copy returns
            check("acl.rt.memcpy", acl.rt.memcpy(ptr, len(raw), acl.util.bytes_to_ptr(raw), len(raw), HOST_TO_DEVICE))
        with contextlib.ExitStack() as measuring:  # prof.stop, destroy_config: right after the last execute
            for n in range(warmup + measured):
                if n == warmup and prof_dir:  # after the warm-up executes: only the measured ones are recorded
                    config = acl.prof.create_config([device], PIPE_UTILIZATION, 0, PROF_FLAGS)  # 0: no AIC events
                    config = handle("acl.prof.create_config", config)
                    release(measuring, "acl.prof.destroy_config", acl.prof.destroy_config, config)
                    check("acl.prof.start", acl.prof.start(config))
                    release(measuring, "acl.prof.stop", acl.prof.stop, config)
                check("acl.mdl.execute", acl.mdl.execute(model_id, inputs, results))
        arrays = []  # each output copied back: host memory, device -> host, as numpy
        for (size, dims, dtype), ptr in zip(outputs, out_ptrs):
            host, ret = acl.rt.malloc_host(size)
            check("acl.rt.malloc_host", ret)
            release(undo, "acl.rt.free_host", acl.rt.free_host, host)
            check("acl.rt.memcpy(device->host)", acl.rt.memcpy(host, size, ptr, size, DEVICE_TO_HOST))
            arrays.append(np.frombuffer(acl.util.ptr_to_bytes(host, size), dtype).reshape(dims).copy())
        return arrays


# --- 2. ONNX Runtime with its profiler (any machine) -----------------------------------------------
def run_onnx(path, feeds, warmup, measured, out, threads=0, optimization=GRAPH_OPTIMIZATION):
    """Its profile starts with the session, warm-up included: one ``model_run`` event spans each run."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.enable_profiling, options.profile_file_prefix = True, str(Path(out) / "onnxruntime_profile")
    levels = {"disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL, "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}
    options.graph_optimization_level = levels[optimization]
    options.intra_op_num_threads = threads  # 0: ONNX Runtime's default
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    inputs, types = session.get_inputs(), {"tensor(float)": np.float32, "tensor(float16)": np.float16}
    feeds = feeds or [np.zeros(i.shape, types.get(i.type, np.int64)) for i in inputs]  # none given: zeros
    for _ in range(warmup + measured):
        outputs = session.run(None, dict(zip([i.name for i in inputs], feeds)))
    print(f"ONNX Runtime profile: {session.end_profiling()} (ts: us after {session.get_profiling_start_time_ns()} ns)")
    return outputs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    model = parser.add_mutually_exclusive_group(required=True)
    model.add_argument("--om", type=Path, help="an offline model ATC built: pyACL on an Ascend NPU")
    model.add_argument("--onnx", type=Path, help="an ONNX file: ONNX Runtime, on any machine")
    parser.add_argument("--device", type=int, default=0, help="logical NPU id (acl.rt.set_device)")
    parser.add_argument("--out", type=Path, default=Path("prof_out"), help="where the profiler writes")
    parser.add_argument("--inputs", type=Path, help=".npz of the arrays to feed, in input order (default: zeros)")
    parser.add_argument("--save-output", type=Path, help="output 0 to this .npy, output i to <name>_i.npy")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--measured", type=int, default=20)
    parser.add_argument("--no-acl-prof", action="store_true", help="no acl.prof: msprof wraps this program")
    parser.add_argument("--acl-config", type=Path, help="a JSON file for acl.init (e.g. a dump block)")
    parser.add_argument("--threads", type=int, default=0, help="ONNX Runtime's intra-op threads (0: its default)")
    parser.add_argument(
        "--graph-optimization",
        default=GRAPH_OPTIMIZATION,
        choices=["disabled", "all"],
        help="ONNX Runtime: run the file's nodes as built, or fuse them first (the fix)",
    )
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        feeds = list(np.load(args.inputs).values()) if args.inputs else None  # arr_0, arr_1 ...: input order
        if args.om:
            import acl  # pyACL ships with CANN: its set_env.sh puts it on PYTHONPATH

            prof_dir = None if args.no_acl_prof else args.out.resolve()
            outputs = run_om(acl, args.om, args.device, feeds, args.warmup, args.measured, prof_dir, args.acl_config)
        else:
            outputs = run_onnx(
                args.onnx, feeds, args.warmup, args.measured, args.out, args.threads, args.graph_optimization
            )
    except Exception as err:  # noqa: BLE001 (a failed call, a file the runtime refuses: one line, no traceback)
        sys.exit(f"Error: {err}")
    if args.om and not args.no_acl_prof:  # acl.prof writes raw data only: msprof (CANN's) exports the CSVs
        for prof in sorted(args.out.glob("PROF_*")):
            print(f"raw profile in {prof}: its CSVs with  msprof --export=on --output={prof}")
    for i, out in enumerate(outputs if args.save_output else []):
        np.save(args.save_output.with_name(f"{args.save_output.stem}_{i}.npy") if i else args.save_output, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
