"""Export the workload's model to ONNX, the file ATC and ONNX Runtime both start from.

What you will do: trace the workload's ``build_model()`` (same seed, same weights) on its
``make_input()`` and write ``model/<name>.onnx``: one graph input per input (named after
forward()'s parameters, ``x`` for TinyMLP), one graph output per output (``y``, or ``y0``, ``y1`` ...).

What you will learn:
- an offline model is a frozen graph: shapes, dtypes and weights are fixed at export time;
- which ops the graph holds before any tool optimizes it (TinyMLP: Gemm + the Erf form of GELU);
- that the file is checked (``onnx.checker``) and records its workload before anything converts it.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import re
import sys
import tempfile
import warnings
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root, for `common`

from variants import RECORD_KEY, ModelFiles, metadata_value

from common.errors import ArgumentParser, LabError, run_cli
from common.workload import flatten_output, load_workload

# Opset 17: GELU is exported as its Erf formula (Div, Erf, Add, Mul, Mul), which ATC and
# ONNX Runtime both fuse back into one Gelu op. The single-op Gelu only exists from opset 20,
# newer than what many CANN releases' ONNX parser accepts, so 17 is the portable choice.
OPSET = 17


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


def _frozen(caught: list[warnings.WarningMessage]) -> list[str]:
    """Where the tracer turned a tensor into a Python value (``file:line (a Python boolean)``): the graph keeps
    that value as a constant — a shape's, or one computed from the input (a branch, a loop count)."""
    import torch

    found = []
    for w in caught:
        if issubclass(w.category, torch.jit.TracerWarning):
            kind = re.search(r"to a Python (\w+)", str(w.message))
            what = f"a Python {kind[1]}" if kind else str(w.message).split(".")[0][:60]
            entry = f"{Path(w.filename).name}:{w.lineno} ({what})"
            if entry not in found:
                found.append(entry)
    return found


def exporter_choice(export_fn) -> dict:
    """``dynamo=False`` where ``torch.onnx.export`` takes that argument (torch >= 2.5), else nothing.

    torch 2.1-2.4 (the lines CANN 8.0.x pairs with) have only the TorchScript exporter and refuse
    ``dynamo=`` as an unexpected keyword; from 2.9 ``dynamo=True`` is the default, so there it must be
    turned off by name.
    """
    return {"dynamo": False} if "dynamo" in inspect.signature(export_fn).parameters else {}


def flat_outputs(model):
    """The model with its outputs as one flat tuple (a dict, a dataclass ... in the order the lab compares
    them, common.workload.flatten_output): one graph output per tensor."""
    import torch

    class FlatOutputs(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *x):
            return tuple(flatten_output(self.model(*x)))

    return FlatOutputs().eval()


def export(files: ModelFiles) -> Path:
    """Write the workload's model as ONNX to ``files.onnx``, stamped and checked; returns the path.

    An fp16 or bf16 model is exported as an fp32 copy: the graph every variant starts from is fp32
    (the variants choose the precision), and 03 compares its outputs with that copy's CPU output.
    """
    import onnx
    import torch

    path = files.onnx
    model, example = files.workload.fp32_copy()
    model = flat_outputs(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.onnx")
    with warnings.catch_warnings(record=True) as caught:
        # torch 2.13 announces that the TorchScript exporter is deprecated. We still use it
        # (dynamo=False where torch has the switch): the new exporter needs the onnxscript package,
        # which this lab does not require, and both give the same graph for TinyMLP. The tracer's
        # own warnings are kept: they say where forward() branches or loops on a tensor's value.
        warnings.simplefilter("always", torch.jit.TracerWarning)
        try:
            with _quiet_stdout():  # on a failure the exporter prints the whole traced graph (from C++)
                torch.onnx.export(model, example, str(tmp), input_names=files.input_names,
                                  output_names=files.output_names, opset_version=OPSET,
                                  **exporter_choice(torch.onnx.export))  # no dynamic axes: ATC gets fixed shapes
        except Exception as err:  # noqa: BLE001 (the user's model: an op the exporter cannot write)
            tmp.unlink(missing_ok=True)
            raise LabError(f"{files.workload.where}: torch.onnx.export failed: {_reason(err)}",
                           "mode 03 needs a model the TorchScript ONNX exporter (opset 17) can write") from None
    graph = onnx.load(str(tmp))
    names = [i.name for i in graph.graph.input], [o.name for o in graph.graph.output]
    if names != (files.input_names, files.output_names):
        tmp.unlink()
        raise LabError(f"{files.workload.where}: the exported graph takes {names[0]} and gives {names[1]}, "
                       f"the model {files.input_names} and {files.output_names}",
                       "make every input of make_input() used by forward() and every output a distinct tensor")
    stamp(graph, files, _frozen(caught))
    onnx.save(graph, str(tmp))
    onnx.checker.check_model(str(tmp), full_check=True)
    tmp.replace(path)  # only a checked file takes the real name
    return path


@contextlib.contextmanager
def _quiet_stdout():
    """File descriptor 1 (what C++ code prints to, and Python's own prints) into a discarded file."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with tempfile.TemporaryFile() as sink:
            os.dup2(sink.fileno(), 1)
            try:
                yield
            finally:
                sys.stdout.flush()
                os.dup2(saved, 1)
    finally:
        os.close(saved)


def _reason(err: Exception, most: int = 240) -> str:
    """The exporter's message without the traced graph it appends (``[Caused by the value ...``), at most
    ``most`` characters."""
    text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    text = text.split("[Caused by")[0].strip()
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


def describe(path: Path) -> str:
    """One line: the graph's inputs and its ops counted by type."""
    import onnx

    graph = onnx.load(str(path)).graph
    inputs = ", ".join(f"{i.name}{[d.dim_value for d in i.type.tensor_type.shape.dim]}" for i in graph.input)
    ops = Counter(n.op_type for n in graph.node if n.op_type != "Constant")
    return f"{path.name}: input {inputs}, ops " + ", ".join(f"{k} x{v}" for k, v in sorted(ops.items()))


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default=None, help="workload file (default $MSPROF_LAB_WORKLOAD, else TinyMLP)")
    args = parser.parse_args(argv)
    files = ModelFiles(load_workload(args.workload))
    path = export(files)
    print(f"exported {describe(path)}", *export_notes(files, path), sep="\n")
    return 0


if __name__ == "__main__":
    run_cli(main)
