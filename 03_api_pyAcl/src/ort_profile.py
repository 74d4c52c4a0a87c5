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
from build_model import load_onnx
from variants import INPUT_NAME, MEASURED, WARMUP, Variant, check_feed, make_feed

from common.collect import msprof_layout
from common.errors import LabError
from common.formats import writers
from common.formats.records import Task

KERNEL_SUFFIX = "_kernel_time"
TASK_TYPE = "CPU"  # the portable backend's core type, never an NPU core name
DEVICE_ID = "host"

_ORT_TYPES = {"tensor(float)": "float32", "tensor(float16)": "float16"}
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
def open_session(path: Path, profile_prefix: Path | None = None):
    """An ORT session on an already-optimized model file, run as saved."""
    import onnxruntime as ort

    load_onnx(path)  # missing / corrupt / wrong-shape files stop here with one clear line
    options = ort.SessionOptions()
    # The file was optimized offline by build_model.py: run it as saved, so the ops ORT executes
    # are exactly the nodes we count in the file.
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    if profile_prefix is not None:
        options.enable_profiling = True
        options.profile_file_prefix = str(profile_prefix)
    try:
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as err:  # ORT raises its own exception types for unloadable graphs
        raise LabError(
            f"ONNX Runtime cannot load {path}: {str(err).splitlines()[0]}", "rebuild: bash 03_api_pyAcl/build_model.sh"
        ) from None


def validate_portable(variant: Variant) -> None:
    """Before anything is written: the model exists, loads, and takes this variant's input."""
    path = variant.portable_path()
    session = open_session(path)
    inp = session.get_inputs()[0]
    check_feed(make_feed(variant), inp.shape, _ORT_TYPES.get(inp.type, inp.type), f"{path.name} input {inp.name}")


def collect_portable(variant: Variant, variant_dir: Path) -> tuple[dict[str, Path], np.ndarray, Path, str, bool]:
    """Run the variant under ORT's profiler and write msprof-schema files of the measured runs."""
    session = open_session(variant.portable_path(), variant_dir / "onnxruntime_profile")
    feed = make_feed(variant)
    try:
        for _ in range(WARMUP + MEASURED):
            output = session.run(None, {INPUT_NAME: feed})[0]
    except Exception as err:
        raise LabError(f"ONNX Runtime failed to run {variant.portable_path()}: {str(err).splitlines()[0]}") from None
    raw = Path(session.end_profiling()).rename(variant_dir / "onnxruntime_profile.json")
    profile = load_profile(raw)
    events = measured_events(profile, WARMUP, MEASURED)  # warm-up runs are filtered out here, by run
    tasks = writers.with_wait_times(to_tasks(events, session.get_profiling_start_time_ns()))

    prof = msprof_layout.new_prof_dir(variant_dir)
    files = {
        "op_summary": writers.write_op_summary(prof.file("op_summary"), tasks),
        "op_statistic": writers.write_op_statistic(prof.file("op_statistic"), writers.aggregate_op_statistic(tasks)),
        "timeline": writers.write_trace(
            prof.file("msprof", "json"), writers.timeline_events(tasks, os.getpid(), "CPU (ONNX Runtime)")
        ),
    }
    window = f"{len(profile.runs)} runs recorded, the first {WARMUP} excluded by run, {MEASURED} measured"
    return files, output, raw, window, len(profile.runs) == WARMUP + MEASURED
