"""The portable backend: the lesson infer.py runs a variant under ONNX Runtime's profiler; its profile
(read by :mod:`common.formats.ort_profile`, which cuts the warm-up runs out by run) written as msprof's files.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from common.collect import launcher, msprof_layout
from common.errors import LabError
from common.formats import writers
from common.formats.ort_profile import load_profile, measured_events, run_of, to_tasks
from common.formats.records import Task
from common.modes.pyacl.acl_worker import LESSON, lesson_argv, read_outputs, save_inputs
from common.modes.pyacl.variants import BUILD, MEASURED, WARMUP, ModelFiles, Variant, check_feed

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
