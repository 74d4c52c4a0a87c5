"""What a lesson copied alone writes off the NPU, read as a capture: the commands' inputs.

A copied lesson (or any user's script) writes its profiler's own file, not the lab's layout:
- torch.profiler's ``*.pt.trace.json`` (04's lesson, any PyTorch user's ``tensorboard_trace_handler``);
  several, one per rank, from the DDP lesson or any torch.distributed job (each trace's
  ``distributedInfo`` names its rank);
- ONNX Runtime's ``onnxruntime_profile_*.json`` (03's lesson on any machine);
- the kernel twin's timings CSV (02's lesson with ``$ASCENDC_TWIN_TIMINGS`` set).
:func:`readable` converts it, with the conversion the harness uses on its own runs, into a temporary
folder for the time of one command; the input is only read. Anything else passes as it is.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from pathlib import Path

from common.errors import LabError

ORT_PROFILE = "onnxruntime_profile*.json"


def _one(folder: Path, found: list[Path], what: str) -> Path:
    if len(found) > 1:
        raise LabError(
            f"{folder} holds {len(found)} {what}: {', '.join(p.name for p in found[:3])}",
            "give the folder of one run, or the file itself",
        )
    return found[0]


def _foreign(path: Path):
    """(kind, files) of what ``path`` holds when it is a copied lesson's output, else None."""
    from common.collect.torch_trace import raw_traces
    from common.formats.twin_timings import is_timings_file

    if path.is_file():
        if path.name.endswith(".pt.trace.json"):
            return "torch", [path]
        if path.suffix == ".json" and path.name.startswith("onnxruntime_profile"):
            return "ort", [path]
        if path.suffix == ".csv" and is_timings_file(path):
            return "twin", [path]
        return None
    traces = raw_traces(path)
    if traces:
        return "torch", traces
    if not path.is_dir() or any(path.glob("PROF_*")) or any(path.glob("*_ascend_pt")):
        return None
    if found := sorted(path.glob(ORT_PROFILE)):
        return "ort", [_one(path, found, "ONNX Runtime profiles (onnxruntime_profile*.json)")]
    if found := [p for p in sorted(path.glob("*.csv")) if is_timings_file(p)]:
        return "twin", [_one(path, found, "kernel twin timings CSVs")]
    return None


def _convert(kind: str, files: list[Path], into: Path) -> str:
    """Write ``files`` under ``into`` in the lab's layout; a line saying what was read."""
    if kind == "torch":
        from common.collect.torch_trace import convert_rank_traces, convert_raw_trace

        if len(files) == 1:
            convert_raw_trace(files[0], into)
            return f"{files[0]} is a torch.profiler trace: read through the lab's conversion to torch_npu's layout"
        convert_rank_traces(files, into)
        return (
            f"{files[0].parent}: {len(files)} ranks' torch.profiler traces, read through the lab's conversion "
            "to torch_npu's multi-rank layout"
        )
    if kind == "ort":
        from common.modes.pyacl.ort_profile import convert_profile

        return f"{files[0]} is an ONNX Runtime profile, read as msprof's files: {convert_profile(files[0], into)}"
    from common.modes.ascendc.twin_profile import convert_timings

    return f"{files[0]} is the kernel twin's timings, read as msprof's files: {convert_timings(files[0], into)}"


@contextlib.contextmanager
def readable(path: str):
    """``path`` as the lab's readers take it: a copied lesson's output converted into a temporary folder for the
    time of the command (a note on stderr says what was read); any other path as it is."""
    found = _foreign(Path(path))
    if found is None:
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="msprof_lab_capture_") as tmp:
        print(f"note: {_convert(*found, Path(tmp))}", file=sys.stderr)
        yield tmp


def report_folder(path: str) -> str:
    """Where ``report`` writes its files when no --out is given: beside the data (a file's folder)."""
    return str(Path(path).parent) if Path(path).is_file() else path
