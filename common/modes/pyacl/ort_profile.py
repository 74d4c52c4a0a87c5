"""The portable backend: the lesson infer.py runs a variant under ONNX Runtime's profiler; its profile,
written as msprof's files.

ORT records everything from session start: initialization, every warm-up run, every measured
run. Each ``model_run`` event spans one ``InferenceSession.run``; each node event
(``cat == "Node"``, name ``<node>_kernel_time``) lies inside exactly one of them. Numbering the
runs by start time and keeping only the node events of the measured runs is what excludes the
warm-up: it is a filter by run, not a guess by count.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from common.collect import launcher, msprof_layout
from common.errors import LabError
from common.formats import writers
from common.formats.records import Task
from common.modes.pyacl.acl_worker import LESSON, lesson_argv, read_outputs, save_inputs
from common.modes.pyacl.variants import BUILD, MEASURED, WARMUP, ModelFiles, Variant, check_feed

KERNEL_SUFFIX = "_kernel_time"
TASK_TYPE = "CPU"  # the portable backend's core type, never an NPU core name
DEVICE_ID = "host"

_ORT_TYPES = {
    "tensor(float)": "float32",
    "tensor(float16)": "float16",
    "tensor(double)": "float64",
    "tensor(int64)": "int64",
    "tensor(int32)": "int32",
    "tensor(int8)": "int8",
    "tensor(uint8)": "uint8",
    "tensor(bool)": "bool",
}
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


# ----- the profiled run: the lesson on the built file, its profile written in msprof's layout -----
# What the lesson prints once its session ended: "ONNX Runtime profile: <file> (ts: us after <ns> ns)".
PROFILE_LINE = re.compile(r"^ONNX Runtime profile: (?P<file>.+) \(ts: us after (?P<start_ns>[0-9]+) ns\)$", re.M)


def open_session(path: Path):
    """An ORT session on an already-optimized model file, run as saved (as the lesson runs it), to check it
    before anything is written; the file was checked before (run.validate: the build's record, or loaded)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    try:
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as err:  # ORT raises its own exception types for unloadable graphs
        raise LabError(f"ONNX Runtime cannot load {path}: {str(err).splitlines()[0]}", f"rebuild: {BUILD}") from None


def run_lesson(argv: list[str], path: Path) -> str:
    """Run the lesson (stdout and stderr kept back); its stdout, or its one ``Error:`` line as a LabError."""
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "stderr.txt"
        run = launcher.run_command(argv, dict(os.environ), capture=True, stderr=log)
        said = [line for line in log.read_text(errors="replace").splitlines() if line.startswith("Error: ")]
    run.raise_if_stopped()
    if not run.ok:
        why = said[-1].removeprefix("Error: ") if said else f"{LESSON.name} {run.describe}"
        raise LabError(f"ONNX Runtime failed to run {path}: {why}", f"rebuild: {BUILD}")
    return run.output


def validate_portable(variant: Variant, files: ModelFiles) -> None:
    """Before anything is written: the model exists, loads, and takes this variant's inputs, every one."""
    path = files.portable_path(variant)
    session = open_session(path)
    for inp, feed in zip(session.get_inputs(), files.feeds(variant), strict=True):
        check_feed(feed, inp.shape, _ORT_TYPES.get(inp.type, inp.type), f"{path.name} input {inp.name}")


@dataclass(frozen=True)
class PortableRun:
    """One variant run under ONNX Runtime's profiler: msprof's files written from it, the outputs, the profile as
    ONNX Runtime wrote it, and how the measured window was cut (in words, and whether it held every run)."""

    files: dict[str, Path]
    outputs: list[np.ndarray]
    raw_profile: Path
    window: str
    window_ok: bool


def collect_portable(variant: Variant, files: ModelFiles, variant_dir: Path, threads: int | None = None) -> PortableRun:
    """Run the lesson on the variant's model under ORT's profiler (every input fed, every output kept) and write
    msprof-schema files of the measured runs."""
    path = files.portable_path(variant)
    inputs = save_inputs(variant_dir / "inputs.npz", files.feeds(variant))
    output_npy = variant_dir / "output.npy"
    said = run_lesson(
        lesson_argv(path, inputs, output_npy, out=variant_dir, extra=("--threads", str(threads)) if threads else ()),
        path,
    )
    found = PROFILE_LINE.search(said)
    if found is None or not Path(found["file"]).is_file():
        raise LabError(
            f"{LESSON.name} named no ONNX Runtime profile for {path} (it printed {said.strip()[-200:]!r})",
            "re-run the mode",
        )
    raw = Path(found["file"]).rename(variant_dir / "onnxruntime_profile.json")
    outputs = read_outputs(variant, path, output_npy, len(files.output_names))
    profile = load_profile(raw)
    events = measured_events(profile, WARMUP, MEASURED)  # warm-up runs are filtered out here, by run
    files_written = write_msprof_files(variant_dir, to_tasks(events, int(found["start_ns"])))
    window = f"{len(profile.runs)} runs recorded, the first {WARMUP} excluded by run, {MEASURED} measured"
    return PortableRun(files_written, outputs, raw, window, len(profile.runs) == WARMUP + MEASURED)


def write_msprof_files(parent: Path, tasks: list[Task]) -> dict[str, Path]:
    """The kernel events' tasks as msprof writes them: a fresh ``PROF_*`` under ``parent`` with op_summary,
    op_statistic and the timeline."""
    tasks = writers.with_wait_times(tasks)
    prof = msprof_layout.new_prof_dir(parent)
    return {
        "op_summary": writers.write_op_summary(prof.file("op_summary"), tasks),
        "op_statistic": writers.write_op_statistic(prof.file("op_statistic"), writers.aggregate_op_statistic(tasks)),
        "timeline": writers.write_trace(
            prof.file("msprof", "json"), writers.timeline_events(tasks, os.getpid(), "CPU (ONNX Runtime)")
        ),
    }


def convert_profile(path: Path, into: Path) -> str:
    """An ONNX Runtime profile made outside the lab (the copied 03 lesson's ``onnxruntime_profile_*.json``, any
    session with ``enable_profiling``) -> msprof's files under ``into``, as the mode writes its own. The file does
    not mark its warm-up runs: the first run (it pays the one-off costs) is left out, every later one is read.
    Returns a line saying so."""
    profile = load_profile(path)
    if not profile.runs:
        raise LabError(
            f"{path}: an ONNX Runtime profile with no model_run event (no InferenceSession.run)",
            "profile a session that ran the model at least twice",
        )
    skip = 1 if len(profile.runs) > 1 else 0
    events = [e for e in profile.node_events if (run := run_of(e, profile.runs)) is not None and run >= skip]
    write_msprof_files(into, to_tasks(events, 0))
    return (
        f"{len(profile.runs)} runs recorded, "
        + ("the first left out as a warm-up, " if skip else "")
        + f"{len(profile.runs) - skip} read (per-op times are summed over them)"
    )
