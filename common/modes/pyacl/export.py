"""The export, as the lab runs it: the lesson ``03_api_pyAcl/src/export_onnx.py`` launched as a program, then
the file it wrote checked and stamped with the workload it was built from (``run.sh`` refuses a model of another).

The lesson traces the workload's model (``--model FILE``, or its own TinyMLP, the lab's) with the TorchScript
exporter at opset 17 and prints the tracer's warnings; the lab reads, from those, where the trace turned a
tensor into a Python value (the graph keeps it as a constant: a frozen path), and keeps them in the file too.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from pathlib import Path

from common.collect import launcher
from common.errors import LabError
from common.modes import lesson_file
from common.modes.pyacl.variants import RECORD_KEY, ModelFiles, metadata_value

LESSON = lesson_file("03_api_pyAcl", "export_onnx.py")
# Opset 17: GELU is exported as its Erf formula (Div, Erf, Add, Mul, Mul), which ATC and ONNX Runtime
# both fuse back into one Gelu op (the lesson says why; this is what the build line reports).
OPSET = 17
# A warning as Python prints it: "<file>:<line>: TracerWarning: Converting a tensor to a Python boolean ..."
TRACER_WARNING = re.compile(r"^(?P<file>.+?):(?P<line>[0-9]+): TracerWarning: (?P<message>.*)$", re.M)


FROZEN_KEY = "msprof_lab.frozen_path"  # where the tracer turned a tensor value into a Python value


def stamp(model, files: ModelFiles, frozen: list[str] = ()) -> None:
    """Write the workload's name and hash into the model's metadata (run.sh refuses a model of another), and
    where the trace froze the model's control flow, if it did."""
    for prop in list(model.metadata_props):
        if prop.key in (RECORD_KEY, FROZEN_KEY):
            model.metadata_props.remove(prop)
    entry = model.metadata_props.add()
    entry.key, entry.value = RECORD_KEY, json.dumps(files.record())
    if frozen:
        entry = model.metadata_props.add()
        entry.key, entry.value = FROZEN_KEY, json.dumps(list(frozen))


def frozen_path(model) -> list[str]:
    """Where the export traced data-dependent control flow (``file:line: what``), as the model records it."""
    return metadata_value(model, FROZEN_KEY) or []


def frozen_places(stderr: str) -> list[str]:
    """Where the tracer turned a tensor into a Python value (``file:line (a Python boolean)``), from the warnings
    the lesson printed: the graph keeps that value as a constant (a shape's, or one computed from the input)."""
    found = []
    for w in TRACER_WARNING.finditer(stderr):
        kind = re.search(r"to a Python (\w+)", w["message"])
        what = f"a Python {kind[1]}" if kind else w["message"].split(".")[0][:60]
        entry = f"{Path(w['file']).name}:{w['line']} ({what})"
        if entry not in found:
            found.append(entry)
    return found


def export(files: ModelFiles) -> Path:
    """Write the workload's model as ONNX to ``files.onnx`` with the lesson, checked and stamped; returns the path.

    An fp16 or bf16 model is exported as an fp32 copy (the lesson does that): the graph every variant starts from
    is fp32, the variants choose the precision, and 03 compares its outputs with that copy's CPU output.
    """
    import onnx

    path = files.onnx
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.onnx")
    argv = [sys.executable, str(LESSON), *(["--model", files.workload.path] if files.workload.path else []),
            "--out", str(tmp)]
    with tempfile.TemporaryDirectory() as folder:
        # stdout kept back (on a failure the exporter prints the whole traced graph); stderr read for the warnings
        log = Path(folder) / "stderr.txt"
        run = launcher.run_command(argv, dict(os.environ), capture=True, stderr=log)
        stderr = log.read_text(errors="replace")
    run.raise_if_stopped()
    if not run.ok or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        said = [line for line in stderr.splitlines() if line.startswith("Error: ")]
        reason = _reason(said[-1].removeprefix("Error: ").removeprefix("torch.onnx.export failed: ")) if said else (
            f"{LESSON.name} {run.describe}")
        raise LabError(f"{files.workload.where}: torch.onnx.export failed: {reason}",
                       "mode 03 needs a model the TorchScript ONNX exporter (opset 17) can write")
    graph = onnx.load(str(tmp))
    names = [i.name for i in graph.graph.input], [o.name for o in graph.graph.output]
    if names != (files.input_names, files.output_names):
        tmp.unlink()
        raise LabError(f"{files.workload.where}: the exported graph takes {names[0]} and gives {names[1]}, "
                       f"the model {files.input_names} and {files.output_names}",
                       "make every input of make_input() used by forward() and every output a distinct tensor")
    stamp(graph, files, frozen_places(stderr))
    onnx.save(graph, str(tmp))
    onnx.checker.check_model(str(tmp), full_check=True)
    tmp.replace(path)  # only a checked file takes the real name
    return path


def _reason(text: str, most: int = 240) -> str:
    """The exporter's message without the traced graph it appends (``[Caused by the value ...``), at most
    ``most`` characters."""
    text = text.split("[Caused by")[0].strip().strip("\"'")  # a message some exporter errors quote
    return text if len(text) <= most else text[:most - 3].rstrip() + "..."


def export_notes(files: ModelFiles, path: Path) -> list[str]:
    """What the export changed about the model, said once: an fp32 copy of a low-precision model, a frozen path."""
    import onnx

    notes = []
    if files.workload.precision != "fp32":
        notes.append(f"note: {files.workload.name} is an {files.workload.precision} model; the graph is an fp32 copy "
                     "of it (model.float()), and 03's outputs are compared with that copy's CPU output")
    frozen = frozen_path(onnx.load(str(path)))
    if frozen:
        notes.append(f"note: the trace turned tensors into Python values at {', '.join(frozen)}: the graph keeps "
                     "them as constants (a shape's value holds for any input of this shape; a branch or a loop count "
                     "on the input's values holds for this input only)")
    return notes
