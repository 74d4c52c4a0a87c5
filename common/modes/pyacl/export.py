"""The export, as the lab runs it: the lesson ``03_api_pyAcl/src/export_onnx.py`` launched as a program, then
the file it wrote checked and stamped with the workload it was built from (``run.sh`` refuses a model of another).

The lesson exports the workload's model (``--model FILE``, or its own TinyMLP, the lab's) with the exporter the
installed torch recommends: from torch 2.5 the dynamo-based one (``torch.export``, opset 18); before, or when
``torch.export`` cannot capture the model (a branch on a tensor's value), the TorchScript tracer (opset 17), whose
warnings the lesson prints. The lab reads, from those, where the trace turned a tensor into a Python value (the
graph keeps it as a constant: a frozen path), and keeps them in the file too. It then names every node of a
dynamo-exported graph after the module it belongs to, as the TorchScript exporter names them
(``/model/net/net.0/Gemm``: what per-op precision and ATC's op names go by), and refuses a graph ATC cannot take.
"""

from __future__ import annotations

import ast
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
# The ONNX opsets ATC's parser accepts (docs/npu_reference.md, ATC-ONNX): a graph outside them, or with an op of
# another domain, is refused at build time on every backend, as ATC would refuse it.
ATC_OPSETS = range(9, 19)
ONNX_DOMAINS = ("", "ai.onnx")
NAME_SCOPES = "pkg.torch.onnx.name_scopes"  # a dynamo-exported node's modules, outermost first, then its torch op
# A warning as Python prints it: "<file>:<line>: TracerWarning: Converting a tensor to a Python boolean ..."
TRACER_WARNING = re.compile(r"^(?P<file>.+?):(?P<line>[0-9]+): TracerWarning: (?P<message>.*)$", re.M)


FROZEN_KEY = "msprof_lab.frozen_path"  # where the tracer turned a tensor value into a Python value
FALLBACK_KEY = "msprof_lab.exporter_fallback"  # why the dynamo exporter could not capture the model, if it could not


def stamp(model, files: ModelFiles, frozen: list[str] = (), fallback: str | None = None) -> None:
    """Write the workload's name and hash into the model's metadata (run.sh refuses a model of another), where the
    trace froze the model's control flow, if it did, and why the dynamo exporter gave way to the tracer, if it did."""
    for prop in list(model.metadata_props):
        if prop.key in (RECORD_KEY, FROZEN_KEY, FALLBACK_KEY):
            model.metadata_props.remove(prop)
    for key, value in ((RECORD_KEY, files.record()), (FROZEN_KEY, list(frozen)), (FALLBACK_KEY, fallback)):
        if value:
            entry = model.metadata_props.add()
            entry.key, entry.value = key, json.dumps(value)


def opset(model) -> int | None:
    """The graph's version of the standard ONNX domain."""
    return next((o.version for o in model.opset_import if o.domain in ONNX_DOMAINS), None)


def atc_refusal(model) -> str | None:
    """Why ATC cannot take the graph, naming the op (None when it can): an op outside the standard ONNX domain, an
    op that no opset ATC accepts defines, or a graph of an opset outside them."""
    import onnx

    last = ATC_OPSETS[-1]
    for node in model.graph.node:
        where = f"{node.op_type} (node {node.name})" if node.name else node.op_type
        if node.domain not in ONNX_DOMAINS:
            return f"op {node.domain}::{where} is outside the standard ONNX domain ATC's parser reads"
        try:
            onnx.defs.get_schema(node.op_type, last, node.domain)
        except onnx.defs.SchemaError:
            return f"op {where} is defined in no ONNX opset up to {last}, the newest ATC accepts"
    version = opset(model)
    if version not in ATC_OPSETS:
        return f"the graph is ONNX opset {version}; ATC accepts opsets {ATC_OPSETS[0]}-{last}"
    return None


def name_by_module(model) -> None:
    """Name every node of a dynamo-exported graph after the module it belongs to, as the TorchScript exporter does
    (``/model/net/net.0/linear``, from the node's ``pkg.torch.onnx.name_scopes``), and each value it computes
    ``<node>_output_<i>``, so that per-op precision and ATC's op names (a dump's, msprof's) say where a node comes
    from. A graph without those scopes (the TorchScript exporter's) is left as it is; so are graph inputs and outputs,
    and the values of a graph with subgraphs (a subgraph may read them by name)."""
    keep = {v.name for v in (*model.graph.input, *model.graph.output, *model.graph.initializer)}
    renames: dict[str, str] = {}
    nested = any(a.type in (a.GRAPH, a.GRAPHS) for n in model.graph.node for a in n.attribute)
    for node in model.graph.node:
        scopes = next((ast.literal_eval(p.value) for p in node.metadata_props if p.key == NAME_SCOPES), None)
        if not scopes or len(scopes) < 2:
            continue
        modules = [s.removeprefix(scopes[1] + ".") if i else s for i, s in enumerate(scopes[1:-1])]
        node.name = "/" + "/".join([*modules, node.name.removeprefix("node_")])
        for i, value in enumerate(node.output):
            if value and value not in keep and not nested:
                renames[value] = f"{node.name}_output_{i}"
    for node in model.graph.node:
        node.input[:] = [renames.get(v, v) for v in node.input]
        node.output[:] = [renames.get(v, v) for v in node.output]
    for info in model.graph.value_info:
        info.name = renames.get(info.name, info.name)


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
    argv = [
        sys.executable,
        str(LESSON),
        *(["--model", files.workload.path] if files.workload.path else []),
        "--out",
        str(tmp),
    ]
    with tempfile.TemporaryDirectory() as folder:
        # stdout kept back (on a failure the exporter prints the whole traced graph); stderr read for the warnings
        log = Path(folder) / "stderr.txt"
        run = launcher.run_command(argv, dict(os.environ), capture=True, stderr=log)
        stderr = log.read_text(errors="replace")
    run.raise_if_stopped()
    if not run.ok or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        said = [line for line in stderr.splitlines() if line.startswith("Error: ")]
        reason = (
            _reason(said[-1].removeprefix("Error: ").removeprefix("torch.onnx.export failed: "))
            if said
            else (f"{LESSON.name} {run.describe}")
        )
        raise LabError(
            f"{files.workload.where}: torch.onnx.export failed: {reason}",
            "mode 03 needs a model torch.export (the dynamo exporter) or the TorchScript tracer can write",
        )
    graph = onnx.load(str(tmp))
    refused = atc_refusal(graph)
    if refused:
        tmp.unlink()
        raise LabError(
            f"{files.workload.where}: ATC cannot take the exported graph: {refused}",
            f"write that part of the model with ops of ONNX opsets {ATC_OPSETS[0]}-{ATC_OPSETS[-1]}",
        )
    names = [i.name for i in graph.graph.input], [o.name for o in graph.graph.output]
    if names != (files.input_names, files.output_names):
        tmp.unlink()
        raise LabError(
            f"{files.workload.where}: the exported graph takes {names[0]} and gives {names[1]}, "
            f"the model {files.input_names} and {files.output_names}",
            "make every input of make_input() used by forward() and every output a distinct tensor",
        )
    name_by_module(graph)
    fallback = [line for line in stderr.splitlines() if line.startswith("note: the dynamo exporter")]
    stamp(graph, files, frozen_places(stderr), fallback[-1].removeprefix("note: ") if fallback else None)
    onnx.save(graph, str(tmp))
    onnx.checker.check_model(str(tmp), full_check=True)
    tmp.replace(path)  # only a checked file takes the real name
    return path


def _reason(text: str, most: int = 240) -> str:
    """The exporter's message without the traced graph it appends (``[Caused by the value ...``), at most
    ``most`` characters."""
    text = text.split("[Caused by")[0].strip().strip("\"'")  # a message some exporter errors quote
    return text if len(text) <= most else text[: most - 3].rstrip() + "..."


def export_notes(files: ModelFiles, path: Path) -> list[str]:
    """What the export changed about the model, said once: an fp32 copy of a low-precision model, a frozen path."""
    import onnx

    notes = []
    if files.workload.precision != "fp32":
        notes.append(
            f"note: {files.workload.name} is an {files.workload.precision} model; the graph is an fp32 copy "
            "of it (model.float()), and 03's outputs are compared with that copy's CPU output"
        )
    graph = onnx.load(str(path), load_external_data=False)
    fallback = metadata_value(graph, FALLBACK_KEY)
    if fallback:
        notes.append(f"note: {fallback}")
    frozen = frozen_path(graph)
    if frozen:
        notes.append(
            f"note: the trace turned tensors into Python values at {', '.join(frozen)}: the graph keeps "
            "them as constants (a shape's value holds for any input of this shape; a branch or a loop count "
            "on the input's values holds for this input only)"
        )
    return notes
