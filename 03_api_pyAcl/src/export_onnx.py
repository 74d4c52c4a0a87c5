"""Export the shared TinyMLP to ONNX, the file ATC and ONNX Runtime both start from.

What you will do: trace ``common.workload.build_model()`` (same seed, same weights) on the
shared input and write ``model/tiny_mlp.onnx`` with one input ``x`` of shape [32, 1024].

What you will learn:
- an offline model is a frozen graph: shapes, dtypes and weights are fixed at export time;
- which ops the graph holds before any tool optimizes it (Gemm + the Erf form of GELU);
- that the file is checked (``onnx.checker``) before anything converts it.
"""

from __future__ import annotations

import sys
import warnings
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root, for `common`

from variants import INPUT_NAME, ONNX_MODEL, OUTPUT_NAME

from common.errors import ArgumentParser, LabError, run_cli

# Opset 17: GELU is exported as its Erf formula (Div, Erf, Add, Mul, Mul), which ATC and
# ONNX Runtime both fuse back into one Gelu op. The single-op Gelu only exists from opset 20,
# newer than what many CANN releases' ONNX parser accepts, so 17 is the portable choice.
OPSET = 17


def export(path: Path = ONNX_MODEL) -> Path:
    """Write the shared model as ONNX to ``path`` and check it; returns ``path``."""
    import onnx
    import torch

    from common.workload import build_model, make_input

    model, example = build_model(), make_input()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.onnx")
    with warnings.catch_warnings():
        # torch 2.13 announces that the TorchScript exporter is deprecated. We still use it
        # (dynamo=False): the new exporter needs the onnxscript package, which this lab does
        # not require, and both give the same graph for a model this simple.
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)
        torch.onnx.export(
            model,
            (example,),
            str(tmp),
            input_names=[INPUT_NAME],
            output_names=[OUTPUT_NAME],
            opset_version=OPSET,
            dynamo=False,  # no dynamic axes either: ATC gets the fixed shape x:32,1024
        )
    onnx.checker.check_model(onnx.load(str(tmp)), full_check=True)
    tmp.replace(path)  # only a checked file takes the real name
    return path


def describe(path: Path) -> str:
    """One line: the graph's input and its ops counted by type."""
    import onnx

    graph = onnx.load(str(path)).graph
    dims = [d.dim_value for d in graph.input[0].type.tensor_type.shape.dim]
    ops = Counter(n.op_type for n in graph.node if n.op_type != "Constant")
    return f"{path.name}: input {graph.input[0].name}{dims}, ops " + ", ".join(
        f"{k} x{v}" for k, v in sorted(ops.items())
    )


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=ONNX_MODEL, help=f"ONNX file to write (default {ONNX_MODEL})")
    args = parser.parse_args(argv)
    if args.output.suffix != ".onnx":
        raise LabError(f"{args.output}: the output should end in .onnx", "e.g. --output model/tiny_mlp.onnx")
    path = export(args.output)
    print(f"exported {describe(path)}")
    return 0


if __name__ == "__main__":
    run_cli(main)
