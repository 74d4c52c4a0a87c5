"""The portable backend: a variant run under ONNX Runtime's profiler, written as msprof's files.

ORT records everything from session start: initialization, every warm-up run, every measured
run. Each ``model_run`` event spans one ``InferenceSession.run``; each node event
(``cat == "Node"``, name ``<node>_kernel_time``) lies inside exactly one of them. Numbering the
runs by start time and keeping only the node events of the measured runs is what excludes the
warm-up: it is a filter by run, not a guess by count.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from variants import BUILD, MEASURED, WARMUP, ModelFiles, Variant, check_feed

from common.collect import msprof_layout
from common.errors import LabError
from common.formats import writers
from common.formats.records import Task

KERNEL_SUFFIX = "_kernel_time"
TASK_TYPE = "CPU"  # the portable backend's core type, never an NPU core name
DEVICE_ID = "host"

_ORT_TYPES = {"tensor(float)": "float32", "tensor(float16)": "float16", "tensor(double)": "float64",
              "tensor(int64)": "int64", "tensor(int32)": "int32", "tensor(int8)": "int8", "tensor(uint8)": "uint8",
              "tensor(bool)": "bool"}
# ORT's tensor type names -> the upper-case names msprof prints in "Input Data Types".
_DTYPE_NAMES = {"float": "FLOAT", "float16": "FLOAT16", "double": "DOUBLE", "int64": "INT64", "int32": "INT32"}


@dataclass(frozen=True)
class Run:
    index: int  # 0-based, in start order
    start_us: float  # relative to profiling start, as ORT writes it
    end_us: float


@dataclass
class Profile:
    runs: list[Run]
    node_events: list[dict]  # every kernel event, all runs


def load_profile(path: Path) -> Profile:
    """Read an ORT profile file into its runs and kernel events."""
    try:
        events = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise LabError(f"{path}: cannot read the ONNX Runtime profile ({err})", "re-run the mode") from None
    runs = sorted(
        (e for e in events if e.get("name") == "model_run" and e.get("ph") == "X"),
        key=lambda e: e["ts"],
    )
    nodes = [e for e in events if e.get("cat") == "Node" and str(e.get("name", "")).endswith(KERNEL_SUFFIX)]
    return Profile([Run(i, float(e["ts"]), float(e["ts"]) + float(e["dur"])) for i, e in enumerate(runs)], nodes)


def run_of(event: dict, runs: list[Run]) -> int | None:
    """The run whose span contains the event, or None (e.g. work done at session start)."""
    ts = float(event["ts"])
    for run in runs:
        if run.start_us <= ts <= run.end_us:
            return run.index
    return None


def measured_events(profile: Profile, warmup: int, measured: int) -> list[dict]:
    """Kernel events of runs ``warmup .. warmup+measured-1``; warm-up runs and anything outside a run are dropped."""
    if len(profile.runs) != warmup + measured:
        raise LabError(
            f"the profile holds {len(profile.runs)} runs, expected {warmup} warm-up + {measured} measured",
            "re-run the mode; the profile is incomplete",
        )
    keep = range(warmup, warmup + measured)
    return [e for e in profile.node_events if run_of(e, profile.runs) in keep]


def _shapes(entries: list[dict]) -> tuple[str | None, str | None]:
    """ORT's ``[{"float": [32, 1024]}, ...]`` -> msprof's ``32,1024;...`` and ``FLOAT;...``."""
    if not entries:
        return None, None
    shapes, dtypes = [], []
    for entry in entries:
        ((dtype, dims),) = entry.items()
        shapes.append(",".join(str(d) for d in dims))
        dtypes.append(_DTYPE_NAMES.get(dtype, dtype.upper()))
    return ";".join(shapes), ";".join(dtypes)


def to_tasks(events: list[dict], start_ns: int) -> list[Task]:
    """One op_summary task per kernel event; ``start_ns`` (ORT's profiling start) makes times absolute µs."""
    tasks = []
    for event in events:
        args = event.get("args", {})
        in_shapes, in_types = _shapes(args.get("input_type_shape", []))
        out_shapes, out_types = _shapes(args.get("output_type_shape", []))
        tasks.append(
            Task(
                op_name=event["name"][: -len(KERNEL_SUFFIX)],
                op_type=args.get("op_name", "N/A"),
                task_type=TASK_TYPE,
                start_us=start_ns / 1000.0 + float(event["ts"]),
                duration_us=float(event["dur"]),
                device_id=DEVICE_ID,
                input_shapes=in_shapes,
                input_dtypes=in_types,
                output_shapes=out_shapes,
                output_dtypes=out_types,
            )
        )
    return tasks


# ----- the profiled run: a session on the built file, its profile written in msprof's layout -----
def open_session(path: Path, files: ModelFiles, profile_prefix: Path | None = None, threads: int | None = None):
    """An ORT session on an already-optimized model file of ``files``' workload, run as saved
    (on ``threads`` intra-op threads, as --threads sets torch's in the other modes; None: ORT's default).
    The file was checked before (infer.validate: the build's record, or loaded and checked)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    # The file was optimized offline by build_model.py: run it as saved, so the ops ORT executes
    # are exactly the nodes we count in the file.
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    if threads:
        options.intra_op_num_threads = threads
    if profile_prefix is not None:
        options.enable_profiling = True
        options.profile_file_prefix = str(profile_prefix)
    try:
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as err:  # ORT raises its own exception types for unloadable graphs
        raise LabError(f"ONNX Runtime cannot load {path}: {str(err).splitlines()[0]}", f"rebuild: {BUILD}") from None


def validate_portable(variant: Variant, files: ModelFiles) -> None:
    """Before anything is written: the model exists, loads, and takes this variant's inputs, every one."""
    path = files.portable_path(variant)
    session = open_session(path, files)
    for inp, feed in zip(session.get_inputs(), files.feeds(variant), strict=True):
        check_feed(feed, inp.shape, _ORT_TYPES.get(inp.type, inp.type), f"{path.name} input {inp.name}")


def collect_portable(variant: Variant, files: ModelFiles, variant_dir: Path,
                     threads: int | None = None) -> tuple[dict[str, Path], list[np.ndarray], Path, str, bool]:
    """Run the variant under ORT's profiler (every input fed, every output kept) and write msprof-schema files
    of the measured runs."""
    path = files.portable_path(variant)
    session = open_session(path, files, variant_dir / "onnxruntime_profile", threads)
    feeds = dict(zip(files.input_names, files.feeds(variant), strict=True))
    try:
        for _ in range(WARMUP + MEASURED):
            outputs = session.run(None, feeds)
    except Exception as err:
        raise LabError(f"ONNX Runtime failed to run {path}: {str(err).splitlines()[0]}", f"rebuild: {BUILD}") from None
    raw = Path(session.end_profiling()).rename(variant_dir / "onnxruntime_profile.json")
    profile = load_profile(raw)
    events = measured_events(profile, WARMUP, MEASURED)  # warm-up runs are filtered out here, by run
    tasks = writers.with_wait_times(to_tasks(events, session.get_profiling_start_time_ns()))

    prof = msprof_layout.new_prof_dir(variant_dir)
    files_written = {
        "op_summary": writers.write_op_summary(prof.file("op_summary"), tasks),
        "op_statistic": writers.write_op_statistic(prof.file("op_statistic"), writers.aggregate_op_statistic(tasks)),
        "timeline": writers.write_trace(
            prof.file("msprof", "json"), writers.timeline_events(tasks, os.getpid(), "CPU (ONNX Runtime)")
        ),
    }
    window = f"{len(profile.runs)} runs recorded, the first {WARMUP} excluded by run, {MEASURED} measured"
    return files_written, list(outputs), raw, window, len(profile.runs) == WARMUP + MEASURED
