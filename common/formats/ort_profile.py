"""ONNX Runtime's profile, read: its runs and kernel events, the measured runs' events, and each as a task in
msprof's op_summary terms.

ORT records everything from session start: initialization, every warm-up run, every measured
run. Each ``model_run`` event spans one ``InferenceSession.run``; each node event
(``cat == "Node"``, name ``<node>_kernel_time``) lies inside exactly one of them. Numbering the
runs by start time and keeping only the node events of the measured runs is what excludes the
warm-up: it is a filter by run, not a guess by count.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from common.errors import LabError
from common.formats.records import Task

KERNEL_SUFFIX = "_kernel_time"
TASK_TYPE = "CPU"  # the portable backend's core type, never an NPU core name
DEVICE_ID = "host"

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
    runs = sorted((e for e in events if e.get("name") == "model_run" and e.get("ph") == "X"), key=lambda e: e["ts"])
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
