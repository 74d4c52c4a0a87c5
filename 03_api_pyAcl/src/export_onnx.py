"""Export a PyTorch model to ONNX: the file ATC (on an NPU) and ONNX Runtime (anywhere) start from.

What you will do: trace your model (``--model FILE``, else TinyMLP) on its input and write one ONNX file,
    python export_onnx.py --model my_model.py --out model.onnx
then, on an NPU, convert it offline with ATC into the ``model.om`` that infer.py runs with pyACL:
    atc --model=model.onnx --framework=5 --output=model --soc_version=<npu-smi info's Name, e.g. Ascend910B3> \\
        --input_shape="x:32,1024"    # every input, name:dims, quoted, ";" between inputs ("a:8,16;b:8,4")
    # + --precision_mode=must_keep_origin_dtype to keep fp32 (ATC's default computes in fp16 and adds Casts)

What you will learn:
- an offline model is a frozen graph: shapes, dtypes and weights are fixed at export time; torch.export
  refuses forward() that branches on a tensor's value, the older tracer keeps the branch it took (and warns);
- the graph's inputs and outputs are named here (forward()'s parameters; y, or y0, y1 ...): ATC's
  --input_shape and every later tool refer to them by these names.
"""

import argparse
import importlib.util
import inspect
import sys
import warnings
from pathlib import Path

import torch
from torch import nn
from torch.utils._pytree import tree_leaves  # how torch.export and transformers flatten outputs

# The exporter torch recommends: from torch 2.5 the dynamo-based one (torch.export, then onnxscript), at opset 18,
# its lowest and the highest ATC's ONNX parser accepts (opsets 9-18); before 2.5 (the torch 2.1-2.4 of CANN 8.0's
# torch_npu) the TorchScript tracer, at opset 17. Both write GELU as its Erf formula (opset 20's one Gelu op is
# newer than ATC takes), which ATC and ONNX Runtime fuse back into one Gelu.
OPSET = {"dynamo": 18, "torchscript": 17}


# --- 1. the export ---------------------------------------------------------------------------------
class Flat(nn.Module):
    """The model with its outputs as one flat tuple (the module under it keeps the name ``model``)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, *x):
        return tuple(tensors(self.model(*x)))


def export(model, inputs, out):
    """Capture ``model`` on ``inputs`` and write ``out``; returns the graph's (input names, output names, exporter)."""
    with torch.no_grad():
        outputs = tensors(model(*inputs))
    low = (torch.float16, torch.bfloat16)
    if any(t.dtype in low for t in [*outputs, *model.parameters()]):  # an fp16 / bf16 model: an fp32 graph
        model, inputs = model.float(), tuple(t.float() if t.is_floating_point() else t for t in inputs)
    params = inspect.signature(model.forward).parameters.values()
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    names = names[: len(inputs)] if len(names) >= len(inputs) else [f"input_{i}" for i in range(len(inputs))]
    outs = ["y"] if len(outputs) == 1 else [f"y{i}" for i in range(len(outputs))]
    outs = [f"out_{name}" if name in names else name for name in outs]
    flat, dynamo = Flat(model).eval(), "dynamo" in inspect.signature(torch.onnx.export).parameters
    if dynamo:  # no dynamic shapes, no dynamic axes: ATC gets fixed shapes
        try:
            torch.onnx.export(
                flat,
                inputs,
                str(out),
                input_names=names,
                output_names=outs,
                verbose=False,
                opset_version=OPSET["dynamo"],
                dynamo=True,
            )
            return names, outs, "dynamo"
        except Exception as err:  # noqa: BLE001 (e.g. a branch on a tensor's value: torch.export cannot choose)
            print(
                f"note: the dynamo exporter cannot capture the model ({one_line(err)}); the TorchScript tracer "
                "exports the path this input takes instead",
                file=sys.stderr,
            )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # "the TorchScript exporter is deprecated"
        warnings.simplefilter("always", torch.jit.TracerWarning)  # where the trace froze a value: see them all
        torch.onnx.export(
            flat,
            inputs,
            str(out),
            input_names=names,
            output_names=outs,
            opset_version=OPSET["torchscript"],
            **({"dynamo": False} if dynamo else {}),
        )
    return names, outs, "torchscript"


def one_line(err) -> str:
    """An exporter's error in one line: the first line of its innermost cause (torch.export's own reason)."""
    while err.__cause__ is not None:
        err = err.__cause__
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__


# --- 2. the model: yours with --model FILE, else TinyMLP (this block is the same in every lesson) -------------------
class TinyMLP(torch.nn.Module):  # <- your model here, or pass --model FILE
    """4 x Linear(1024, 1024) with a GELU between each pair."""

    def __init__(self, hidden=1024):
        super().__init__()
        layers = [m for _ in range(3) for m in (torch.nn.Linear(hidden, hidden), torch.nn.GELU())]
        self.net = torch.nn.Sequential(*layers, torch.nn.Linear(hidden, hidden))

    def forward(self, x):
        return self.net(x)


def load_model(path, rows=32):
    """(model, inputs, loss) of a ``--model`` file: build_model() under seed 0, make_input() under seed 1 (a tuple
    or list: separate arguments), its loss(output, input) or None. ``path`` None: TinyMLP, ``rows`` x 1024 input."""
    module = None
    if path is not None:
        sys.path.append(str(Path(path).resolve().parent))  # the model file may import the files beside it
        spec = importlib.util.spec_from_file_location("user_model", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    torch.manual_seed(0)
    model = TinyMLP() if module is None else module.build_model()
    torch.manual_seed(1)
    x = torch.randn(rows, 1024) if module is None else module.make_input()
    inputs = tuple(x) if isinstance(x, (tuple, list)) else (x,)
    return model.eval(), inputs, getattr(module, "loss", None)


def tensors(output) -> list:
    """Every tensor of an output in torch's pytree order, then other objects' attributes (a dataclass, a KV cache)."""
    found = []  # tuples, lists, dicts, registered classes (ModelOutput) opened; an object: its attributes as set
    for t in tree_leaves(output):
        found += [t] if torch.is_tensor(t) else tensors([*vars(t).values()]) if hasattr(t, "__dict__") else []
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a Python file defining build_model() and make_input() (default: TinyMLP)")
    parser.add_argument("--out", type=Path, default=Path("model.onnx"), help="the ONNX file to write")
    args = parser.parse_args(argv)
    if args.model is not None and not Path(args.model).is_file():
        parser.error(f"--model {args.model}: no such file")
    model, inputs, _ = load_model(args.model)
    try:
        names, outs, exporter = export(model, inputs, args.out)
    except Exception as err:  # noqa: BLE001 (an op the exporter cannot write: one line, no traceback)
        sys.exit(f"Error: torch.onnx.export failed: {one_line(err)}")
    import onnx  # the file, checked before any tool converts it

    onnx.checker.check_model(str(args.out), full_check=True)
    shapes = ";".join(f"{n}:{','.join(map(str, t.shape))}" for n, t in zip(names, inputs))
    print(
        f"exported {args.out} ({exporter} exporter, opset {OPSET[exporter]}): inputs {', '.join(names)}, outputs "
        f'{", ".join(outs)} (ATC: --input_shape="{shapes}")'
    )  # quoted: bash splits at ';'
    return 0


if __name__ == "__main__":
    sys.exit(main())
